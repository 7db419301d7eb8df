"""SAGEConv, GraphConv and GATConv over dgld blocks, written to be scripted
(torch.jit.script). Parameter names and initialisation are DGL's, and each
layer computes what trainer-host's built-in layer of the same kind computes
for the same weights (tests/python/test_nn.py checks it)."""

import math
from typing import Optional, Tuple, Union

import torch
from torch import Tensor, nn

from .. import _C  # noqa: F401 - registers torch.classes.dgld.Block and torch.ops.dgld
from .._errors import InvalidArgument
from ..graph import DGLGraph

Block = torch.classes.dgld.Block


def native_block(graph):
    """The torch.classes.dgld.Block a layer's kernels run on: a DGLGraph's
    or DGLBlock's CSR (made once per graph), or the Block itself. Eager
    mode only: a scripted layer takes Blocks."""
    if isinstance(graph, DGLGraph):
        return graph._csr()
    return graph

def project_before_aggregating(num_edges: int, num_src: int, num_dst: int, in_dim: int, out_dim: int,
                               input_needs_grad: bool) -> bool:
    """Whether projecting in_dim-wide rows to out_dim before aggregating them
    costs less than aggregating first (DGL's lin_before_mp, decided by cost:
    counting the backward passes when grad mode is on, and the input's
    gradient only when it needs one)."""
    # One aggregated element (a row element read from a random source row and
    # added) costs about as much as this many multiply-adds of a matrix
    # product (the same constant as trainer-host's model.cpp).
    element_cost = 4.0
    training = torch.is_grad_enabled()
    gemm_passes = 1.0
    if training:
        gemm_passes = 3.0 if input_needs_grad else 2.0
    project_aggr = 1.0
    if training:
        project_aggr = 2.0
    aggregate_aggr = 1.0
    if training and input_needs_grad:
        aggregate_aggr = 2.0
    e = float(num_edges)
    project = float(num_src) * in_dim * out_dim * gemm_passes + e * out_dim * element_cost * project_aggr
    aggregate = float(num_dst) * in_dim * out_dim * gemm_passes + e * in_dim * element_cost * aggregate_aggr
    return project < aggregate


def _check_degrees(graph: Block, allow_zero_in_degree: bool):
    if not allow_zero_in_degree and graph.num_dst_nodes() > 0:
        if bool((graph.in_degrees() == 0).any()):
            raise RuntimeError("There are 0-in-degree nodes in the graph, output for those nodes will be invalid. "
                               "Add self-loops, or pass allow_zero_in_degree=True to the layer.")


class SAGEConv(nn.Module):
    """DGL's SAGEConv with the mean aggregator:
    h_dst' = W_self h_dst + W_neigh mean_{u in N(v)} h_u + b."""

    def __init__(self, in_feats: int, out_feats: int, aggregator_type: str = "mean", feat_drop: float = 0.0,
                 bias: bool = True, norm=None, activation=None):
        super().__init__()
        if aggregator_type != "mean":
            raise InvalidArgument(f"SAGEConv: dgld has the 'mean' aggregator, not {aggregator_type!r}")
        if norm is not None:
            raise InvalidArgument("SAGEConv: norm is not supported by dgld yet")
        self._in_src_feats = int(in_feats)
        self._out_feats = int(out_feats)
        self._aggre_type = aggregator_type
        self.feat_drop = nn.Dropout(feat_drop)
        self.fc_self = nn.Linear(self._in_src_feats, self._out_feats, bias=False)
        self.fc_neigh = nn.Linear(self._in_src_feats, self._out_feats, bias=False)
        if bias:
            self.bias = nn.Parameter(torch.zeros(self._out_feats))
        else:
            self.register_buffer("bias", None)
        self.activation = activation
        self.reset_parameters()

    def reset_parameters(self):
        gain = nn.init.calculate_gain("relu")
        nn.init.xavier_uniform_(self.fc_self.weight, gain=gain)
        nn.init.xavier_uniform_(self.fc_neigh.weight, gain=gain)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, graph: Block, feat: Union[Tensor, Tuple[Tensor, Tensor]]) -> Tensor:
        if not torch.jit.is_scripting():
            graph = native_block(graph)
        if isinstance(feat, Tensor):
            h_src = self.feat_drop(feat)
            h_dst = h_src[:graph.num_dst_nodes()]
        else:
            h_src = self.feat_drop(feat[0])
            h_dst = self.feat_drop(feat[1])
        if project_before_aggregating(graph.num_edges(), graph.num_src_nodes(), graph.num_dst_nodes(),
                                      self._in_src_feats, self._out_feats, h_src.requires_grad):
            h_neigh = torch.ops.dgld.copy_u_reduce(graph, self.fc_neigh(h_src), "mean", False)
        else:
            h_neigh = self.fc_neigh(torch.ops.dgld.copy_u_reduce(graph, h_src, "mean", False))
        rst = self.fc_self(h_dst) + h_neigh
        if self.bias is not None:
            rst = rst + self.bias
        if self.activation is not None:
            rst = self.activation(rst)
        return rst


class GraphConv(nn.Module):
    """DGL's GraphConv (norm 'both', 'right' or 'none'):
    h_dst' = b + sum_{u in N(v)} h_u W / sqrt(d_out(u) d_in(v)).
    dgld addition: self_loop=True adds one self edge per dst node (dst v is
    src v), the block form of dgl.add_self_loop, as trainer-host's built-in
    GCN does."""

    def __init__(self, in_feats: int, out_feats: int, norm: str = "both", weight: bool = True, bias: bool = True,
                 activation=None, allow_zero_in_degree: bool = False, self_loop: bool = False):
        super().__init__()
        if norm not in ("none", "both", "right"):
            raise InvalidArgument(f"GraphConv: norm must be 'none', 'both' or 'right', got {norm!r}")
        if not weight:
            raise InvalidArgument("GraphConv: dgld's layer always has its weight")
        self._in_feats = int(in_feats)
        self._out_feats = int(out_feats)
        self._norm = norm
        self._allow_zero_in_degree = bool(allow_zero_in_degree)
        self._self_loop = bool(self_loop)
        self.weight = nn.Parameter(torch.empty(self._in_feats, self._out_feats))
        if bias:
            self.bias = nn.Parameter(torch.zeros(self._out_feats))
        else:
            self.register_buffer("bias", None)
        self.activation = activation
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.xavier_uniform_(self.weight)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, graph: Block, feat: Union[Tensor, Tuple[Tensor, Tensor]]) -> Tensor:
        if not torch.jit.is_scripting():
            graph = native_block(graph)
        if isinstance(feat, Tensor):
            h_src = feat
        else:
            h_src = feat[0]
        nd = graph.num_dst_nodes()
        if not self._self_loop:
            _check_degrees(graph, self._allow_zero_in_degree)
        norm_src = torch.ones(1)
        if self._norm == "both":
            out_deg = graph.out_degrees().to(torch.float32)
            if self._self_loop:
                out_deg[:nd] += 1.0
            norm_src = out_deg.clamp(min=1.0).pow(-0.5).unsqueeze(1)
        num_edges = graph.num_edges() + (nd if self._self_loop else 0)
        if project_before_aggregating(num_edges, graph.num_src_nodes(), nd, self._in_feats, self._out_feats,
                                      h_src.requires_grad):
            h = torch.matmul(h_src, self.weight)
            if self._norm == "both":
                h = h * norm_src
            rst = torch.ops.dgld.copy_u_reduce(graph, h, "sum", self._self_loop)
        else:
            h = h_src
            if self._norm == "both":
                h = h * norm_src
            rst = torch.matmul(torch.ops.dgld.copy_u_reduce(graph, h, "sum", self._self_loop), self.weight)
        if self._norm != "none":
            in_deg = graph.in_degrees().to(torch.float32)
            if self._self_loop:
                in_deg = in_deg + 1.0
            if self._norm == "both":
                rst = rst * in_deg.clamp(min=1.0).pow(-0.5).unsqueeze(1)
            else:
                rst = rst / in_deg.clamp(min=1.0).unsqueeze(1)
        if self.bias is not None:
            rst = rst + self.bias
        if self.activation is not None:
            rst = self.activation(rst)
        return rst


class GATConv(nn.Module):
    """DGL's GATConv: z = W h; e_uv = LeakyReLU(a_l.z_u + a_r.z_v); alpha the
    softmax of e over v's in-edges; h_v' = sum_u alpha_uv z_u + b, per head
    -> [num_dst, num_heads, out_feats]. Without attention dropout it runs
    dgld's fused kernel; with it, plain torch ops."""

    def __init__(self, in_feats: int, out_feats: int, num_heads: int, feat_drop: float = 0.0,
                 attn_drop: float = 0.0, negative_slope: float = 0.2, residual: bool = False, activation=None,
                 allow_zero_in_degree: bool = False, bias: bool = True):
        super().__init__()
        self._in_src_feats = int(in_feats)
        self._out_feats = int(out_feats)
        self._num_heads = int(num_heads)
        self._negative_slope = float(negative_slope)
        self._allow_zero_in_degree = bool(allow_zero_in_degree)
        self._attn_drop_p = float(attn_drop)
        self.fc = nn.Linear(self._in_src_feats, self._out_feats * self._num_heads, bias=False)
        self.attn_l = nn.Parameter(torch.empty(1, self._num_heads, self._out_feats))
        self.attn_r = nn.Parameter(torch.empty(1, self._num_heads, self._out_feats))
        self.feat_drop = nn.Dropout(feat_drop)
        self.attn_drop = nn.Dropout(attn_drop)
        if residual:
            if self._in_src_feats != self._out_feats * self._num_heads:
                self.res_fc = nn.Linear(self._in_src_feats, self._num_heads * self._out_feats, bias=False)
            else:
                self.res_fc = nn.Identity()
        else:
            self.register_buffer("res_fc", None)
        if bias:
            self.bias = nn.Parameter(torch.zeros(self._num_heads * self._out_feats))
        else:
            self.register_buffer("bias", None)
        self.activation = activation
        self.reset_parameters()

    def reset_parameters(self):
        gain = nn.init.calculate_gain("relu")
        nn.init.xavier_normal_(self.fc.weight, gain=gain)
        nn.init.xavier_normal_(self.attn_l, gain=gain)
        nn.init.xavier_normal_(self.attn_r, gain=gain)
        if self.bias is not None:
            nn.init.zeros_(self.bias)
        if isinstance(self.res_fc, nn.Linear):
            nn.init.xavier_normal_(self.res_fc.weight, gain=gain)

    def forward(self, graph: Block, feat: Union[Tensor, Tuple[Tensor, Tensor]]) -> Tensor:
        if not torch.jit.is_scripting():
            graph = native_block(graph)
        _check_degrees(graph, self._allow_zero_in_degree)
        if isinstance(feat, Tensor):
            h_src = self.feat_drop(feat)
        else:
            h_src = self.feat_drop(feat[0])
        nd = graph.num_dst_nodes()
        z = self.fc(h_src).view(-1, self._num_heads, self._out_feats)
        if self._attn_drop_p > 0.0 and self.training:
            rst = self._aggregate_with_dropout(graph, z)
        else:
            rst = torch.ops.dgld.gat_aggregate(graph, z, self.attn_l, self.attn_r, self._negative_slope)
        res_fc = self.res_fc
        if res_fc is not None:
            rst = rst + res_fc(h_src[:nd]).view(nd, self._num_heads, self._out_feats)
        if self.bias is not None:
            rst = rst + self.bias.view(1, self._num_heads, self._out_feats)
        if self.activation is not None:
            rst = self.activation(rst)
        return rst

    def _aggregate_with_dropout(self, graph: Block, z: Tensor) -> Tensor:
        src, dst = graph.edges()
        nd = graph.num_dst_nodes()
        el = (z * self.attn_l).sum(-1)
        er = (z[:nd] * self.attn_r).sum(-1)
        e = torch.nn.functional.leaky_relu(el.index_select(0, src) + er.index_select(0, dst), self._negative_slope)
        # Edges are grouped by dst: a segment max per dst shifts the scores.
        emax = torch.segment_reduce(e.detach(), "max", lengths=graph.in_degrees(), initial=0.0)
        ex = torch.exp(e - emax.index_select(0, dst))
        denom = torch.zeros(nd, self._num_heads, dtype=z.dtype).index_add_(0, dst, ex)
        alpha = self.attn_drop(ex / denom.index_select(0, dst))
        out = torch.zeros(nd, self._num_heads, self._out_feats, dtype=z.dtype)
        return out.index_add_(0, dst, z.index_select(0, src) * alpha.unsqueeze(-1))
