"""dgld: DGL's distributed training API over dgld's servers.

A training script written for DGL's distributed mode runs on dgld with its
imports changed:

    import dgld as dgl                  # was: import dgl
    import dgld.nn.pytorch as dglnn     # was: import dgl.nn.pytorch as dglnn

Python runs the model step; C++ threads (or sampler-worker processes) do the
sampling, the feature fetching and the prefetching, without the GIL.
docs/python.md lists what is there and how it differs from DGL.
"""

import torch  # noqa: F401 - loads libtorch before the extension

from . import _errors
from ._errors import DGLError
from . import _C

# meson.build's project version, as every program's --version reports it; the wire protocol's version.
__version__ = _C.__version__
protocol_version = _C.protocol_version
from .base import ALL, EID, ETYPE, NID, NTYPE

from . import function  # noqa: E402
from .heterograph import DGLBlock, DGLGraph, DGLHeteroGraph  # noqa: E402
from .convert import (bipartite_from_scipy, create_block, from_scipy, graph, heterograph, rand_bipartite,  # noqa: E402
                      rand_graph, to_block)
from .transforms import (add_self_loop, compact_graphs, edge_subgraph, in_subgraph, node_subgraph,  # noqa: E402
                         remove_edges, remove_self_loop, reverse)
from . import ops  # noqa: E402
from . import distributed  # noqa: E402
from . import dataloading  # noqa: E402
from . import nn  # noqa: E402
from . import data  # noqa: E402
from . import backend  # noqa: E402

__all__ = ["DGLError", "NID", "EID", "NTYPE", "ETYPE", "ALL", "DGLGraph", "DGLBlock", "DGLHeteroGraph", "graph",
           "heterograph", "create_block", "to_block", "add_self_loop", "remove_self_loop", "reverse", "remove_edges",
           "edge_subgraph", "node_subgraph", "in_subgraph", "compact_graphs", "function", "ops", "distributed",
           "dataloading", "nn", "data", "backend", "rand_graph", "rand_bipartite", "from_scipy",
           "bipartite_from_scipy"]
