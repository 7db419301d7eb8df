"""DGL's GATConv on dgld's kernels: z = W h; e_uv = LeakyReLU(a_l.z_u +
a_r.z_v); alpha the softmax of e over v's in-edges; h_v' = sum_u alpha_uv
z_u + b, per head -> [num_dst, num_heads, out_feats]. Without attention
dropout or edge weights it runs dgld's fused GAT kernel; with them, the
general kernels (gsddmm, edge softmax, gspmm). Scripts with
torch.jit.script."""

from typing import Optional, Tuple, Union

import torch
from torch import Tensor, nn

from .._kernels import edge_softmax_native
from ._utils import Block, check_width, check_zero_in_degree, native_block


class GATConv(nn.Module):
    """DGL's GATConv: z = W h; e_uv = LeakyReLU(a_l.z_u + a_r.z_v); alpha the
    softmax of e over v's in-edges; h_v' = sum_u alpha_uv z_u + b, per head
    -> [num_dst, num_heads, out_feats] (see the module doc)."""

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

    def forward(self, graph: Block, feat: Union[Tensor, Tuple[Tensor, Tensor]],
                edge_weight: Optional[Tensor] = None) -> Tensor:
        if not torch.jit.is_scripting():
            graph = native_block(graph)
        check_zero_in_degree(graph, self._allow_zero_in_degree)
        if isinstance(feat, Tensor):
            h_src = self.feat_drop(feat)
        else:
            h_src = self.feat_drop(feat[0])
        check_width("GATConv", "source node", h_src, self._in_src_feats)
        nd = graph.num_dst_nodes()
        z = self.fc(h_src).view(-1, self._num_heads, self._out_feats)
        if (self._attn_drop_p > 0.0 and self.training) or edge_weight is not None:
            rst = self._aggregate_general(graph, z, edge_weight)
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

    def _aggregate_general(self, graph: Block, z: Tensor, edge_weight: Optional[Tensor]) -> Tensor:
        """The same attention with the general kernels: attention dropout,
        and DGL's edge weights (each attention value times its edge's
        weight)."""
        nd = graph.num_dst_nodes()
        el = (z * self.attn_l).sum(-1, keepdim=True)
        er = (z[:nd] * self.attn_r).sum(-1, keepdim=True)
        e = torch.nn.functional.leaky_relu(torch.ops.dgld.gsddmm(graph, "add", el, er, "u", "v"),
                                           self._negative_slope)
        a = self.attn_drop(edge_softmax_native(graph, e))
        if edge_weight is not None:
            a = a * edge_weight.reshape(edge_weight.shape[0], 1, 1).to(a.dtype)
        return torch.ops.dgld.gspmm(graph, "mul", "sum", z, a, "u", "e")
