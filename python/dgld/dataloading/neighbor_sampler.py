"""DGL's NeighborSampler (dgl.dataloading.neighbor_sampler): the sampling
arguments of dgld's distributed loaders, checked once as a _C.SamplingSpec
that travels as it is to the sampler-workers and graph-servers."""

from .. import _C
from .._errors import InvalidArgument

__all__ = ["NeighborSampler", "MultiLayerNeighborSampler", "MultiLayerFullNeighborSampler"]


class NeighborSampler:
    """DGL's NeighborSampler: fanouts[i] neighbours per node for block i
    (input layer first; -1: all), uniformly or, with prob='w', in
    proportion to the edge tensor g.edata['w'] (any numeric dtype, a bool
    mask too; zero: never). The
    arguments become one _C.SamplingSpec, checked there, that travels as it
    is to the sampler-workers and graph-servers."""

    def __init__(self, fanouts, edge_dir="in", prob=None, mask=None, replace=False, prefetch_node_feats=None,
                 prefetch_labels=None, prefetch_edge_feats=None, output_device=None, fused=True, return_eids=False):
        # fused (DGL 1.x) and return_eids (DGL 0.6-0.7: blocks carry edata[dgl.EID] always) change nothing here.
        # A layer's fanout may be DGL's dict {etype: fanout} (typed graphs, distributed/typed_batches.py): the
        # spec then takes the largest per layer, and the loader gives it one fanout per edge type.
        self.layer_fanouts = list(fanouts) if isinstance(fanouts, (list, tuple)) else fanouts
        try:
            fanouts = [_layer_fanout(f) for f in fanouts]
        except (TypeError, ValueError):
            raise InvalidArgument(f"fanouts must be a list of integers >= -1 (or of dicts {{etype: fanout}}), "
                                  f"got {fanouts!r}") from None
        if edge_dir != "in":
            raise InvalidArgument("the distributed loader samples in-neighbours only (edge_dir='in')")
        if mask is not None:
            raise InvalidArgument("NeighborSampler(mask=...) is not supported by dgld yet (prob= is)")
        if prob is not None and not isinstance(prob, str):
            raise InvalidArgument(f"prob must name an edge tensor (g.edata[prob]), got {type(prob).__name__}")
        if prefetch_edge_feats:
            raise InvalidArgument("prefetch_edge_feats is not supported by dgld yet")
        for name, v in (("prefetch_node_feats", prefetch_node_feats), ("prefetch_labels", prefetch_labels)):
            if v is not None and len(v) > 1:
                raise InvalidArgument(f"{name}: dgld fetches one tensor with the batch, got {v}")
        self.spec = _C.SamplingSpec(fanouts, replace=bool(replace), prob=prob or "")
        self.fanouts = list(self.spec.fanouts)
        self.replace = self.spec.replace
        self.prob = prob
        self.prefetch_node_feats = prefetch_node_feats
        self.prefetch_labels = prefetch_labels

    def __getstate__(self):  # a sampler in a collate_fn travels to sampler processes
        return {k: v for k, v in self.__dict__.items() if k != "spec"}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.spec = _C.SamplingSpec(self.fanouts, replace=self.replace, prob=self.prob or "")


def _layer_fanout(f):
    """One layer's fanout for the spec: an int, or a dict's largest (-1 if any is -1)."""
    if isinstance(f, dict):
        values = [int(v) for v in f.values()]
        if not values:
            raise ValueError("empty fanout dict")
        return -1 if -1 in values else max(values)
    return int(f)


MultiLayerNeighborSampler = NeighborSampler


class MultiLayerFullNeighborSampler(NeighborSampler):
    def __init__(self, num_layers, **kwargs):
        super().__init__([-1] * int(num_layers), **kwargs)
