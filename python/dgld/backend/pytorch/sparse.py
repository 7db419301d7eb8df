"""DGL's graph operators of the backend interface (dgl/backend/backend.py,
"Custom Operators for graph level computations") for PyTorch, with
autograd.

DGL passes these a HeteroGraphIndex, an object of DGL's C library. dgld
has no such library: here the graph argument is a dgld graph of one edge
type (dgld.graph(...), a block, or a typed graph with one relation), and
gspmm / gsddmm / edge_softmax run on dgld's fused kernels (dgld.ops).
segment_reduce, scatter_add, segment_mm and gather_mm take tensors only.
The *_hetero operators take DGL's multi-relation HeteroGraphIndex and its
per-type tuples, which have no dgld counterpart: they raise DGLError
naming what to use instead (dgld.ops per relation, update_all).
binary_reduce and copy_reduce, DGL 0.4's kernels, are not in DGL's
PyTorch backend either."""

import warnings

import torch

from ..._errors import DGLError
from .._interface import INTERFACE



def _homo(gidx, what):
    from ...graph import HomoGraph
    if isinstance(gidx, HomoGraph):
        return gidx
    raise DGLError(f"{what} takes a dgld graph of one edge type (dgld.graph, a block), got {type(gidx).__name__}: "
                   "DGL's HeteroGraphIndex belongs to DGL's C library, which dgld does not have")


def gspmm(gidx, op, reduce_op, lhs_data, rhs_data):
    """out[v] = reduce_op over v's in-edges (u -> v, id e) of
    op(lhs_data[u], rhs_data[e]); op is add, sub, mul, div, copy_lhs or
    copy_rhs, reduce_op sum, max or min."""
    from ... import ops
    return ops.gspmm(_homo(gidx, "gspmm"), op, reduce_op, lhs_data, rhs_data)


def gsddmm(gidx, op, lhs_data, rhs_data, lhs_target="u", rhs_target="v"):
    """out[e] = op(lhs_data[lhs_target of e], rhs_data[rhs_target of e])
    for every edge e (targets u, v or e; op add, sub, mul, div, dot,
    copy_lhs or copy_rhs)."""
    from ... import ops
    return ops.gsddmm(_homo(gidx, "gsddmm"), op, lhs_data, rhs_data, lhs_target, rhs_target)


def edge_softmax(gidx, logits, eids=None, norm_by="dst"):
    """The softmax of each edge's logits over the in-edges of its
    destination (norm_by='dst') or the out-edges of its source ('src')."""
    from ... import ops
    from ...base import ALL
    return ops.edge_softmax(_homo(gidx, "edge_softmax"), logits, ALL if eids is None else eids, norm_by)


def _no_hetero(what, instead):
    raise DGLError(f"{what} takes DGL's multi-relation HeteroGraphIndex (DGL's C library), which dgld does not have; "
                   f"{instead}")


def gspmm_hetero(g, op, reduce_op, lhs_len, *lhs_and_rhs_tuple):
    _no_hetero("gspmm_hetero", "call gspmm / dgld.ops.gspmm on each relation graph (g[etype]) or use "
               "g.multi_update_all / HeteroGraphConv")


def gsddmm_hetero(g, op, lhs_len, lhs_target="u", rhs_target="v", *lhs_and_rhs_tuple):
    _no_hetero("gsddmm_hetero", "call gsddmm / dgld.ops.gsddmm on each relation graph (g[etype])")


def edge_softmax_hetero(gidx, eids=None, norm_by="dst", *logits):
    _no_hetero("edge_softmax_hetero", "call edge_softmax on each relation graph (g[etype])")


# ---------------------------------------------------------------------------
# Segment operators: tensors only.


def _extreme(dtype, largest):
    if dtype.is_floating_point:
        return float("inf") if largest else float("-inf")
    info = torch.iinfo(dtype)
    return info.max if largest else info.min


def _scatter_reduce(out, idx, src, how):
    # torch 1.13 calls scatter_reduce a beta API and warns once per process.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return out.scatter_reduce(0, idx, src, how, include_self=True)


def segment_reduce(op, x, offsets):
    """y[i] = op(x[offsets[i]:offsets[i+1]]) along the first dimension, op
    sum, max or min. An empty segment gives 0 for sum, and for max / min
    the identity of the comparison (-inf / +inf for floats), as DGL's
    kernel does (dgl.ops.segment_reduce then replaces those with 0). The
    gradient of max / min goes to the first row that holds the extreme,
    per feature."""
    if op not in ("sum", "max", "min"):
        raise DGLError(f"segment_reduce: op must be 'sum', 'max' or 'min', got {op!r}")
    offsets = offsets.to(device=x.device, dtype=torch.int64)
    lengths = offsets[1:] - offsets[:-1]
    n = lengths.numel()
    seg = torch.repeat_interleave(torch.arange(n, device=x.device), lengths)
    rows = x[int(offsets[0]):int(offsets[-1])] if n else x[:0]
    out_shape = (n,) + tuple(x.shape[1:])
    if op == "sum":
        return torch.zeros(out_shape, dtype=x.dtype, device=x.device).index_add(0, seg, rows)
    if rows.shape[0] == 0:
        return torch.full(out_shape, _extreme(x.dtype, op == "min"), dtype=x.dtype, device=x.device)
    # The extreme per segment and feature (no gradient), then the first row
    # holding it, gathered so that the gradient flows to that row only.
    flat = rows.detach().reshape(rows.shape[0], -1)
    idx = seg.unsqueeze(1).expand_as(flat)
    fill = _extreme(x.dtype, op == "min")
    best = torch.full((n, flat.shape[1]), fill, dtype=x.dtype, device=x.device)
    best = _scatter_reduce(best, idx, flat, "amin" if op == "min" else "amax")
    pos = torch.arange(flat.shape[0], device=x.device).unsqueeze(1).expand_as(flat)
    hit = flat == best.gather(0, idx)
    big = flat.shape[0]
    arg = torch.full((n, flat.shape[1]), big, dtype=torch.int64, device=x.device)
    arg = _scatter_reduce(arg, idx, torch.where(hit, pos, torch.full_like(pos, big)), "amin")
    empty = (lengths == 0).unsqueeze(1).expand_as(arg)
    picked = rows.reshape(rows.shape[0], -1).gather(0, arg.clamp(max=big - 1))
    out = torch.where(empty, torch.full_like(picked, fill), picked)
    return out.reshape(out_shape)


def scatter_add(x, idx, m):
    """y[idx[i]] += x[i] into an m-row zero tensor (first dimension)."""
    out = torch.zeros((m,) + tuple(x.shape[1:]), dtype=x.dtype, device=x.device)
    return out.index_add(0, idx.to(device=x.device, dtype=torch.int64), x)


def segment_mm(A, B, seglen_A):
    """A's rows in segments of seglen_A[r] rows, segment r multiplied by
    B[r]: [N, D1] x [R, D1, D2] -> [N, D2]."""
    if B.dim() != 3:
        raise DGLError(f"segment_mm expects B to be a 3D tensor, got {B.dim()} dimensions")
    lengths = [int(s) for s in seglen_A]
    if len(lengths) != B.shape[0] or sum(lengths) != A.shape[0]:
        raise DGLError(f"segment_mm: seglen_A has {len(lengths)} segments of {sum(lengths)} rows in all, "
                       f"for B's {B.shape[0]} matrices and A's {A.shape[0]} rows")
    if A.shape[0] == 0:
        return A.new_zeros((0, B.shape[2]))
    return torch.cat([part @ B[r] for r, part in enumerate(torch.split(A, lengths))])


def gather_mm(A, B, idx_a=None, idx_b=None):
    """out[i] = A[idx_a[i]] @ B[idx_b[i]] (A[i] / B[i] where the index is
    None): [N, D1] x [R, D1, D2] -> [K, D2]. Rows are grouped by their
    matrix of B, so no [K, D1, D2] copy of B is made."""
    if B.dim() != 3:
        raise DGLError(f"gather_mm expects B to be a 3D tensor, got {B.dim()} dimensions")
    a = A if idx_a is None else A[idx_a.long()]
    if idx_b is None:
        if a.shape[0] != B.shape[0]:
            raise DGLError(f"gather_mm: {a.shape[0]} rows of A but {B.shape[0]} matrices in B and no idx_b")
        return torch.bmm(a.unsqueeze(1), B).squeeze(1)
    idx_b = idx_b.long()
    if idx_b.numel() != a.shape[0]:
        raise DGLError(f"gather_mm: {a.shape[0]} rows of A but {idx_b.numel()} entries in idx_b")
    out = a.new_zeros((a.shape[0], B.shape[2]))
    for r in torch.unique(idx_b).tolist():
        rows = torch.nonzero(idx_b == r, as_tuple=False).reshape(-1)
        out = out.index_copy(0, rows, a[rows] @ B[r])
    return out


# ---------------------------------------------------------------------------
# Weighted adjacency matrices of dgld graphs (DGL's csrmm / csrsum /
# csrmask). Each graph of one edge type is a num_src x num_dst matrix whose
# entry (u, v) is the weight of edge u -> v (parallel edges add up).


def _unit(g, what):
    """(src, dst, num_src, num_dst) of a dgld graph of one edge type."""
    from ...heterograph import DGLGraph
    if not isinstance(g, DGLGraph):
        raise DGLError(f"{what} takes dgld graphs, got {type(g).__name__}: DGL's HeteroGraphIndex belongs to DGL's "
                       "C library, which dgld does not have")
    etypes = g.canonical_etypes
    if len(etypes) != 1:
        raise DGLError(f"{what} takes graphs of one edge type, got {len(etypes)}")
    src, dst = g.edges(etype=etypes[0]) if len(g.ntypes) > 1 else g.edges()
    stype, _, dtype_ = etypes[0]
    if g.is_block or len(g.ntypes) > 1:
        ns, nd = g.num_src_nodes(stype), g.num_dst_nodes(dtype_)
    else:
        ns = nd = g.num_nodes()
    return src.long(), dst.long(), ns, nd


def _coalesce(keys, weights, ncols):
    """The distinct keys (row * ncols + col), ascending, and their summed
    weights (differentiable in weights)."""
    uniq, inverse = torch.unique(keys, return_inverse=True)
    total = torch.zeros((uniq.numel(),) + tuple(weights.shape[1:]), dtype=weights.dtype, device=weights.device)
    total = total.index_add(0, inverse, weights)
    return uniq // max(ncols, 1), uniq % max(ncols, 1), total


def _result_graph(rows, cols, nrows, ncols, num_vtypes, idtype):
    from ...convert import graph, heterograph
    if num_vtypes == 1:
        if nrows != ncols:
            raise DGLError(f"a graph of one node type must be square, got {nrows} x {ncols}")
        return graph((rows, cols), num_nodes=nrows, idtype=idtype)
    if num_vtypes == 2:
        return heterograph({("_U", "_E", "_V"): (rows, cols)}, {"_U": nrows, "_V": ncols}, idtype=idtype)
    raise DGLError(f"num_vtypes must be 1 or 2, got {num_vtypes}")


def csrmm(A, A_weights, B, B_weights, num_vtypes):
    """The product of two weighted adjacency matrices (A's num_dst must be
    B's num_src): (graph C with an edge per non-zero position, in row-major
    order; C's weights, differentiable in A_weights and B_weights). With
    num_vtypes 1, C is a dgld.graph (square); with 2, a heterograph with
    node types _U and _V and edge type _E."""
    au, av, an, am = _unit(A, "csrmm")
    bu, bv, bn, bm = _unit(B, "csrmm")
    if am != bn:
        raise DGLError(f"csrmm: A is {an} x {am} but B is {bn} x {bm}")
    # Every pair (edge a: i -> j of A, edge b: j -> k of B) adds
    # w_a * w_b to C[i, k]: B's edges sorted by source give each j's run.
    order = torch.argsort(bu, stable=True)
    counts = torch.bincount(bu, minlength=bn)
    starts = torch.cumsum(counts, 0) - counts
    per_a = counts[av]
    ea = torch.repeat_interleave(torch.arange(au.numel()), per_a)
    within = torch.arange(ea.numel()) - torch.repeat_interleave(torch.cumsum(per_a, 0) - per_a, per_a)
    eb = order[starts[av[ea]] + within]
    keys = au[ea] * bm + bv[eb]
    weights = A_weights[ea] * B_weights[eb]
    rows, cols, w = _coalesce(keys, weights, bm)
    return _result_graph(rows, cols, an, bm, num_vtypes, A.idtype), w


def csrsum(gidxs, weights):
    """The sum of weighted adjacency matrices of the same shape: (graph,
    weights) as csrmm, with the node types of the first graph's kind."""
    units = [_unit(g, "csrsum") for g in gidxs]
    if not units:
        raise DGLError("csrsum takes at least one graph")
    n, m = units[0][2], units[0][3]
    for u in units[1:]:
        if (u[2], u[3]) != (n, m):
            raise DGLError(f"csrsum: the graphs' matrices differ in shape ({n} x {m} and {u[2]} x {u[3]})")
    keys = torch.cat([u[0] * m + u[1] for u in units])
    rows, cols, w = _coalesce(keys, torch.cat(list(weights)), m)
    num_vtypes = 1 if len(gidxs[0].ntypes) == 1 and n == m else 2
    return _result_graph(rows, cols, n, m, num_vtypes, gidxs[0].idtype), w


def csrmask(A, A_weights, B):
    """A's weighted adjacency matrix read at B's edges: one value per edge
    of B, in B's edge order, 0 where A has no edge (scipy's A[B != 0])."""
    au, av, an, am = _unit(A, "csrmask")
    bu, bv, bn, bm = _unit(B, "csrmask")
    if (an, am) != (bn, bm):
        raise DGLError(f"csrmask: A is {an} x {am} but B is {bn} x {bm}")
    keys, _, w = _coalesce(au * am + av, A_weights, 1)
    want = bu * am + bv
    if keys.numel() == 0:
        return A_weights.new_zeros((want.numel(),) + tuple(A_weights.shape[1:]))
    pos = torch.searchsorted(keys, want).clamp(max=keys.numel() - 1)
    found = keys[pos] == want
    out = w[pos]
    mask = found.reshape((-1,) + (1,) * (out.dim() - 1))
    return torch.where(mask, out, torch.zeros_like(out))


# The interface's names this module defines (the list is written once, in
# dgld/backend/_interface.py).
__all__ = [name for name in INTERFACE if name in globals()]
