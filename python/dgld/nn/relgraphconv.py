"""DGL's RelGraphConv (DGL 0.8+) on dgld's kernels: per edge of type r the
message h_u W_r (times the edge's norm when given), summed at each dst
node, then layer norm, bias, self loop h_dst W_loop, activation and
dropout. W_r is a weight per relation, a combination of num_bases shared
bases (regularizer='basis': W_r = sum_b coeff[r, b] V_b), or block-diagonal
with num_bases blocks (regularizer='bdd'). The weight is DGL's TypedLinear
(linear_r.W, linear_r.coeff) with DGL's initialisation."""

import math
from typing import Optional

import torch
from torch import Tensor, nn

from .._errors import InvalidArgument
from .._kernels import edge_sources
from ._utils import check_width, native_block


class TypedLinear(nn.Module):
    """x @ W[type] per row (DGL's TypedLinear)."""

    def __init__(self, in_size: int, out_size: int, num_types: int, regularizer: Optional[str] = None,
                 num_bases: Optional[int] = None):
        super().__init__()
        self.in_size, self.out_size, self.num_types = int(in_size), int(out_size), int(num_types)
        if regularizer not in (None, "basis", "bdd"):
            raise InvalidArgument(f"RelGraphConv: regularizer must be None, 'basis' or 'bdd', got {regularizer!r}")
        self.regularizer = "none" if regularizer is None else regularizer
        if regularizer is not None and num_bases is None:
            num_bases = num_types
        self.num_bases = int(num_bases or 0)
        if self.regularizer == "basis":
            self.W = nn.Parameter(torch.empty(self.num_bases, in_size, out_size))
            self.coeff = nn.Parameter(torch.empty(num_types, self.num_bases))
        elif self.regularizer == "bdd":
            if in_size % self.num_bases != 0 or out_size % self.num_bases != 0:
                raise InvalidArgument(f"RelGraphConv: regularizer 'bdd' needs in_feat ({in_size}) and out_feat "
                                      f"({out_size}) divisible by num_bases ({self.num_bases})")
            self.submat_in, self.submat_out = in_size // self.num_bases, out_size // self.num_bases
            self.W = nn.Parameter(torch.empty(num_types, self.num_bases * self.submat_in * self.submat_out))
            self.register_parameter("coeff", None)
        else:
            self.W = nn.Parameter(torch.empty(num_types, in_size, out_size))
            self.register_parameter("coeff", None)
        self.reset_parameters()

    def reset_parameters(self):
        with torch.no_grad():
            if self.regularizer == "bdd":
                bound = 1.0 / math.sqrt(self.submat_in)
            else:
                bound = 1.0 / math.sqrt(self.in_size)
            nn.init.uniform_(self.W, -bound, bound)
            if self.coeff is not None:
                nn.init.xavier_uniform_(self.coeff, gain=nn.init.calculate_gain("relu"))

    def weight(self, r: int) -> Tensor:
        """W_r as a dense [in, out] matrix."""
        if self.regularizer == "basis":
            return torch.einsum("b,bio->io", self.coeff[r], self.W)
        if self.regularizer == "bdd":
            blocks = self.W[r].view(self.num_bases, self.submat_in, self.submat_out)
            return torch.block_diag(*blocks.unbind(0))
        return self.W[r]

    def forward(self, x: Tensor, x_type: Tensor) -> Tensor:
        out = x.new_zeros((x.shape[0], self.out_size))
        for r in range(self.num_types):
            rows = torch.nonzero(x_type == r).reshape(-1)
            if rows.numel():
                out = out.index_copy(0, rows, x.index_select(0, rows) @ self.weight(r))
        return out


class RelGraphConv(nn.Module):
    """DGL's RelGraphConv (see the module doc). forward(g, feat, etypes,
    norm=None): etypes the type of every edge (edge-id order), norm an
    optional [E, 1] per-edge factor."""

    def __init__(self, in_feat: int, out_feat: int, num_rels: int, regularizer: Optional[str] = None,
                 num_bases: Optional[int] = None, bias: bool = True, activation=None, self_loop: bool = True,
                 dropout: float = 0.0, layer_norm: bool = False, low_mem: bool = False):
        # low_mem (DGL 0.5-0.7) chose a slower, smaller computation of the same result: nothing to choose here.
        super().__init__()
        self._in_feat, self._out_feat, self._num_rels = int(in_feat), int(out_feat), int(num_rels)
        self.linear_r = TypedLinear(in_feat, out_feat, num_rels, regularizer, num_bases)
        self.bias = bool(bias)
        self.activation = activation
        self.self_loop = bool(self_loop)
        self.layer_norm = bool(layer_norm)
        if bias:
            self.h_bias = nn.Parameter(torch.zeros(out_feat))
        if layer_norm:
            self.layer_norm_weight = nn.LayerNorm(out_feat, elementwise_affine=True)
        if self_loop:
            self.loop_weight = nn.Parameter(torch.empty(in_feat, out_feat))
            nn.init.xavier_uniform_(self.loop_weight, gain=nn.init.calculate_gain("relu"))
        self.dropout = nn.Dropout(dropout)

    def forward(self, g, feat: Tensor, etypes: Tensor, norm: Optional[Tensor] = None, presorted: bool = False):
        graph = native_block(g)
        check_width("RelGraphConv", "node", feat, self._in_feat)
        if etypes.shape[0] != graph.num_edges():
            raise InvalidArgument(f"RelGraphConv: etypes has {etypes.shape[0]} values but the graph has "
                                  f"{graph.num_edges()} edges")
        if etypes.numel() and (int(etypes.min()) < 0 or int(etypes.max()) >= self._num_rels):
            raise InvalidArgument(f"RelGraphConv: edge types must be in [0, {self._num_rels}), got "
                                  f"{int(etypes.min())}..{int(etypes.max())}")
        msg = self.linear_r(feat.index_select(0, edge_sources(graph)), etypes)
        if norm is not None:
            msg = msg * norm.reshape(msg.shape[0], -1)
        h = torch.ops.dgld.gspmm(graph, "copy_rhs", "sum", None, msg, "u", "e")
        if self.layer_norm:
            h = self.layer_norm_weight(h)
        if self.bias:
            h = h + self.h_bias
        if self.self_loop:
            h = h + feat[:graph.num_dst_nodes()] @ self.loop_weight
        if self.activation is not None:
            h = self.activation(h)
        return self.dropout(h)
