"""The fused message-passing kernels (torch.ops.dgld.gspmm / gsddmm over a
torch.classes.dgld.Block) with their errors raised as DGLError."""

import torch

from . import _C  # noqa: F401 - registers torch.ops.dgld
from ._errors import DGLError


def _call(op, *args):
    try:
        return op(*args)
    except RuntimeError as e:
        raise DGLError(str(e).split("\nException raised from")[0]) from None


def gspmm(native, op, reduce, lhs, rhs, lhs_target="u", rhs_target="e"):
    return _call(torch.ops.dgld.gspmm, native, op, reduce, lhs, rhs, lhs_target, rhs_target)


def gsddmm(native, op, lhs, rhs, lhs_target="u", rhs_target="v"):
    return _call(torch.ops.dgld.gsddmm, native, op, lhs, rhs, lhs_target, rhs_target)
