"""DGL's edge-prediction sampler (dgl.dataloading.base): a node sampler for
the ends of each batch's edges, which edges to exclude from the batch's
blocks, and the negative sampler."""

import torch

from .._errors import InvalidArgument
from .negative_sampler import Uniform

__all__ = ["EdgePredictionSampler", "as_edge_prediction_sampler"]


class EdgePredictionSampler:
    """What as_edge_prediction_sampler returns: a node sampler for the ends
    of each batch's edges, which edges to exclude, and the negatives."""

    def __init__(self, sampler, exclude=None, reverse_eids=None, reverse_etypes=None, negative_sampler=None,
                 prefetch_labels=None):
        if exclude not in (None, "self", "reverse_id"):
            raise InvalidArgument(f"exclude={exclude!r}: dgld supports None, 'self' (the batch's edges leave its "
                                  "blocks) and 'reverse_id' (their reverse edges too)")
        if reverse_etypes is not None:
            raise InvalidArgument("reverse_etypes: the graph has one edge type")
        if negative_sampler is not None and not isinstance(negative_sampler, Uniform):
            raise InvalidArgument("negative_sampler must be dgld.dataloading.negative_sampler.Uniform(k) or "
                                  "LocalUniform(k)")
        self.sampler = sampler
        self.exclude = exclude
        # As DGL: 'self' removes the batch's edges u -> v from its blocks;
        # 'reverse_id' also the edges reverse_eids names. dgld finds a
        # reverse edge by its endpoints (v -> u), so reverse_eids only says
        # whether there is one: the identity (DGL's train_dist_unsupervised.py
        # passes torch.arange(num_edges)) names each edge itself, as 'self'.
        self.exclude_reverse = exclude == "reverse_id" and not _is_identity(reverse_eids)
        self.negative_sampler = negative_sampler


def _is_identity(reverse_eids):
    if reverse_eids is None:
        return False
    ids = torch.as_tensor(reverse_eids)
    return ids.dim() == 1 and torch.equal(ids.to(torch.int64), torch.arange(ids.numel(), dtype=torch.int64))


def as_edge_prediction_sampler(sampler, exclude=None, reverse_eids=None, reverse_etypes=None, negative_sampler=None,
                               prefetch_labels=None):
    """DGL's as_edge_prediction_sampler over a NeighborSampler. dgld finds
    reverse edges by their endpoints: reverse_eids only tells the identity
    (each edge its own reverse: 'self') from a real reverse mapping."""
    return EdgePredictionSampler(sampler, exclude, reverse_eids, reverse_etypes, negative_sampler, prefetch_labels)
