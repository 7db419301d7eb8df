"""The fused message-passing kernels (torch.ops.dgld.gspmm / gsddmm over a
torch.classes.dgld.Block): called with their errors raised as DGLError, and
the scriptable helpers built on them that dgld.nn's layers and dgld.ops share."""

import torch
from torch import Tensor

from ._errors import DGLError
from .base import Block


def _call(op, *args):
    try:
        return op(*args)
    except RuntimeError as e:
        raise DGLError(str(e).split("\nException raised from")[0]) from None


def gspmm(native, op, reduce, lhs, rhs, lhs_target="u", rhs_target="e"):
    return _call(torch.ops.dgld.gspmm, native, op, reduce, lhs, rhs, lhs_target, rhs_target)


def gsddmm(native, op, lhs, rhs, lhs_target="u", rhs_target="v"):
    return _call(torch.ops.dgld.gsddmm, native, op, lhs, rhs, lhs_target, rhs_target)


def edge_softmax_native(graph: Block, logits: Tensor) -> Tensor:
    """The softmax of each edge's logits ([E, ...], edge-id order) over the
    in-edges of its destination: a max, an exp, a sum and a division, each
    one kernel."""
    top = torch.ops.dgld.gspmm(graph, "copy_rhs", "max", None, logits.detach(), "u", "e")
    shifted = torch.exp(torch.ops.dgld.gsddmm(graph, "sub", logits, top, "e", "v"))
    total = torch.ops.dgld.gspmm(graph, "copy_rhs", "sum", None, shifted, "u", "e")
    return torch.ops.dgld.gsddmm(graph, "div", shifted, total, "e", "v")


def edge_sources(graph: Block) -> Tensor:
    """The source node of every edge, in edge-id order."""
    src = graph.indices()
    order = graph.edge_order()
    if order.numel() == 0:
        return src
    out = torch.empty_like(src)
    out[order] = src
    return out
