"""DGL's GATv2Conv on dgld's kernels: e_uv = a . LeakyReLU(W_s h_u + W_d h_v)
per head, alpha the softmax of e over v's in-edges (attention dropout
after), h_v' = sum_u alpha_uv W_s h_u (+ residual, activation). DGL's
parameter names (fc_src, fc_dst, attn, res_fc), share_weights, bias inside
the projections, and initialisation. As in DGL (1.1.3 and 2.x), the
destination rows are projected with fc_dst (fc_src's output only with
share_weights), on a block from the first num_dst rows of a single feature
tensor: DGL computes fc_dst(h)[:num_dst], the same rows and gradients as
fc_dst(h[:num_dst]), which is what runs here. Scripts with
torch.jit.script."""

from typing import Tuple, Union

import torch
from torch import Tensor, nn

from .._kernels import edge_softmax_native
from ._utils import Block, check_width, check_zero_in_degree, native_block, pair_sizes


class GATv2Conv(nn.Module):
    """DGL's GATv2Conv (see the module doc)."""

    def __init__(self, in_feats, out_feats: int, num_heads: int, feat_drop: float = 0.0, attn_drop: float = 0.0,
                 negative_slope: float = 0.2, residual: bool = False, activation=None,
                 allow_zero_in_degree: bool = False, bias: bool = True, share_weights: bool = False):
        super().__init__()
        self._num_heads = int(num_heads)
        self._in_src_feats, self._in_dst_feats = pair_sizes(in_feats)
        self._out_feats = int(out_feats)
        self._allow_zero_in_degree = bool(allow_zero_in_degree)
        self._pair_widths = isinstance(in_feats, (tuple, list))
        width = self._out_feats * self._num_heads
        self.fc_src = nn.Linear(self._in_src_feats, width, bias=bias)
        if share_weights and not self._pair_widths:
            self.fc_dst = self.fc_src
        else:
            self.fc_dst = nn.Linear(self._in_dst_feats if self._pair_widths else self._in_src_feats, width,
                                    bias=bias)
        self.attn = nn.Parameter(torch.empty(1, self._num_heads, self._out_feats))
        self.feat_drop = nn.Dropout(feat_drop)
        self.attn_drop = nn.Dropout(attn_drop)
        self.leaky_relu = nn.LeakyReLU(negative_slope)
        if residual:
            if self._in_dst_feats != width:
                self.res_fc = nn.Linear(self._in_dst_feats, width, bias=bias)
            else:
                self.res_fc = nn.Identity()
        else:
            self.register_module("res_fc", None)
        self.activation = activation
        self.share_weights = bool(share_weights)
        self.bias = bool(bias)
        self.reset_parameters()

    def reset_parameters(self):
        gain = nn.init.calculate_gain("relu")
        for fc in (self.fc_src, self.fc_dst):
            nn.init.xavier_normal_(fc.weight, gain=gain)
            if fc.bias is not None:
                nn.init.constant_(fc.bias, 0)
        nn.init.xavier_normal_(self.attn, gain=gain)
        if isinstance(self.res_fc, nn.Linear):
            nn.init.xavier_normal_(self.res_fc.weight, gain=gain)
            if self.res_fc.bias is not None:
                nn.init.constant_(self.res_fc.bias, 0)

    def forward(self, graph: Block, feat: Union[Tensor, Tuple[Tensor, Tensor]]) -> Tensor:
        if not torch.jit.is_scripting():
            graph = native_block(graph)
        check_zero_in_degree(graph, self._allow_zero_in_degree)
        nd = graph.num_dst_nodes()
        heads, out = self._num_heads, self._out_feats
        if isinstance(feat, Tensor):
            h_src = self.feat_drop(feat)
            check_width("GATv2Conv", "source node", h_src, self._in_src_feats)
            h_dst = h_src[:nd]
            feat_src = self.fc_src(h_src).view(-1, heads, out)
            if self.share_weights:
                feat_dst = feat_src[:nd]
            else:
                feat_dst = self.fc_dst(h_dst).view(-1, heads, out)
        else:
            h_src = self.feat_drop(feat[0])
            h_dst = self.feat_drop(feat[1])
            check_width("GATv2Conv", "source node", h_src, self._in_src_feats)
            check_width("GATv2Conv", "destination node", h_dst, self._in_dst_feats)
            feat_src = self.fc_src(h_src).view(-1, heads, out)
            feat_dst = self.fc_dst(h_dst).view(-1, heads, out)
        e = self.leaky_relu(torch.ops.dgld.gsddmm(graph, "add", feat_src, feat_dst, "u", "v"))
        e = (e * self.attn).sum(-1, keepdim=True)
        a = self.attn_drop(edge_softmax_native(graph, e))
        rst = torch.ops.dgld.gspmm(graph, "mul", "sum", feat_src, a, "u", "e")
        res_fc = self.res_fc
        if res_fc is not None:
            rst = rst + res_fc(h_dst).view(h_dst.shape[0], -1, out)
        if self.activation is not None:
            rst = self.activation(rst)
        return rst
