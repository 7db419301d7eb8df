"""DGL's GINConv on dgld's kernels: rst = apply_func((1 + eps) h_dst +
aggr_{u->v} w_uv h_u), aggr sum, max or mean (w_uv the edge weight, 1
without one), eps learnable with learn_eps, then activation. Scripts with
torch.jit.script when apply_func does."""

from typing import Optional, Tuple, Union

import torch
from torch import Tensor, nn

from .._errors import InvalidArgument
from ._utils import Block, aggregate, native_block, no_weight


class GINConv(nn.Module):
    """DGL's GINConv (see the module doc)."""

    def __init__(self, apply_func=None, aggregator_type: str = "sum", init_eps: float = 0.0,
                 learn_eps: bool = False, activation=None):
        super().__init__()
        if aggregator_type not in ("sum", "max", "mean"):
            raise InvalidArgument(f"GINConv: aggregator_type must be 'sum', 'max' or 'mean', got {aggregator_type!r}")
        self.apply_func = apply_func
        self._aggregator_type = aggregator_type
        self.activation = activation
        if learn_eps:
            self.eps = nn.Parameter(torch.FloatTensor([init_eps]))
        else:
            self.register_buffer("eps", torch.FloatTensor([init_eps]))

    def forward(self, graph: Block, feat: Union[Tensor, Tuple[Tensor, Tensor]],
                edge_weight: Optional[Tensor] = None) -> Tensor:
        if not torch.jit.is_scripting():
            graph = native_block(graph)
        if isinstance(feat, Tensor):
            h_src = feat
            h_dst = feat[:graph.num_dst_nodes()]
        else:
            h_src, h_dst = feat[0], feat[1]
        if h_src.shape[1:] != h_dst.shape[1:]:
            raise RuntimeError("GINConv: source features have width {} but destination features {}".format(
                h_src.shape[-1], h_dst.shape[-1]))
        ew = no_weight()
        if edge_weight is not None:
            if edge_weight.shape[0] != graph.num_edges():
                raise RuntimeError("GINConv: edge_weight has {} rows but the graph has {} edges".format(
                    edge_weight.shape[0], graph.num_edges()))
            ew = edge_weight
        eps = self.eps.to(h_dst.dtype)
        if isinstance(feat, Tensor) and self._aggregator_type == "sum" and edge_weight is None:
            # h_v + sum_u h_u in one pass (the kernel's self loop reads dst v as
            # src v, as a single input gives it), eps h_v on top when it counts.
            rst = torch.ops.dgld.copy_u_reduce(graph, h_src, "sum", True)
            if self.eps.requires_grad or float(self.eps[0]) != 0.0:
                rst = rst + eps * h_dst
        else:
            rst = (1 + eps) * h_dst + aggregate(graph, h_src, self._aggregator_type, ew)
        if self.apply_func is not None:
            rst = self.apply_func(rst)
        if self.activation is not None:
            rst = self.activation(rst)
        return rst
