"""Ids as tensors: the one conversion every graph function uses."""

import torch

from ._errors import DGLError


def as_id_tensor(ids, what, bound=None):
    """ids (tensor, list, int, numpy array, boolean mask) as a 1-d int64
    tensor, each in [0, bound) when bound is given; DGLError naming `what`
    and the first bad id otherwise."""
    t = ids if isinstance(ids, torch.Tensor) else torch.as_tensor(ids)
    if t.dtype == torch.bool:
        if bound is not None and t.numel() != bound:
            raise DGLError(f"{what}: a boolean mask must have {bound} values, got {t.numel()}")
        return torch.nonzero(t.reshape(-1), as_tuple=False).reshape(-1)
    if t.numel() == 0:
        return t.reshape(-1).to(torch.int64)
    if t.is_floating_point() or t.is_complex():
        raise DGLError(f"{what}: ids must be integers, got {t.dtype}")
    t = t.reshape(-1).to(torch.int64)
    if bound is not None and t.numel():
        lo, hi = int(t.min()), int(t.max())
        if lo < 0 or hi >= bound:
            raise DGLError(f"{what}: id {lo if lo < 0 else hi} is out of range [0, {bound})")
    return t
