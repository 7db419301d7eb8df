"""DGLGraph and DGLBlock: the classes every dgld graph object is an instance
of, as in DGL (dgl.DGLGraph, whose old name dgl.DGLHeteroGraph is the same
class, and dgl.DGLBlock, a DGLGraph too).

The graphs themselves are of two kinds, each with a block variant:
graph.py's homogeneous graphs (one node and one edge type, the message
passing kernels' CSR; dgld.graph, the loaders' blocks, to_block) and
typed_graph.py's typed graphs (one homogeneous relation graph per edge type;
dgld.heterograph, typed create_block and typed loader batches). So
isinstance(g, dgld.DGLGraph) holds for all of them, isinstance(b,
dgld.DGLBlock) for every block, and code that needs a kind asks for its
class (graph.HomoGraph, typed_graph.TypedGraph).
"""

import torch

from ._errors import DGLError
from ._graph_data import _check_device

__all__ = ["DGLGraph", "DGLHeteroGraph", "DGLBlock"]


class DGLGraph:
    """Any dgld graph (see the module doc). Made by dgld.graph(),
    dgld.heterograph(), dgld.create_block(), dgld.to_block() and dgld's
    loaders; DGLGraph() with no arguments is DGL's empty graph (one node
    and one edge type), grown with add_nodes / add_edges."""

    is_block = False

    # graph.py (which builds on this module) sets how the empty graph is made.
    _make_empty = None

    def __new__(cls, *args, **kwargs):
        if cls is DGLGraph and not args and not kwargs:
            return DGLGraph._make_empty()
        return super().__new__(cls)

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise DGLError("make graphs with dgld.graph((src, dst), num_nodes=...), dgld.heterograph({...}) or "
                           "dgld.create_block(...); DGLGraph() alone is the empty graph")

    @property
    def device(self):
        """Every dgld graph lives on the CPU."""
        return torch.device("cpu")

    def to(self, device, **kwargs):
        """The graph itself for the CPU; DGLError for any other device."""
        _check_device(device)
        return self

    def cpu(self):
        return self


DGLHeteroGraph = DGLGraph


class DGLBlock(DGLGraph):
    """DGL's block (message-flow graph): source and destination nodes are
    separate sets; in the blocks of the loaders and of to_block the first
    num_dst_nodes source nodes are the destination nodes."""

    is_block = True
