"""dgld.distributed.nn (DGL's dgl.distributed.nn): the distributed modules."""

from .pytorch import DistEmbedding

__all__ = ["DistEmbedding"]
