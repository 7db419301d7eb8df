"""dgld.nn.functional (DGL's dgl.nn.functional): edge_softmax."""

from ..ops import edge_softmax

__all__ = ["edge_softmax"]
