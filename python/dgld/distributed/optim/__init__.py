"""dgld.distributed.optim (DGL's dgl.distributed.optim, DGL 0.6 and later):
the sparse optimisers of DistEmbedding, SparseAdagrad(params, lr, eps=1e-10)
and SparseAdam(params, lr, betas=(0.9, 0.999), eps=1e-08). The same classes
as dgld.distributed.SparseAdagrad / SparseAdam (DGL 0.5's names)."""

from .pytorch import SparseAdagrad, SparseAdam

__all__ = ["SparseAdagrad", "SparseAdam"]
