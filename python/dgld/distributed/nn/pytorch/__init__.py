"""dgld.distributed.nn.pytorch (DGL's dgl.distributed.nn.pytorch): DistEmbedding."""

from .sparse_emb import DistEmbedding

__all__ = ["DistEmbedding"]
