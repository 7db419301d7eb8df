"""DGL's GraphConv and EdgeWeightNorm on dgld's kernels.

GraphConv: rst = sum_{u->v} w_uv c_u h_u W c_v + b, with c_u = d_out(u)^-1/2
and c_v = d_in(v)^-1/2 for norm='both', c_u = 1/d_out(u) for 'left', c_v =
1/d_in(v) for 'right', none for 'none' (degrees clamped to 1; w_uv the
edge weight, 1 without one). DGL's parameter names and initialisation;
weight=False takes the weight in forward. dgld addition: self_loop=True
adds one self edge per dst node (dst v is src v), the block form of
dgl.add_self_loop, as trainer-host's built-in GCN does.

EdgeWeightNorm: DGL's normalisation of scalar edge weights by the weighted
degrees (norm 'both', 'right', 'none')."""

from typing import Optional, Tuple, Union

import torch
from torch import Tensor, nn

from .._errors import DGLError, InvalidArgument
from ._utils import Block, check_width, check_zero_in_degree, native_block, project_before_aggregating, set_shape


def _sum_neighbours(graph: Block, h: Tensor, edge_weight: Optional[Tensor], self_loop: bool) -> Tensor:
    if edge_weight is None:
        return torch.ops.dgld.copy_u_reduce(graph, h, "sum", self_loop)
    w = edge_weight.reshape(edge_weight.shape[0], -1).to(h.dtype)
    out = torch.ops.dgld.gspmm(graph, "mul", "sum", h, w, "u", "e")
    if self_loop:
        out = out + h[:graph.num_dst_nodes()]
    return out


class GraphConv(nn.Module):
    """DGL's GraphConv (see the module doc)."""

    def __init__(self, in_feats: int, out_feats: int, norm: str = "both", weight: bool = True, bias: bool = True,
                 activation=None, allow_zero_in_degree: bool = False, self_loop: bool = False):
        super().__init__()
        if norm not in ("none", "both", "right", "left"):
            raise DGLError('Invalid norm value. Must be either "none", "both", "right" or "left". But got '
                           f'"{norm}".')
        self._in_feats = int(in_feats)
        self._out_feats = int(out_feats)
        self._norm = norm
        self._allow_zero_in_degree = bool(allow_zero_in_degree)
        self._self_loop = bool(self_loop)
        if weight:
            self.weight = nn.Parameter(torch.empty(self._in_feats, self._out_feats))
        else:
            self.register_parameter("weight", None)
        if bias:
            self.bias = nn.Parameter(torch.zeros(self._out_feats))
        else:
            self.register_buffer("bias", None)
        self.activation = activation
        self.reset_parameters()

    @torch.jit.export
    def reset_parameters(self):
        weight = self.weight
        if weight is not None:
            nn.init.xavier_uniform_(weight)
        bias = self.bias
        if bias is not None:
            nn.init.zeros_(bias)

    @torch.jit.export
    def resize(self, in_feats: int, out_feats: int):
        """The layer for in_feats -> out_feats wide rows, its parameters drawn
        again (reset_parameters): how a model scripted at one width is sized
        for a graph (dgld.models, trainer-host's built-in models)."""
        self._in_feats = in_feats
        self._out_feats = out_feats
        weight = self.weight
        if weight is not None:
            set_shape(weight, [in_feats, out_feats])
        bias = self.bias
        if bias is not None:
            set_shape(bias, [out_feats])
        self.reset_parameters()

    def forward(self, graph: Block, feat: Union[Tensor, Tuple[Tensor, Tensor]], weight: Optional[Tensor] = None,
                edge_weight: Optional[Tensor] = None) -> Tensor:
        if not torch.jit.is_scripting():
            graph = native_block(graph)
        if not self._self_loop:
            check_zero_in_degree(graph, self._allow_zero_in_degree)
        h_src = feat if isinstance(feat, Tensor) else feat[0]
        check_width("GraphConv", "source node", h_src, self._in_feats)
        if edge_weight is not None and edge_weight.shape[0] != graph.num_edges():
            raise RuntimeError("GraphConv: edge_weight has {} rows but the graph has {} edges".format(
                edge_weight.shape[0], graph.num_edges()))
        own = self.weight
        if weight is not None:
            if own is not None:
                raise RuntimeError("External weight is provided while at the same time the module has defined "
                                   "its own weight parameter. Please create the module with flag weight=False.")
            w = weight
        elif own is not None:
            w = own
        else:
            raise RuntimeError("GraphConv was made with weight=False: pass the weight to forward")
        nd = graph.num_dst_nodes()
        loop = 1.0 if self._self_loop else 0.0
        if self._norm == "both" or self._norm == "left":
            out_deg = graph.out_degrees().to(h_src.dtype)
            if self._self_loop:
                out_deg[:nd] += 1.0
            out_deg = out_deg.clamp(min=1.0)
            scale = out_deg.pow(-0.5) if self._norm == "both" else 1.0 / out_deg
            h_src = h_src * scale.reshape((-1,) + (1,) * (h_src.dim() - 1))
        if project_before_aggregating(graph, self._in_feats, self._out_feats, h_src.requires_grad, self._self_loop):
            rst = _sum_neighbours(graph, torch.matmul(h_src, w), edge_weight, self._self_loop)
        else:
            rst = torch.matmul(_sum_neighbours(graph, h_src, edge_weight, self._self_loop), w)
        if self._norm == "both" or self._norm == "right":
            in_deg = (graph.in_degrees().to(rst.dtype) + loop).clamp(min=1.0)
            scale = in_deg.pow(-0.5) if self._norm == "both" else 1.0 / in_deg
            rst = rst * scale.reshape((-1,) + (1,) * (rst.dim() - 1))
        if self.bias is not None:
            rst = rst + self.bias
        if self.activation is not None:
            rst = self.activation(rst)
        return rst


class EdgeWeightNorm(nn.Module):
    """DGL's EdgeWeightNorm: scalar edge weights w_uv normalised as
    w_uv / sqrt(s_out(u) s_in(v)) ('both'), w_uv / s_in(v) ('right') or kept
    ('none'), s_out / s_in the weighted out- / in-degrees (+ eps)."""

    def __init__(self, norm: str = "both", eps: float = 0.0):
        super().__init__()
        if norm not in ("both", "right", "none"):
            raise InvalidArgument(f"EdgeWeightNorm: norm must be 'both', 'right' or 'none', got {norm!r}")
        self._norm = norm
        self._eps = float(eps)

    def forward(self, graph: Block, edge_weight: Tensor) -> Tensor:
        if not torch.jit.is_scripting():
            graph = native_block(graph)
        if edge_weight.dim() > 1 and edge_weight.numel() != edge_weight.shape[0]:
            raise RuntimeError("Currently the normalization is only defined on scalar edge weight. Please "
                               "customize the normalization for your high-dimensional weights.")
        w = edge_weight.reshape(-1)
        if w.shape[0] != graph.num_edges():
            raise RuntimeError("EdgeWeightNorm: edge_weight has {} values but the graph has {} edges".format(
                w.shape[0], graph.num_edges()))
        if self._norm == "both" and bool((w <= 0).any()):
            raise RuntimeError('Non-positive edge weight detected with `norm="both"`. This leads to square root '
                               "of zero or negative values.")
        if self._norm == "none":
            return edge_weight
        col = w.unsqueeze(1)
        in_w = torch.ops.dgld.gspmm(graph, "copy_rhs", "sum", None, col, "u", "e").reshape(-1) + self._eps
        dst_scale = in_w.pow(-0.5) if self._norm == "both" else 1.0 / in_w
        src_scale = torch.ones(graph.num_src_nodes(), dtype=w.dtype)
        if self._norm == "both":
            order = graph.edge_order()
            w_csr = w if order.numel() == 0 else w.index_select(0, order)
            out_w = torch.zeros(graph.num_src_nodes(), dtype=w.dtype).index_add(0, graph.indices(), w_csr)
            src_scale = (out_w + self._eps).pow(-0.5)
        scaled = torch.ops.dgld.gsddmm(graph, "mul", src_scale.unsqueeze(1), dst_scale.unsqueeze(1), "u", "v")
        return (scaled.reshape(-1) * w).reshape(edge_weight.shape)
