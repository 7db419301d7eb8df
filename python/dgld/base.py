"""What every part of dgld shares (DGL's dgl.base): the names of the id
fields and of the default types, the block class of the kernels, and the
one conversion of ids that every graph and distributed call uses."""

import numpy as np
import torch

from . import _C  # noqa: F401 - registers torch.classes.dgld.Block and torch.ops.dgld
from ._errors import InvalidArgument

__all__ = ["NID", "EID", "NTYPE", "ETYPE", "ALL", "Block", "as_ids", "is_all"]

NID = "_ID"      # ndata / srcdata / dstdata field: a node's id in the parent graph
EID = "_ID"      # edata field: an edge's id in the parent graph
NTYPE = "_TYPE"  # ndata field: a node's type id (DGL's to_homogeneous)
ETYPE = "_TYPE"  # edata field: an edge's type id
ALL = "__ALL__"  # every node or edge (DGL's default of v=, edges=)

# The native block (dst-major CSR) the fused kernels and scripted layers take.
Block = torch.classes.dgld.Block


def is_all(ids):
    return isinstance(ids, str) and ids == ALL


def as_ids(ids, what=None, num=None, check_range=True):
    """ids as a 1-d int64 tensor. Takes a tensor, list, tuple, int, numpy
    array or scalar, a boolean mask (of num values when num is given: its
    true positions), a slice (over [0, num)), and a DistTensor (anything
    with DGL's part_policy attribute: its values). With num and
    check_range, every id must be in [0, num). InvalidArgument (a DGLError
    and a ValueError) otherwise, starting with `what` when given."""
    prefix = f"{what}: " if what else ""
    if hasattr(ids, "part_policy") and not isinstance(ids, torch.Tensor):
        ids = ids[0:len(ids)]
    if isinstance(ids, slice):
        if num is None:
            raise InvalidArgument(f"{prefix}a slice of ids needs the number of ids")
        return torch.arange(*ids.indices(num), dtype=torch.int64)
    if isinstance(ids, (int, np.integer)) and not isinstance(ids, bool):
        t = torch.tensor([int(ids)], dtype=torch.int64)
    elif isinstance(ids, torch.Tensor):
        t = ids
    elif isinstance(ids, np.ndarray):
        t = torch.from_numpy(ids)
    else:
        t = torch.as_tensor(ids)
    if t.dtype == torch.bool:
        if num is not None and t.numel() != num:
            raise InvalidArgument(f"{prefix}a boolean mask must have {num} values, got {t.numel()}")
        return torch.nonzero(t.reshape(-1), as_tuple=False).reshape(-1)
    if t.numel() == 0:
        return t.reshape(-1).to(torch.int64)
    if t.is_floating_point() or t.is_complex():
        raise InvalidArgument(f"{prefix}ids must be integers, got {t.dtype}")
    t = t.reshape(-1).to(torch.int64)
    if check_range and num is not None:
        lo, hi = int(t.min()), int(t.max())
        if lo < 0 or hi >= num:
            raise InvalidArgument(f"{prefix}id {lo if lo < 0 else hi} is out of range [0, {num})")
    return t
