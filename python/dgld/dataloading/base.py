"""DGL's edge-prediction sampler (dgl.dataloading.base): a node sampler for
the ends of each batch's edges, which edges to exclude from the batch's
blocks, and the negative sampler."""

from .._errors import InvalidArgument
from .negative_sampler import Uniform

__all__ = ["EdgePredictionSampler", "as_edge_prediction_sampler"]


class EdgePredictionSampler:
    """What as_edge_prediction_sampler returns: a node sampler for the ends
    of each batch's edges, which edges to exclude, and the negatives."""

    def __init__(self, sampler, exclude=None, reverse_eids=None, reverse_etypes=None, negative_sampler=None,
                 prefetch_labels=None):
        if exclude not in (None, "self", "reverse_id"):
            raise InvalidArgument(f"exclude={exclude!r}: dgld supports None, 'self' and 'reverse_id' (both remove "
                                  "the batch's edges and their reverse edges from its blocks, by endpoints)")
        if reverse_etypes is not None:
            raise InvalidArgument("reverse_etypes: the graph has one edge type")
        if negative_sampler is not None and not isinstance(negative_sampler, Uniform):
            raise InvalidArgument("negative_sampler must be dgld.dataloading.negative_sampler.Uniform(k) or "
                                  "LocalUniform(k)")
        self.sampler = sampler
        self.exclude = exclude
        self.negative_sampler = negative_sampler


def as_edge_prediction_sampler(sampler, exclude=None, reverse_eids=None, reverse_etypes=None, negative_sampler=None,
                               prefetch_labels=None):
    """DGL's as_edge_prediction_sampler over a NeighborSampler. reverse_eids
    is accepted and not needed: dgld finds reverse edges by their endpoints."""
    return EdgePredictionSampler(sampler, exclude, reverse_eids, reverse_etypes, negative_sampler, prefetch_labels)
