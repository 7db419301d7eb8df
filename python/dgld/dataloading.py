"""dgld.dataloading: DGL's NeighborSampler and DistNodeDataLoader.

The loader's batches are made in C++: by the trainer's own threads (two by
default, at a lower priority than the training step), or by sampler-worker
processes, while Python trains on the previous batch. Each batch is
(input_nodes, seeds, blocks), blocks being torch.classes.dgld.Block objects
(DGL's block API: num_src_nodes(), num_dst_nodes(), edges(), srcdata[NID],
...; dgld.nn's layers take them, also in TorchScript).

Features and labels come with the batch (prefetch_node_feats /
prefetch_labels of the sampler, by default 'features' and 'labels' when the
graph has them): they are in blocks[0].srcdata and blocks[-1].dstdata, and a
script that asks g.ndata['features'][input_nodes] for the batch's own
input_nodes tensor gets the fetched rows without another request, so DGL's
examples run unchanged and fast.
"""

import torch

from . import _C
from ._client import _interrupted
from ._errors import InvalidArgument
from .convert import block_from_native, pair_graph
from .graph import DGLGraph
from .dist_dataloader import DistDataLoader
from .dist_tensor import DistTensor, _as_ids
from .typed_batches import etype_fanouts, typed_batch, typed_seeds

__all__ = ["NeighborSampler", "MultiLayerNeighborSampler", "MultiLayerFullNeighborSampler", "DistNodeDataLoader",
           "DistDataLoader", "as_edge_prediction_sampler", "EdgePredictionSampler", "DistEdgeDataLoader",
           "negative_sampler", "NodeDataLoader", "EdgeDataLoader", "DataLoader"]


class NeighborSampler:
    """DGL's NeighborSampler: fanouts[i] neighbours per node for block i
    (input layer first; -1: all), uniformly or, with prob='w', in
    proportion to the float32 edge tensor g.edata['w'] (zero: never). The
    arguments become one _C.SamplingSpec, checked there, that travels as it
    is to the sampler-workers and graph-servers."""

    def __init__(self, fanouts, edge_dir="in", prob=None, mask=None, replace=False, prefetch_node_feats=None,
                 prefetch_labels=None, prefetch_edge_feats=None, output_device=None, fused=True, return_eids=False):
        # fused (DGL 1.x) and return_eids (DGL 0.6-0.7: blocks carry edata[dgl.EID] always) change nothing here.
        # A layer's fanout may be DGL's dict {etype: fanout} (typed graphs, typed_batches.py): the
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


def _default_tensor(g, names, want_dtype, want_dim):
    """The tensor to fetch with each batch: the one named, or the graph's
    `features` / `labels` when it has one of the right dtype and shape."""
    if names is not None:
        if not names:
            return ""
        if names[0] not in g.ndata:
            raise InvalidArgument(f"the graph has no node data {names[0]!r} to prefetch")
        return names[0]
    default = "features" if want_dim == 2 else "labels"
    if default in g.ndata:
        t = g.ndata[default]
        if t.dtype == want_dtype and len(t.shape) == want_dim:
            return default
    return ""


def _typed_tensors(g, sampler, seed_types):
    """A typed graph's tensors to fetch with each batch: the feature (named,
    or 'features' when a node type has it) read from every type that has it,
    and the labels (named, or 'labels') of the seeds' one node type when it
    has them."""
    feature = ""
    names = sampler.prefetch_node_feats
    want = names[0] if names else ("features" if names is None else "")
    if want and any(want in g.nodes[t].data for t in g.ntypes):
        feature = want
    elif names:
        raise InvalidArgument(f"no node type of the graph has data {want!r} to prefetch")
    label = ""
    names = sampler.prefetch_labels
    want = names[0] if names else ("labels" if names is None else "")
    if want and len(seed_types) == 1 and want in g.nodes[seed_types[0]].data:
        label = want
    elif names:
        raise InvalidArgument(f"prefetch_labels={names}: the seeds must be of one node type that has data {want!r}")
    return feature, label


def _raw_batches(loader):
    """The C++ loader's batches of one epoch; Ctrl-C drops the connections
    on the way out."""
    while True:
        try:
            b = loader.next()
        except KeyboardInterrupt:
            _interrupted()
            raise
        if b is None:
            return
        yield b


class _EpochLoader:
    """What DistNodeDataLoader and DistEdgeDataLoader share: the checks of
    their ids, the epoch count, len() and iter() over the C++ loader's
    batches of one epoch, and the accumulated timings."""

    def _set_ids(self, g, ids, device, unit, count):
        if device is not None and torch.device(device).type != "cpu":
            raise InvalidArgument("dgld trains on the CPU: device must be 'cpu'")
        if isinstance(ids, dict):
            if len(ids) != 1:
                raise InvalidArgument("the graph has one node type: pass its ids" if unit == "node"
                                      else "the graph has one edge type: pass its edge ids")
            ids = next(iter(ids.values()))
        if isinstance(ids, DistTensor):
            raise InvalidArgument(f"pass {unit} ids (e.g. {unit}_split's result), not a DistTensor")
        self._g = g
        self._ids = _as_ids(ids, count)
        self._epoch = 0
        self.timings = {"sample_s": 0.0, "fetch_s": 0.0, "wait_s": 0.0}

    def __len__(self):
        return self._loader.num_batches()

    def __iter__(self):
        self._loader.start_epoch(self._epoch)
        self._epoch += 1
        return self._batches()

    def _add_timings(self, timings):
        for k in self.timings:
            self.timings[k] += timings[k]


class DistNodeDataLoader(_EpochLoader):
    """Mini-batches of `nids` (this trainer's training nodes), as DGL's
    dgl.dataloading.DistNodeDataLoader. Each iteration over the loader is
    one epoch: the ids are shuffled (seeded from torch's generator when the
    loader is made) and cut into batches of batch_size; every id comes once.

    dgld additions: num_threads (C++ threads making batches, default 2),
    prefetch (batches made ahead, default 4), samplers ("host:port" of
    sampler-workers already running), feature_cache_mb (other machines'
    feature rows kept in this process, the most referenced halo nodes
    first, as trainer-host's --feature-cache-mb; default 256)."""

    def __init__(self, g, nids, graph_sampler, device=None, batch_size=1, shuffle=False, drop_last=False,
                 num_threads=2, prefetch=4, samplers=None, batch_timeout_s=60.0, feature_cache_mb=256, **kwargs):
        self._typed = not g.is_homogeneous()
        spec = graph_sampler.spec
        if self._typed:
            ids, seed_types = typed_seeds(g, nids)
            self._set_ids(g, ids, device, "node", g.num_nodes())
            spec = _C.SamplingSpec(spec.fanouts, etype_fanouts=etype_fanouts(g, graph_sampler.layer_fanouts),
                                   replace=spec.replace, prob=spec.prob)
            self._feature, self._label = _typed_tensors(g, graph_sampler, seed_types)
            label_spec = f"{seed_types[0]}/{self._label}" if self._label else ""
        else:
            self._set_ids(g, nids, device, "node", g.num_nodes())
            self._feature = _default_tensor(g, graph_sampler.prefetch_node_feats, torch.float32, 2)
            self._label = label_spec = _default_tensor(g, graph_sampler.prefetch_labels, torch.int64, 1)
        self._sampler = graph_sampler
        seed = int(torch.randint(0, 2**62, (1,)).item())
        self._loader = _C.DataLoader(
            g._client, self._ids, spec, int(batch_size), bool(shuffle),
            bool(drop_last), seed, int(prefetch), self._feature, label_spec, int(num_threads),
            list(samplers or []), float(batch_timeout_s), int(feature_cache_mb))

    def _typed_batches(self):
        g, name = self._g, self._feature
        for b in _raw_batches(self._loader):
            _, _, natives, features, labels, timings = b
            self._add_timings(timings)
            in_ids, seed_ids, blocks = typed_batch(g, natives, features, labels, name, self._label)
            for t, _, rows in features or []:
                g.nodes[g.ntypes[t]].data[name]._remember(in_ids[g.ntypes[t]], rows)
            yield in_ids, seed_ids, blocks

    def _batches(self):
        if self._typed:
            yield from self._typed_batches()
            return
        feat = self._g.ndata[self._feature] if self._feature else None
        label = self._g.ndata[self._label] if self._label else None
        for b in _raw_batches(self._loader):
            input_nodes, seeds, blocks, features, labels, timings = b
            self._add_timings(timings)
            if feat is not None and features is not None:
                feat._remember(input_nodes, features)
            if label is not None and labels is not None:
                label._remember(seeds, labels)
            yield input_nodes, seeds, [block_from_native(b) for b in blocks]


class _NegativeSamplers:
    """dgld.dataloading.negative_sampler: DGL's Uniform(k), and LocalUniform(k)
    (negatives among the nodes of the machine that makes the batch, as
    GraphStorm's localuniform)."""

    class Uniform:
        kind = "uniform"

        def __init__(self, k):
            self.k = int(k)
            if self.k < 1:
                raise InvalidArgument(f"a negative sampler draws k >= 1 negatives per edge, got {k}")

    class LocalUniform(Uniform):
        kind = "local-uniform"


negative_sampler = _NegativeSamplers


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
        if negative_sampler is not None and not isinstance(negative_sampler, _NegativeSamplers.Uniform):
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


class DistEdgeDataLoader(_EpochLoader):
    """Mini-batches of `eids` (this trainer's training edges, e.g.
    edge_split(g.edata['train_mask'], ...)), as DGL's DistEdgeDataLoader
    with an edge-prediction sampler: each iteration is one epoch, yielding
    (input_nodes, pair_graph, neg_pair_graph, blocks), or (input_nodes,
    pair_graph, blocks) without a negative sampler. Batches are made by C++
    threads (docs/link-prediction.md).

    dgld additions: num_threads, prefetch, feature_cache_mb (as
    DistNodeDataLoader) and exclude_positives (redraw negatives that hit the
    edge itself, another positive of the batch or a held-out edge of the
    link split; it reads every partition's link split file, so every
    machine needs them)."""

    def __init__(self, g, eids, graph_sampler, device=None, batch_size=1, shuffle=False, drop_last=False,
                 num_threads=2, prefetch=4, exclude_positives=False, feature_cache_mb=256, **kwargs):
        if isinstance(graph_sampler, NeighborSampler):
            # DGL 0.7-0.8's form: the edge-prediction options as the loader's arguments.
            graph_sampler = as_edge_prediction_sampler(
                graph_sampler, exclude=kwargs.pop("exclude", None), reverse_eids=kwargs.pop("reverse_eids", None),
                reverse_etypes=kwargs.pop("reverse_etypes", None),
                negative_sampler=kwargs.pop("negative_sampler", None))
        if not isinstance(graph_sampler, EdgePredictionSampler):
            raise InvalidArgument("DistEdgeDataLoader needs as_edge_prediction_sampler(NeighborSampler(...), ...) "
                                  "or a NeighborSampler with negative_sampler=/exclude= arguments")
        if drop_last:
            raise InvalidArgument("DistEdgeDataLoader: drop_last is not supported by dgld yet")
        self._set_ids(g, eids, device, "edge", g.num_edges())
        self._sampler = graph_sampler
        node_sampler = graph_sampler.sampler
        self._feature = _default_tensor(g, node_sampler.prefetch_node_feats, torch.float32, 2)
        neg = graph_sampler.negative_sampler
        seed = int(torch.randint(0, 2**62, (1,)).item())
        self._loader = _C.EdgeDataLoader(
            g._client, self._ids, node_sampler.spec, int(batch_size), bool(shuffle), seed,
            int(prefetch), self._feature, int(num_threads), neg.k if neg else 0, neg.kind if neg else "uniform",
            graph_sampler.exclude is not None, bool(exclude_positives), int(feature_cache_mb))

    def _batches(self):
        feat = self._g.ndata[self._feature] if self._feature else None
        for b in _raw_batches(self._loader):
            input_nodes, seeds, blocks, features, timings, pos_u, pos_v, neg_u, neg_v = b
            self._add_timings(timings)
            if feat is not None and features is not None:
                feat._remember(input_nodes, features)
            pair = pair_graph(pos_u, pos_v, seeds)
            blocks = [block_from_native(b) for b in blocks]
            if self._sampler.negative_sampler is None:
                yield input_nodes, pair, blocks
            else:
                yield input_nodes, pair, pair_graph(neg_u, neg_v, seeds), blocks


def _distributed_only(g, name):
    if isinstance(g, DGLGraph):
        raise InvalidArgument(f"{name}: dgld's loaders sample a DistGraph (dgld.distributed.DistGraph); sampling "
                              "an in-memory DGLGraph is not supported")


def NodeDataLoader(g, nids, graph_sampler, device=None, **kwargs):
    """DGL 0.6-0.7's NodeDataLoader, which on a DistGraph is DistNodeDataLoader."""
    _distributed_only(g, "NodeDataLoader")
    return DistNodeDataLoader(g, nids, graph_sampler, device=device, **kwargs)


def EdgeDataLoader(g, eids, graph_sampler, device=None, **kwargs):
    """DGL 0.6-0.8's EdgeDataLoader, which on a DistGraph is DistEdgeDataLoader."""
    _distributed_only(g, "EdgeDataLoader")
    return DistEdgeDataLoader(g, eids, graph_sampler, device=device, **kwargs)


def DataLoader(graph, indices, graph_sampler, device=None, **kwargs):
    """DGL 0.8+'s DataLoader on a DistGraph: DistEdgeDataLoader for an
    edge-prediction sampler, DistNodeDataLoader otherwise."""
    _distributed_only(graph, "DataLoader")
    if isinstance(graph_sampler, EdgePredictionSampler):
        return DistEdgeDataLoader(graph, indices, graph_sampler, device=device, **kwargs)
    return DistNodeDataLoader(graph, indices, graph_sampler, device=device, **kwargs)
