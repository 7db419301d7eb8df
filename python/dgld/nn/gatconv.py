"""DGL's GATConv on dgld's kernels: z = W h; e_uv = LeakyReLU(a_l.z_u +
a_r.z_v); alpha the softmax of e over v's in-edges; h_v' = sum_u alpha_uv
z_u + b, per head -> [num_dst, num_heads, out_feats]. Without attention
dropout or edge weights it runs dgld's fused GAT kernel; with them, the
general kernels (gsddmm, edge softmax, gspmm). As DGL's: with
in_feats a pair (source width, destination width) it has fc_src and fc_dst,
else one fc; an (h_src, h_dst) input takes the destination nodes' z from
h_dst (any number of them, e.g. a relation into another node type), a single
tensor from its first num_dst rows. Scripts with torch.jit.script."""

from typing import Optional, Tuple, Union

import torch
from torch import Tensor, nn

from .._kernels import edge_softmax_native
from ._utils import relu_gain, Block, check_width, check_zero_in_degree, native_block, pair_sizes, set_shape


class GATConv(nn.Module):
    """DGL's GATConv: z = W h; e_uv = LeakyReLU(a_l.z_u + a_r.z_v); alpha the
    softmax of e over v's in-edges; h_v' = sum_u alpha_uv z_u + b, per head
    -> [num_dst, num_heads, out_feats] (see the module doc)."""

    def __init__(self, in_feats, out_feats: int, num_heads: int, feat_drop: float = 0.0,
                 attn_drop: float = 0.0, negative_slope: float = 0.2, residual: bool = False, activation=None,
                 allow_zero_in_degree: bool = False, bias: bool = True):
        super().__init__()
        self._in_src_feats, self._in_dst_feats = pair_sizes(in_feats)
        self._out_feats = int(out_feats)
        self._num_heads = int(num_heads)
        self._negative_slope = float(negative_slope)
        self._allow_zero_in_degree = bool(allow_zero_in_degree)
        self._attn_drop_p = float(attn_drop)
        width = self._out_feats * self._num_heads
        if isinstance(in_feats, (tuple, list)):
            self.register_module("fc", None)
            self.fc_src = nn.Linear(self._in_src_feats, width, bias=False)
            self.fc_dst = nn.Linear(self._in_dst_feats, width, bias=False)
        else:
            self.fc = nn.Linear(self._in_src_feats, width, bias=False)
            self.register_module("fc_src", None)
            self.register_module("fc_dst", None)
        self.attn_l = nn.Parameter(torch.empty(1, self._num_heads, self._out_feats))
        self.attn_r = nn.Parameter(torch.empty(1, self._num_heads, self._out_feats))
        self.feat_drop = nn.Dropout(feat_drop)
        self.attn_drop = nn.Dropout(attn_drop)
        if residual:
            if self._in_dst_feats != self._out_feats * self._num_heads:
                self.res_fc = nn.Linear(self._in_dst_feats, self._num_heads * self._out_feats, bias=False)
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

    @torch.jit.export
    def reset_parameters(self):
        fc = self.fc
        if fc is not None:
            nn.init.xavier_normal_(fc.weight, gain=relu_gain())
        fc_src = self.fc_src
        if fc_src is not None:
            nn.init.xavier_normal_(fc_src.weight, gain=relu_gain())
        fc_dst = self.fc_dst
        if fc_dst is not None:
            nn.init.xavier_normal_(fc_dst.weight, gain=relu_gain())
        nn.init.xavier_normal_(self.attn_l, gain=relu_gain())
        nn.init.xavier_normal_(self.attn_r, gain=relu_gain())
        bias = self.bias
        if bias is not None:
            nn.init.zeros_(bias)
        if not torch.jit.is_scripting():
            if isinstance(self.res_fc, nn.Linear):
                nn.init.xavier_normal_(self.res_fc.weight, gain=relu_gain())

    @torch.jit.export
    def resize(self, in_feats: int, out_feats: int, num_heads: int = 0):
        """The layer for in_feats -> out_feats wide rows per head (num_heads
        heads; 0: as many as now), its parameters drawn again
        (reset_parameters): how a model scripted at one width is sized for a
        graph (dgld.models, trainer-host's built-in models). One fc, no
        residual projection."""
        fc = self.fc
        if fc is None or self.res_fc is not None:
            raise RuntimeError("GATConv.resize: only a layer with one fc and no residual can be resized")
        self._in_src_feats = in_feats
        self._in_dst_feats = in_feats
        self._out_feats = out_feats
        if num_heads > 0:
            self._num_heads = num_heads
        heads = self._num_heads
        set_shape(fc.weight, [heads * out_feats, in_feats])
        set_shape(self.attn_l, [1, heads, out_feats])
        set_shape(self.attn_r, [1, heads, out_feats])
        bias = self.bias
        if bias is not None:
            set_shape(bias, [heads * out_feats])
        if not torch.jit.is_scripting():
            fc.in_features, fc.out_features = in_feats, heads * out_feats
        self.reset_parameters()

    def forward(self, graph: Block, feat: Union[Tensor, Tuple[Tensor, Tensor]],
                edge_weight: Optional[Tensor] = None) -> Tensor:
        if not torch.jit.is_scripting():
            graph = native_block(graph)
        check_zero_in_degree(graph, self._allow_zero_in_degree)
        nd = graph.num_dst_nodes()
        heads, out = self._num_heads, self._out_feats
        fc = self.fc
        fc_src = self.fc_src
        fc_dst = self.fc_dst
        if isinstance(feat, Tensor):
            h_src = self.feat_drop(feat)
            check_width("GATConv", "source node", h_src, self._in_src_feats)
            h_dst = h_src[:nd]
            if fc is not None:
                z = fc(h_src).view(-1, heads, out)
            else:
                assert fc_src is not None and fc_dst is not None
                z = fc_src(h_src).view(-1, heads, out)
            if (self._attn_drop_p > 0.0 and self.training) or edge_weight is not None or fc is None:
                z_dst = z[:nd]
                if fc is None:
                    assert fc_dst is not None
                    z_dst = fc_dst(h_dst).view(-1, heads, out)
                rst = self._aggregate_general(graph, z, z_dst, edge_weight)
            else:
                rst = torch.ops.dgld.gat_aggregate(graph, z, self.attn_l, self.attn_r, self._negative_slope)
        else:
            # DGL's pair: the destination nodes' own features (any number of them).
            h_src = self.feat_drop(feat[0])
            h_dst = self.feat_drop(feat[1])
            check_width("GATConv", "source node", h_src, self._in_src_feats)
            check_width("GATConv", "destination node", h_dst, self._in_dst_feats)
            if h_dst.shape[0] != nd:
                raise RuntimeError("GATConv: {} destination node features for {} destination nodes".format(
                    h_dst.shape[0], nd))
            if fc is not None:
                z = fc(h_src).view(-1, heads, out)
                z_dst = fc(h_dst).view(-1, heads, out)
            else:
                assert fc_src is not None and fc_dst is not None
                z = fc_src(h_src).view(-1, heads, out)
                z_dst = fc_dst(h_dst).view(-1, heads, out)
            rst = self._aggregate_general(graph, z, z_dst, edge_weight)
        res_fc = self.res_fc
        if res_fc is not None:
            rst = rst + res_fc(h_dst).view(nd, self._num_heads, self._out_feats)
        if self.bias is not None:
            rst = rst + self.bias.view(1, self._num_heads, self._out_feats)
        if self.activation is not None:
            rst = self.activation(rst)
        return rst

    def _aggregate_general(self, graph: Block, z: Tensor, z_dst: Tensor, edge_weight: Optional[Tensor]) -> Tensor:
        """The same attention with the general kernels: attention dropout,
        DGL's edge weights (each attention value times its edge's weight),
        and destination nodes with features of their own (z_dst)."""
        el = (z * self.attn_l).sum(-1, keepdim=True)
        er = (z_dst * self.attn_r).sum(-1, keepdim=True)
        e = torch.nn.functional.leaky_relu(torch.ops.dgld.gsddmm(graph, "add", el, er, "u", "v"),
                                           self._negative_slope)
        a = self.attn_drop(edge_softmax_native(graph, e))
        if edge_weight is not None:
            a = a * edge_weight.reshape(edge_weight.shape[0], 1, 1).to(a.dtype)
        return torch.ops.dgld.gspmm(graph, "mul", "sum", z, a, "u", "e")
