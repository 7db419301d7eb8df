"""dgld.dataloading: DGL's dgl.dataloading for a DistGraph.

The samplers (neighbor_sampler.py: NeighborSampler and the multi-layer
names; base.py: as_edge_prediction_sampler; negative_sampler.py) and DGL's
generic loaders (dataloader.py: NodeDataLoader, EdgeDataLoader, DataLoader)
are here; DistNodeDataLoader, DistEdgeDataLoader and DistDataLoader are
dgld.distributed's (dist_dataloader.py), re-exported as DGL does.
"""

from . import negative_sampler
from .base import EdgePredictionSampler, as_edge_prediction_sampler
from .dataloader import DataLoader, EdgeDataLoader, NodeDataLoader
from .neighbor_sampler import MultiLayerFullNeighborSampler, MultiLayerNeighborSampler, NeighborSampler

__all__ = ["NeighborSampler", "MultiLayerNeighborSampler", "MultiLayerFullNeighborSampler", "DistNodeDataLoader",
           "DistDataLoader", "as_edge_prediction_sampler", "EdgePredictionSampler", "DistEdgeDataLoader",
           "negative_sampler", "NodeDataLoader", "EdgeDataLoader", "DataLoader"]

_DISTRIBUTED = ("DistNodeDataLoader", "DistEdgeDataLoader", "DistDataLoader")


def __getattr__(name):
    # The distributed loaders on first use: they import this package's
    # samplers, so this package cannot import them while it loads.
    if name in _DISTRIBUTED:
        from ..distributed import dist_dataloader
        return getattr(dist_dataloader, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
