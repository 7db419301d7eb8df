"""DGL's generic loaders (dgl.dataloading.dataloader) on a DistGraph:
NodeDataLoader and EdgeDataLoader (DGL 0.6-0.8) and DataLoader (DGL 0.8+)
are dgld.distributed's DistNodeDataLoader / DistEdgeDataLoader. dgld's
loaders sample a DistGraph only."""

from .._errors import InvalidArgument
from ..heterograph import DGLGraph
from .base import EdgePredictionSampler

__all__ = ["NodeDataLoader", "EdgeDataLoader", "DataLoader"]


def _loaders():
    # At call time: dgld.distributed's loaders import this package's samplers.
    from ..distributed import dist_dataloader
    return dist_dataloader


def _distributed_only(g, name):
    if isinstance(g, DGLGraph):  # any in-memory graph
        raise InvalidArgument(f"{name}: dgld's loaders sample a DistGraph (dgld.distributed.DistGraph); sampling "
                              "an in-memory DGLGraph is not supported")


def NodeDataLoader(g, nids, graph_sampler, device=None, **kwargs):
    """DGL 0.6-0.7's NodeDataLoader, which on a DistGraph is DistNodeDataLoader."""
    _distributed_only(g, "NodeDataLoader")
    return _loaders().DistNodeDataLoader(g, nids, graph_sampler, device=device, **kwargs)


def EdgeDataLoader(g, eids, graph_sampler, device=None, **kwargs):
    """DGL 0.6-0.8's EdgeDataLoader, which on a DistGraph is DistEdgeDataLoader."""
    _distributed_only(g, "EdgeDataLoader")
    return _loaders().DistEdgeDataLoader(g, eids, graph_sampler, device=device, **kwargs)


def DataLoader(graph, indices, graph_sampler, device=None, **kwargs):
    """DGL 0.8+'s DataLoader on a DistGraph: DistEdgeDataLoader for an
    edge-prediction sampler, DistNodeDataLoader otherwise."""
    _distributed_only(graph, "DataLoader")
    if isinstance(graph_sampler, EdgePredictionSampler):
        return _loaders().DistEdgeDataLoader(graph, indices, graph_sampler, device=device, **kwargs)
    return _loaders().DistNodeDataLoader(graph, indices, graph_sampler, device=device, **kwargs)
