"""DGL's RelGraphConv (DGL 0.8+) on dgld's kernels: per edge of type r the
message h_u W_r (times the edge's norm when given), summed at each dst
node, then layer norm, bias, self loop h_dst W_loop, activation and
dropout. W_r is a weight per relation, a combination of num_bases shared
bases (regularizer='basis': W_r = sum_b coeff[r, b] V_b), or block-diagonal
with num_bases blocks (regularizer='bdd'). The weight is DGL's TypedLinear
(linear_r.W, linear_r.coeff) with DGL's initialisation.

dgld addition: aggregate='mean' takes each relation's mean over a node's
in-edges of that relation instead of the sum (the R-GCN paper's
normalisation c_{v,r} = |N_r(v)|, what DGL's examples pass as `norm`),
computed by aggregating each relation's edges first and multiplying once
(Block.relation), with no per-edge message. trainer-host's built-in `rgcn`
model is made of these (dgld.models.rgcn). Scripts with torch.jit.script."""

import math
from typing import List, Optional

import torch
from torch import Tensor, nn

from .._errors import InvalidArgument
from .._kernels import edge_sources
from ._utils import relu_gain, Block, check_width, native_block, set_shape


def _invalid(message: str):
    if not torch.jit.is_scripting():
        raise InvalidArgument(message)
    raise RuntimeError(message)


def _csr_to_edge_order(graph: Block, values: Tensor) -> Tensor:
    """Per-edge values in the block's CSR order (edges(), etypes()) put in edge-id order."""
    order = graph.edge_order()
    if order.numel() == 0 or values.numel() == 0:
        return values
    return torch.empty_like(values).index_copy_(0, order, values)


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
        self.submat_in, self.submat_out = 0, 0
        if self.regularizer == "bdd":
            if in_size % self.num_bases != 0 or out_size % self.num_bases != 0:
                raise InvalidArgument(f"RelGraphConv: regularizer 'bdd' needs in_feat ({in_size}) and out_feat "
                                      f"({out_size}) divisible by num_bases ({self.num_bases})")
            self.submat_in, self.submat_out = in_size // self.num_bases, out_size // self.num_bases
        self.W = nn.Parameter(torch.empty(self._w_shape()))
        if self.regularizer == "basis":
            self.coeff = nn.Parameter(torch.empty(num_types, self.num_bases))
        else:
            self.register_parameter("coeff", None)
        self.reset_parameters()

    def _w_shape(self) -> List[int]:
        if self.regularizer == "basis":
            return [self.num_bases, self.in_size, self.out_size]
        if self.regularizer == "bdd":
            return [self.num_types, self.num_bases * self.submat_in * self.submat_out]
        return [self.num_types, self.in_size, self.out_size]

    @torch.jit.export
    def reset_parameters(self):
        with torch.no_grad():
            if self.regularizer == "bdd":
                bound = 1.0 / math.sqrt(self.submat_in)
            else:
                bound = 1.0 / math.sqrt(self.in_size)
            nn.init.uniform_(self.W, -bound, bound)
            coeff = self.coeff
            if coeff is not None:
                nn.init.xavier_uniform_(coeff, gain=relu_gain())

    @torch.jit.export
    def resize(self, in_size: int, out_size: int, num_types: int = 0, num_bases: int = 0):
        """The weights for in_size -> out_size rows, num_types types and
        num_bases bases (0: as now), drawn again; see RelGraphConv.resize."""
        if self.regularizer == "bdd":
            _invalid("TypedLinear.resize: a block-diagonal ('bdd') weight cannot be resized")
        self.in_size, self.out_size = in_size, out_size
        if num_types > 0:
            self.num_types = num_types
        if num_bases > 0:
            self.num_bases = num_bases
        set_shape(self.W, self._w_shape())
        coeff = self.coeff
        if coeff is not None:
            set_shape(coeff, [self.num_types, self.num_bases])
        self.reset_parameters()

    def weights(self, types: Tensor) -> Tensor:
        """W_r for the types `types` (int64 [U]) as dense [U, in, out] matrices."""
        coeff = self.coeff
        if coeff is not None:  # basis: W_r = sum_b coeff[r, b] V_b
            nb = self.W.shape[0]
            w = coeff.index_select(0, types).matmul(self.W.reshape(nb, -1))
            return w.view(-1, self.in_size, self.out_size)
        if self.regularizer == "bdd":
            blocks = self.W.index_select(0, types).view(-1, self.num_bases, self.submat_in, self.submat_out)
            dense = blocks.new_zeros((blocks.shape[0], self.in_size, self.out_size))
            for b in range(self.num_bases):
                dense[:, b * self.submat_in:(b + 1) * self.submat_in,
                      b * self.submat_out:(b + 1) * self.submat_out] = blocks[:, b]
            return dense
        return self.W.index_select(0, types)

    def weight(self, r: int) -> Tensor:
        """W_r as a dense [in, out] matrix."""
        return self.weights(torch.tensor([r], dtype=torch.int64))[0]

    def forward(self, x: Tensor, x_type: Tensor) -> Tensor:
        out = x.new_zeros((x.shape[0], self.out_size))
        for r in range(self.num_types):
            rows = torch.nonzero(x_type == r).reshape(-1)
            if rows.numel() > 0:
                out = out.index_copy(0, rows, x.index_select(0, rows) @ self.weight(r))
        return out


class RelGraphConv(nn.Module):
    """DGL's RelGraphConv (see the module doc). forward(g, feat, etypes=None,
    norm=None): etypes the type of every edge (edge-id order; None: the
    block's own edge types), norm an optional [E, 1] per-edge factor."""

    def __init__(self, in_feat: int, out_feat: int, num_rels: int, regularizer: Optional[str] = None,
                 num_bases: Optional[int] = None, bias: bool = True, activation=None, self_loop: bool = True,
                 dropout: float = 0.0, layer_norm: bool = False, low_mem: bool = False, aggregate: str = "sum"):
        # low_mem (DGL 0.5-0.7) chose a slower, smaller computation of the same result: nothing to choose here.
        super().__init__()
        if aggregate not in ("sum", "mean"):
            raise InvalidArgument(f"RelGraphConv: aggregate must be 'sum' or 'mean', got {aggregate!r}")
        self._in_feat, self._out_feat, self._num_rels = int(in_feat), int(out_feat), int(num_rels)
        self._mean = aggregate == "mean"
        self.linear_r = TypedLinear(in_feat, out_feat, num_rels, regularizer, num_bases)
        self.bias = bool(bias)
        self.activation = activation
        self.self_loop = bool(self_loop)
        self.layer_norm = bool(layer_norm)
        if bias:
            self.h_bias = nn.Parameter(torch.zeros(out_feat))
        else:
            self.register_parameter("h_bias", None)
        if layer_norm:
            self.layer_norm_weight = nn.LayerNorm(out_feat, elementwise_affine=True)
        else:
            self.register_module("layer_norm_weight", None)
        if self_loop:
            self.loop_weight = nn.Parameter(torch.empty(in_feat, out_feat))
            nn.init.xavier_uniform_(self.loop_weight, gain=relu_gain())
        else:
            self.register_parameter("loop_weight", None)
        self.dropout = nn.Dropout(dropout)

    @torch.jit.export
    def resize(self, in_feat: int, out_feat: int, num_rels: int = 0, num_bases: int = 0):
        """The layer for in_feat -> out_feat wide rows, num_rels relations
        and num_bases bases (0: as now), its weights drawn again in the
        order the constructor draws them: how a model scripted at one width
        is sized for a graph (dgld.models, trainer-host's built-in `rgcn`)."""
        if self.layer_norm_weight is not None:
            _invalid("RelGraphConv.resize: a layer with layer_norm cannot be resized")
        self._in_feat, self._out_feat = in_feat, out_feat
        if num_rels > 0:
            self._num_rels = num_rels
        self.linear_r.resize(in_feat, out_feat, num_rels, num_bases)
        h_bias = self.h_bias
        if h_bias is not None:
            set_shape(h_bias, [out_feat])
            nn.init.zeros_(h_bias)
        loop_weight = self.loop_weight
        if loop_weight is not None:
            set_shape(loop_weight, [in_feat, out_feat])
            nn.init.xavier_uniform_(loop_weight, gain=relu_gain())

    def forward(self, g: Block, feat: Tensor, etypes: Optional[Tensor] = None, norm: Optional[Tensor] = None,
                presorted: bool = False) -> Tensor:
        if not torch.jit.is_scripting():
            g = native_block(g)
        graph = g
        check_width("RelGraphConv", "node", feat, self._in_feat)
        nd = graph.num_dst_nodes()
        if self._mean and etypes is None and norm is None:
            h = self._relation_means(graph, feat)
        else:
            h = self._edge_messages(graph, feat, etypes, norm)
        layer_norm = self.layer_norm_weight
        if layer_norm is not None:
            h = layer_norm(h)
        h_bias = self.h_bias
        if h_bias is not None:
            h = h + h_bias
        loop_weight = self.loop_weight
        if loop_weight is not None:
            h = h + feat[:nd] @ loop_weight
        if self.activation is not None:
            h = self.activation(h)
        return self.dropout(h)

    def _edge_messages(self, graph: Block, feat: Tensor, etypes: Optional[Tensor], norm: Optional[Tensor]) -> Tensor:
        """DGL's formula: every edge's message h_u W_r (times its norm), summed
        (a mean per relation with aggregate='mean')."""
        types = _csr_to_edge_order(graph, graph.etypes()) if etypes is None else etypes
        if types.shape[0] != graph.num_edges():
            _invalid("RelGraphConv: etypes has {} values but the graph has {} edges".format(
                types.shape[0], graph.num_edges()))
        if types.numel() > 0:
            lo, hi = int(types.min()), int(types.max())
            if lo < 0 or hi >= self._num_rels:
                _invalid("RelGraphConv: edge types must be in [0, {}), got {}..{}".format(self._num_rels, lo, hi))
        msg = self.linear_r(feat.index_select(0, edge_sources(graph)), types)
        if norm is not None:
            msg = msg * norm.reshape(msg.shape[0], -1)
        elif self._mean:
            msg = msg * self._relation_mean_norm(graph, types).unsqueeze(1)
        return torch.ops.dgld.gspmm(graph, "copy_rhs", "sum", None, msg, "u", "e")

    def _relation_mean_norm(self, graph: Block, types: Tensor) -> Tensor:
        """1 / (in-edges of the edge's relation at its dst), per edge in edge-id order."""
        dst = _csr_to_edge_order(graph, graph.edges()[1])
        key = dst * self._num_rels + types
        count = torch.zeros(graph.num_dst_nodes() * self._num_rels, dtype=torch.float32)
        count.index_add_(0, key, torch.ones(key.shape[0], dtype=torch.float32))
        return 1.0 / count.index_select(0, key)

    def _relation_means(self, graph: Block, feat: Tensor) -> Tensor:
        """Each relation's mean of h_u over a node's in-edges of that relation,
        then one product with the stacked W_r: [nd, U in] x [U in, out]."""
        nd = graph.num_dst_nodes()
        if graph.num_edges() > 0 and graph.num_etypes() == 0:
            _invalid("RelGraphConv: the block has no edge types (give etypes, or a block of a heterogeneous graph)")
        if graph.num_etypes() > self._num_rels:
            _invalid("RelGraphConv: the block has {} edge types but the layer has {} relations".format(
                graph.num_etypes(), self._num_rels))
        means: List[Tensor] = []
        used: List[int] = []
        for r in range(graph.num_etypes()):
            rel = graph.relation(r)
            if rel.num_edges() > 0:
                means.append(torch.ops.dgld.copy_u_reduce(rel, feat, "mean", False))
                used.append(r)
        if len(used) == 0:
            return feat.new_zeros((nd, self._out_feat))
        w = self.linear_r.weights(torch.tensor(used, dtype=torch.int64))
        if len(used) == 1:
            return means[0] @ w[0]
        return torch.cat(means, 1) @ w.reshape(-1, self._out_feat)
