"""Graph data as DGL's constructors take it: edge pairs or sparse formats,
node counts, idtype and device, checked; shared by convert.py and the
graph classes."""

import torch

from ._errors import DGLError
from .base import as_ids


def _idtype_of(idtype):
    if idtype is None:
        return torch.int64
    if idtype not in (torch.int32, torch.int64):
        raise DGLError(f"idtype must be torch.int32 or torch.int64, got {idtype}")
    return idtype


def _check_device(device):
    if device is not None and torch.device(device).type != "cpu":
        raise DGLError(f"dgld keeps graphs on the CPU, not on {device}")


def _count(ids, given, what):
    """A node count: `given`, checked to cover every id, or max id + 1."""
    need = int(ids.max()) + 1 if ids.numel() else 0
    if given is None:
        return need
    given = int(given)
    if given < need:
        raise DGLError(f"{what} is {given} but the edges name node {need - 1}")
    return given


def _uv(data, what):
    """The (src, dst) int64 tensors of DGL's graph data: (u, v), or
    ('coo', (u, v)), ('csr', (indptr, indices, eids)), ('csc', ...)."""
    if isinstance(data, tuple) and len(data) == 2 and isinstance(data[0], str):
        kind, arrays = data
        if kind == "coo":
            return _uv(arrays, what)
        if kind in ("csr", "csc"):
            indptr = as_ids(arrays[0], f"{what} indptr")
            indices = as_ids(arrays[1], f"{what} indices")
            rows = torch.repeat_interleave(torch.arange(indptr.numel() - 1), indptr[1:] - indptr[:-1])
            if len(arrays) > 2 and arrays[2] is not None and len(arrays[2]):
                eids = as_ids(arrays[2], f"{what} eids")
                order = torch.argsort(eids)
                rows, indices = rows[order], indices[order]
            return (rows, indices) if kind == "csr" else (indices, rows)
        raise DGLError(f"{what}: unknown sparse format {kind!r} (dgld takes 'coo', 'csr' and 'csc')")
    if isinstance(data, list) and all(isinstance(e, (tuple, list)) and len(e) == 2 for e in data) and \
            (len(data) != 2 or all(not hasattr(x, "__len__") for e in data for x in e)):
        # DGL's edge list: [(u, v), ...] pairs of node ids ([] an empty graph).
        src = torch.tensor([int(e[0]) for e in data], dtype=torch.int64)
        dst = torch.tensor([int(e[1]) for e in data], dtype=torch.int64)
        return _uv((src, dst), what)
    if not isinstance(data, (tuple, list)) or len(data) != 2:
        raise DGLError(f"{what} takes the edges as a pair (src ids, dst ids) or a list of (src, dst) pairs, "
                       f"got {type(data).__name__}")
    src = as_ids(data[0], f"{what} src")
    dst = as_ids(data[1], f"{what} dst")
    if src.numel() != dst.numel():
        raise DGLError(f"{what}: {src.numel()} src ids but {dst.numel()} dst ids")
    if (src.numel() and int(src.min()) < 0) or (dst.numel() and int(dst.min()) < 0):
        raise DGLError(f"{what}: node ids must be >= 0")
    return src, dst
