"""dgld.graph_index (DGL's dgl.graph_index): create_graph_index, the
constructor DGL's code imports from there. dgld keeps no index object apart
from its graphs, so it returns the dgld graph the index would describe,
made by convert.py."""

import scipy.sparse

from ._errors import DGLError
from .convert import from_scipy, graph
from .heterograph import DGLGraph

__all__ = ["create_graph_index"]


def create_graph_index(graph_data, readonly):
    """A graph of one node and one edge type from graph_data (DGL's
    create_graph_index): None (an empty graph; DGL refuses that when
    readonly), an edge list [(u, v), ...], a SciPy sparse adjacency matrix,
    or a dgld graph (returned as it is). dgld's graphs are never mutated in
    place, so readonly changes nothing else."""
    if isinstance(graph_data, DGLGraph):
        return graph_data
    if graph_data is None:
        if readonly:
            raise DGLError("create_graph_index: an empty graph cannot be read-only (give edges, or readonly=False)")
        return graph(([], []), num_nodes=0)
    if isinstance(graph_data, (list, tuple)):
        pairs = list(graph_data)
        if any(len(p) != 2 for p in pairs):
            raise DGLError("create_graph_index: an edge list holds (src, dst) pairs")
        return graph(([int(u) for u, _ in pairs], [int(v) for _, v in pairs]))
    if scipy.sparse.issparse(graph_data):
        return from_scipy(graph_data)
    raise DGLError(f"create_graph_index: graph_data must be None, an edge list, a SciPy sparse matrix or a dgld "
                   f"graph, got {type(graph_data).__name__} (dgld reads no networkx graphs)")
