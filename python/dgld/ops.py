"""dgld.ops: DGL's dgl.ops over dgld's graph objects: the generalized
sparse-dense product (gspmm), the sampled dense-dense product (gsddmm) and
edge_softmax, each on the fused kernels (torch.ops.dgld.gspmm / gsddmm,
autograd included)."""

from . import _kernels
from ._errors import DGLError
from .base import ALL, is_all
from .graph import HomoGraph
from .transforms import reverse

__all__ = ["gspmm", "gsddmm", "edge_softmax"]

_OPS = ("add", "sub", "mul", "div", "copy_lhs", "copy_rhs", "dot")


def gspmm(g, op, reduce_op, lhs_data, rhs_data):
    """out[v] = reduce over v's in-edges (u -> v, id e) of op(lhs_data[u],
    rhs_data[e]) (DGL's dgl.ops.gspmm)."""
    if not isinstance(g, HomoGraph):
        raise DGLError(f"gspmm takes a homogeneous dgld graph, got {type(g).__name__}")
    if op not in _OPS:
        raise DGLError(f"gspmm: unknown op {op!r} (one of {', '.join(_OPS)})")
    return _kernels.gspmm(g._csr(), op, reduce_op, lhs_data, rhs_data, "u", "e")


def gsddmm(g, op, lhs_data, rhs_data, lhs_target="u", rhs_target="v"):
    """out[e] = op(lhs_data[lhs_target(e)], rhs_data[rhs_target(e)]) for
    every edge e (DGL's dgl.ops.gsddmm)."""
    if not isinstance(g, HomoGraph):
        raise DGLError(f"gsddmm takes a homogeneous dgld graph, got {type(g).__name__}")
    if op not in _OPS:
        raise DGLError(f"gsddmm: unknown op {op!r} (one of {', '.join(_OPS)})")
    return _kernels.gsddmm(g._csr(), op, lhs_data, rhs_data, lhs_target, rhs_target)


def edge_softmax(graph, logits, eids=ALL, norm_by="dst"):
    """The softmax of each edge's logits over the in-edges of its
    destination (norm_by='dst'), per feature (DGL's edge_softmax): a max,
    an exp, a sum and a division, each one kernel; zero in-degree nodes
    have no edges to normalise."""
    if not is_all(eids):
        raise DGLError("edge_softmax over a subset of edges is not supported by dgld; pass every edge")
    if norm_by not in ("dst", "src"):
        raise DGLError(f"edge_softmax: norm_by must be 'dst' or 'src', got {norm_by!r}")
    if norm_by == "src":
        graph = reverse(graph)
    flat = logits.dim() == 1
    x = logits.unsqueeze(-1) if flat else logits
    try:
        out = _kernels.edge_softmax_native(graph._csr(), x)
    except RuntimeError as e:
        raise DGLError(str(e).split("\nException raised from")[0]) from None
    return out.squeeze(-1) if flat else out
