"""DGL's SAGEConv on dgld's kernels: the mean, gcn, pool and lstm
aggregators with DGL's parameter names, initialisation and formula:

    mean: rst = fc_self(h_dst) + fc_neigh(mean_{u->v} h_u)
    gcn:  rst = fc_neigh((sum_{u->v} h_u + h_dst) / (in_degree + 1))
    pool: rst = fc_self(h_dst) + fc_neigh(max_{u->v} relu(fc_pool(h_u)))
    lstm: rst = fc_self(h_dst) + fc_neigh(LSTM over v's messages in edge order)
    then activation, norm; the bias is fc_self's (gcn: a `bias` of its own,
    as DGL's). With edge_weight each message is scaled by its edge's weight.

Scripts with torch.jit.script (then the graph is a torch.classes.dgld.Block);
eager, it also takes dgld.DGLGraph / DGLBlock."""

import math
from typing import List, Optional, Tuple, Union

import torch
from torch import Tensor, nn

from .._errors import InvalidArgument
from ._utils import (relu_gain, Block, aggregate, check_width, native_block, no_weight, pair_sizes,
                     project_before_aggregating, set_shape)


def _lstm_aggregate(lstm: nn.LSTM, graph: Block, msg: Tensor) -> Tensor:
    """DGL's LSTM reducer: each dst node's messages (edge order) through the
    LSTM, its last hidden state; nodes of one in-degree at a time (DGL's
    degree bucketing); 0 for a node without in-edges."""
    indptr = graph.indptr()
    deg = indptr[1:] - indptr[:-1]
    out = msg.new_zeros((graph.num_dst_nodes(), lstm.hidden_size))
    degrees: List[int] = torch.unique(deg[deg > 0]).tolist()
    for d in degrees:
        nodes = torch.nonzero(deg == d).reshape(-1)
        pos = indptr.index_select(0, nodes).unsqueeze(1) + torch.arange(d, dtype=torch.int64)
        m = msg[pos]
        h0 = m.new_zeros((1, nodes.numel(), lstm.hidden_size))
        _, (h, _) = lstm(m, (h0, h0))
        out = out.index_copy(0, nodes, h.squeeze(0))
    return out


def _messages_in_csr_order(graph: Block, h: Tensor, edge_weight: Tensor) -> Tensor:
    """h[src] for every edge in CSR order (grouped by dst), times its weight."""
    msg = h.index_select(0, graph.indices())
    if edge_weight.numel() > 0:
        w = edge_weight.reshape(edge_weight.shape[0], -1).to(h.dtype)
        order = graph.edge_order()
        if order.numel() > 0:
            w = w.index_select(0, order)
        msg = msg * w
    return msg


class SAGEConv(nn.Module):
    """DGL's SAGEConv (see the module doc)."""

    def __init__(self, in_feats, out_feats: int, aggregator_type: str = "mean", feat_drop: float = 0.0,
                 bias: bool = True, norm=None, activation=None):
        super().__init__()
        valid = ("mean", "gcn", "pool", "lstm")
        if aggregator_type not in valid:
            raise InvalidArgument(f"SAGEConv: aggregator_type must be one of {', '.join(valid)}, got "
                                  f"{aggregator_type!r}")
        self._in_src_feats, self._in_dst_feats = pair_sizes(in_feats)
        if aggregator_type == "gcn" and self._in_src_feats != self._in_dst_feats:
            raise InvalidArgument(f"SAGEConv: the gcn aggregator adds a node to its neighbours, so source and "
                                  f"destination widths must be equal, got {in_feats!r}")
        self._out_feats = int(out_feats)
        self._aggre_type = aggregator_type
        self.norm = norm
        self.feat_drop = nn.Dropout(feat_drop)
        self.activation = activation
        if aggregator_type == "pool":
            self.fc_pool = nn.Linear(self._in_src_feats, self._in_src_feats)
        else:
            self.register_module("fc_pool", None)
        if aggregator_type == "lstm":
            self.lstm = nn.LSTM(self._in_src_feats, self._in_src_feats, batch_first=True)
        else:
            self.register_module("lstm", None)
        # DGL's parameters: the bias is fc_self's (nn.Linear's own initial
        # values), and a separate zero-initialised `bias` only for gcn, which
        # has no fc_self.
        self.fc_neigh = nn.Linear(self._in_src_feats, self._out_feats, bias=False)
        if aggregator_type != "gcn":
            self.fc_self = nn.Linear(self._in_dst_feats, self._out_feats, bias=bias)
            self.register_buffer("bias", None)
        else:
            self.register_module("fc_self", None)
            if bias:
                self.bias = nn.Parameter(torch.zeros(self._out_feats))
            else:
                self.register_buffer("bias", None)
        self.reset_parameters()

    @torch.jit.export
    def reset_parameters(self):
        fc_pool = self.fc_pool
        if fc_pool is not None:
            nn.init.xavier_uniform_(fc_pool.weight, gain=relu_gain())
        if not torch.jit.is_scripting():
            if self.lstm is not None:
                self.lstm.reset_parameters()
        fc_self = self.fc_self
        if fc_self is not None:
            nn.init.xavier_uniform_(fc_self.weight, gain=relu_gain())
        nn.init.xavier_uniform_(self.fc_neigh.weight, gain=relu_gain())
        # The biases keep their values, as DGL's reset_parameters leaves them.

    @torch.jit.export
    def resize(self, in_feats: int, out_feats: int):
        """The layer for in_feats -> out_feats wide rows, its parameters drawn
        again (reset_parameters): how a model scripted at one width is sized
        for a graph (dgld.models, trainer-host's built-in models). The mean
        and gcn aggregators (pool and lstm have weights of other shapes).
        Biases start as at construction: fc_self's as nn.Linear draws it,
        gcn's at zero."""
        if self.fc_pool is not None or self._aggre_type == "lstm":
            raise RuntimeError("SAGEConv.resize: only the mean and gcn aggregators can be resized")
        self._in_src_feats = in_feats
        self._in_dst_feats = in_feats
        self._out_feats = out_feats
        fc_self = self.fc_self
        if fc_self is not None:
            set_shape(fc_self.weight, [out_feats, in_feats])
            self_bias = fc_self.bias
            if self_bias is not None:
                set_shape(self_bias, [out_feats])
                bound = 1.0 / math.sqrt(in_feats)
                nn.init.uniform_(self_bias, -bound, bound)
        set_shape(self.fc_neigh.weight, [out_feats, in_feats])
        bias = self.bias
        if bias is not None:
            set_shape(bias, [out_feats])
            nn.init.zeros_(bias)
        if not torch.jit.is_scripting():
            for fc in (self.fc_self, self.fc_neigh):
                if fc is not None:
                    fc.in_features, fc.out_features = in_feats, out_feats
        self.reset_parameters()

    def forward(self, graph: Block, feat: Union[Tensor, Tuple[Tensor, Tensor]],
                edge_weight: Optional[Tensor] = None) -> Tensor:
        rst = self._combine(graph, feat, edge_weight, True)
        if self.activation is not None:
            rst = self.activation(rst)
        if self.norm is not None:
            rst = self.norm(rst)
        return rst

    @torch.jit.export
    def forward_relu_dropout(self, graph: Block, feat: Tensor, p: float, training: bool) -> Tensor:
        """dropout(relu(forward(graph, feat))) with probability p when
        training (torch.ops.dgld.dropout), fc_self's bias added in that pass
        instead of in a broadcast of its own, its gradient summed in the
        backward one: what dgld.models' SAGE runs between layers. A layer
        with an activation or norm, or without fc_self (gcn), runs forward
        and then the same dropout."""
        fc_self = self.fc_self
        if self.activation is not None or self.norm is not None or fc_self is None:
            return torch.ops.dgld.dropout(self.forward(graph, feat, None), p, training, True)
        return torch.ops.dgld.dropout(self._combine(graph, feat, None, False), p, training, True, fc_self.bias)

    def _combine(self, graph: Block, feat: Union[Tensor, Tuple[Tensor, Tensor]], edge_weight: Optional[Tensor],
                 self_bias: bool) -> Tensor:
        """The layer's output before activation and norm; without fc_self's
        bias unless self_bias."""
        if not torch.jit.is_scripting():
            graph = native_block(graph)
        dst_is_slice = isinstance(feat, Tensor)
        if isinstance(feat, Tensor):
            h_src = self.feat_drop(feat)
            h_dst = h_src[:graph.num_dst_nodes()]
        else:
            h_src = self.feat_drop(feat[0])
            h_dst = self.feat_drop(feat[1])
        check_width("SAGEConv", "source node", h_src, self._in_src_feats)
        check_width("SAGEConv", "destination node", h_dst, self._in_dst_feats)
        ew = no_weight()
        if edge_weight is not None:
            ew = edge_weight
            if ew.shape[0] != graph.num_edges():
                raise RuntimeError("SAGEConv: edge_weight has {} rows but the graph has {} edges".format(
                    ew.shape[0], graph.num_edges()))
        h, h_dst, projected = self._neighbours(graph, h_src, h_dst, ew, dst_is_slice)
        fc_self = self.fc_self
        bias = self.bias
        if fc_self is None:
            rst = h if projected else self.fc_neigh(h)
            if bias is not None:
                rst = rst + bias
        else:
            # fc_self(h_dst) + h_neigh W_neigh^T with the products accumulating
            # into one output (addmm's C += A B): no [num_dst, out] temporary
            # for either term and no separate pass adding them.
            rst = fc_self(h_dst) if self_bias else torch.mm(h_dst, fc_self.weight.t())
            rst = rst.add_(h) if projected else rst.addmm_(h, self.fc_neigh.weight.t())
        return rst

    def _neighbours(self, graph: Block, h_src: Tensor, h_dst: Tensor, ew: Tensor,
                    dst_is_slice: bool) -> Tuple[Tensor, Tensor, bool]:
        """The neighbours' term: fc_neigh of their aggregate (projected: True),
        or for the mean aggregator when it aggregates first the aggregate
        itself (False; forward multiplies it into its output); and the dst
        rows (h_dst, or the same rows as a copy whose gradient the
        aggregation's backward adds into h_src's)."""
        fc_pool = self.fc_pool
        lstm = self.lstm
        if fc_pool is not None:
            if ew.numel() == 0:
                # max_u relu(z_u) == relu(max_u z_u) (relu is monotone, and a dst
                # without in-edges gets 0 either way): the relu and its backward
                # run over the dst rows instead of every src row.
                return self.fc_neigh(torch.relu(aggregate(graph, fc_pool(h_src), "max", ew))), h_dst, True
            return self.fc_neigh(aggregate(graph, torch.relu(fc_pool(h_src)), "max", ew)), h_dst, True
        if lstm is not None:
            return self.fc_neigh(_lstm_aggregate(lstm, graph, _messages_in_csr_order(graph, h_src, ew))), h_dst, True
        first = project_before_aggregating(graph, self._in_src_feats, self._out_feats, h_src.requires_grad)
        if self._aggre_type == "mean":
            if first:
                return aggregate(graph, self.fc_neigh(h_src), "mean", ew), h_dst, True
            if dst_is_slice and ew.numel() == 0 and h_src.requires_grad:
                # h_dst is h_src[:num_dst]: the mean and the dst rows from one op, so
                # h_src gets one gradient buffer (no zero-filled slice gradient, no
                # full-size add of the two).
                agg, rows = torch.ops.dgld.copy_u_reduce_with_dst(graph, h_src, "mean")
                return agg, rows, False
            return aggregate(graph, h_src, "mean", ew), h_dst, False
        # gcn: (sum of the neighbours + the node itself) / (in-degree + 1)
        deg = graph.in_degrees().to(h_src.dtype).unsqueeze(1) + 1.0
        if first:
            return (aggregate(graph, self.fc_neigh(h_src), "sum", ew) + self.fc_neigh(h_dst)) / deg, h_dst, True
        return self.fc_neigh((aggregate(graph, h_src, "sum", ew) + h_dst) / deg), h_dst, True
