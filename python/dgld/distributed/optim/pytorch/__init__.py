"""dgld.distributed.optim.pytorch (DGL's dgl.distributed.optim.pytorch)."""

from .sparse_optim import SparseAdagrad, SparseAdam

__all__ = ["SparseAdagrad", "SparseAdam"]
