"""DGL's distributed loaders (dgl.distributed.dist_dataloader): the generic
DistDataLoader, and DistNodeDataLoader / DistEdgeDataLoader over a
NeighborSampler (dgld.dataloading re-exports them, as DGL's
dgl.dataloading does).

DistDataLoader(dataset, batch_size, shuffle, collate_fn, drop_last,
queue_size) gives batches of dataset items passed through collate_fn (the
form DGL's distributed guide uses: collate_fn=sampler.sample_blocks). With
initialize(num_workers=N), N > 0 (dgl-launch --num-samplers N), the
collate_fn runs in the trainer's N sampler processes (_sampler_pool.py),
queue_size batches ahead (default 4 N), and the batches come back in order;
with 0 it runs in this process when the batch is asked for. Each iter() is
an epoch: the items are shuffled (torch's generator) when shuffle is set.
As in DGL, collate_fn gets a list of items, tensor and numpy scalars turned
into Python numbers.

DistNodeDataLoader's and DistEdgeDataLoader's batches are made in C++: by
the trainer's own threads (two by default, at a lower priority than the
training step), or by sampler-worker processes, while Python trains on the
previous batch. Each node batch is (input_nodes, seeds, blocks), blocks
being dgld.DGLBlock objects over the loader's torch.classes.dgld.Block
(DGL's block API; dgld.nn's layers take them, also in TorchScript).
Features and labels come with the batch (prefetch_node_feats /
prefetch_labels of the sampler, by default 'features' and 'labels' when the
graph has them): they are in blocks[0].srcdata and blocks[-1].dstdata, and a
script that asks g.ndata['features'][input_nodes] for the batch's own
input_nodes tensor gets the fetched rows without another request, so DGL's
examples run unchanged and fast.
"""

import numpy as np
import torch

from .. import _C
from .._errors import InvalidArgument
from ..base import as_ids
from ..convert import block_from_native, pair_graph
from ..dataloading.base import EdgePredictionSampler, as_edge_prediction_sampler
from ..dataloading.neighbor_sampler import NeighborSampler
from . import _sampler_pool
from . import dist_context
from .dist_tensor import DistTensor, forget_batch_rows
from .typed_batches import etype_fanouts, typed_batch, typed_edge_seeds, typed_pair_graph, typed_seeds

__all__ = ["DistDataLoader", "DistNodeDataLoader", "DistEdgeDataLoader"]


def _scalar(item):
    if isinstance(item, torch.Tensor) and item.dim() == 0:
        return item.item()
    if isinstance(item, np.generic):
        return item.item()
    if isinstance(item, tuple):
        return tuple(_scalar(x) for x in item)
    return item


def _identity(items):
    return items


class DistDataLoader:
    """See the module doc. dgld addition: batch_timeout_s, how long the
    trainer waits for one batch from a sampler process (default 120)."""

    def __init__(self, dataset, batch_size, shuffle=False, collate_fn=None, drop_last=False, queue_size=None,
                 batch_timeout_s=120.0):
        self.dataset = dataset
        self.batch_size = int(batch_size)
        if self.batch_size < 1:
            raise InvalidArgument("batch_size must be >= 1")
        self.shuffle = shuffle
        self.collate_fn = collate_fn or _identity
        self.drop_last = drop_last
        self.batch_timeout_s = float(batch_timeout_s)
        self.num_workers = dist_context.num_sampler_workers() if collate_fn is not None else 0
        self.queue_size = 4 * max(1, self.num_workers) if queue_size is None else int(queue_size)
        if self.queue_size < 1:
            raise InvalidArgument(f"queue_size must be >= 1, got {queue_size}")
        self._epoch = 0
        self._pool = None
        if self.num_workers:
            self._pool = _sampler_pool.get_pool()
            self._loader_id = self._pool.register(collate_fn)

    def __len__(self):
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else (n + self.batch_size - 1) // self.batch_size

    def _items(self, order, b):
        idx = order[b * self.batch_size:(b + 1) * self.batch_size]
        data = self.dataset
        if isinstance(data, torch.Tensor) and data.dim() == 1:
            return data[idx].tolist()
        if isinstance(data, np.ndarray) and data.ndim == 1:
            return data[idx.numpy()].tolist()
        return [_scalar(data[i]) for i in idx.tolist()]

    def __iter__(self):
        n = len(self.dataset)
        order = torch.randperm(n) if self.shuffle else torch.arange(n)
        epoch = self._epoch
        self._epoch += 1
        if self._pool is None:
            return (self.collate_fn(self._items(order, b)) for b in range(len(self)))
        return self._from_workers(order, epoch)

    def _from_workers(self, order, epoch):
        pool, total, lid = self._pool, len(self), self._loader_id
        sent = 0
        try:
            for b in range(total):
                while sent < total and sent < b + self.queue_size:
                    key = (lid, epoch, sent)
                    pool.submit(key, self._items(order, sent), _sampler_pool.key_description(key))
                    sent += 1
                yield pool.get((lid, epoch, b), self.batch_timeout_s)
        except KeyboardInterrupt:
            dist_context._interrupted()
            pool.interrupt()
            raise
        finally:
            pool.abandon(lid, epoch)

    def __del__(self):
        pool = getattr(self, "_pool", None)
        if pool is not None:
            try:
                pool.unregister(self._loader_id)
            except Exception:  # noqa: BLE001 - at interpreter exit the pool may be half gone
                pass


# ---------------------------------------------------------------- loaders over a NeighborSampler

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
            dist_context._interrupted()
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
        self._ids = as_ids(ids, None, count, check_range=False)  # the servers name an id out of range
        self._epoch = 0
        self.timings = {"sample_s": 0.0, "fetch_s": 0.0, "wait_s": 0.0}

    def _seeded(self, make):
        """The C++ loader of `make(seed)`, the seed drawn from torch's
        generator; kept so that a checkpoint can make it again with the seed
        of the run it resumes."""
        self._make = make
        self._seed = int(torch.randint(0, 2**62, (1,)).item())
        self._loader = make(self._seed)

    @property
    def seed(self):
        """dgld addition: the seed of every epoch's order and every batch's
        sampling (an epoch's batches depend on it, the epoch and the batch)."""
        return self._seed

    def _reseed(self, seed):
        if int(seed) != self._seed:
            self._seed = int(seed)
            self._loader = self._make(self._seed)

    def __len__(self):
        return self._loader.num_batches()

    def __iter__(self):
        return self._iter_from(self._epoch, 0)

    def _iter_from(self, epoch, first_batch):
        """Epoch `epoch` from its batch first_batch on (a resumed run)."""
        forget_batch_rows()  # another loader's last batch returns to its buffers, freed by start_epoch
        self._loader.start_epoch(int(epoch), int(first_batch))
        self._epoch = int(epoch) + 1
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
    prefetch (batches made ahead, default 3, as trainer-host), samplers
    ("host:port" of sampler-workers already running), feature_cache_mb
    (other machines' feature rows kept in this process, the most referenced
    halo nodes first, as trainer-host's --feature-cache-mb; default 256;
    one cache shared by the process's loaders over the same features)."""

    def __init__(self, g, nids, graph_sampler, device=None, batch_size=1, shuffle=False, drop_last=False,
                 num_threads=2, prefetch=3, samplers=None, batch_timeout_s=60.0, feature_cache_mb=256, **kwargs):
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
        self._seeded(lambda seed: _C.DataLoader(
            g._client, self._ids, spec, int(batch_size), bool(shuffle),
            bool(drop_last), seed, int(prefetch), self._feature, label_spec, int(num_threads),
            list(samplers or []), float(batch_timeout_s), int(feature_cache_mb)))

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
        self._typed = not g.is_homogeneous()
        self._sampler = graph_sampler
        node_sampler = graph_sampler.sampler
        spec = node_sampler.spec
        if self._typed:
            self._set_ids(g, typed_edge_seeds(g, eids), device, "edge", g.num_edges())
            spec = _C.SamplingSpec(spec.fanouts, etype_fanouts=etype_fanouts(g, node_sampler.layer_fanouts),
                                   replace=spec.replace, prob=spec.prob)
            self._feature, _ = _typed_tensors(g, node_sampler, [])
        else:
            self._set_ids(g, eids, device, "edge", g.num_edges())
            self._feature = _default_tensor(g, node_sampler.prefetch_node_feats, torch.float32, 2)
        neg = graph_sampler.negative_sampler
        self._seeded(lambda seed: _C.EdgeDataLoader(
            g._client, self._ids, spec, int(batch_size), bool(shuffle), seed,
            int(prefetch), self._feature, int(num_threads), neg.k if neg else 0, neg.kind if neg else "uniform",
            graph_sampler.exclude is not None, bool(exclude_positives), int(feature_cache_mb),
            bool(graph_sampler.exclude_reverse)))

    def _typed_batches(self):
        g, name, k = self._g, self._feature, self._sampler.negative_sampler
        for b in _raw_batches(self._loader):
            _, seeds, natives, features, timings, pos_u, pos_v, neg_u, neg_v, pos_eid = b
            self._add_timings(timings)
            in_ids, _, blocks = typed_batch(g, natives, features, None, name, "")
            for t, _, rows in features or []:
                g.nodes[g.ntypes[t]].data[name]._remember(in_ids[g.ntypes[t]], rows)
            pos_types = g.to_type_wise_eids(pos_eid)[0]
            pair = typed_pair_graph(g, seeds, pos_u, pos_v, pos_types)
            if k is None:
                yield in_ids, pair, blocks
            else:
                neg = typed_pair_graph(g, seeds, neg_u, neg_v, pos_types.repeat_interleave(k.k))
                yield in_ids, pair, neg, blocks

    def _batches(self):
        if self._typed:
            yield from self._typed_batches()
            return
        feat = self._g.ndata[self._feature] if self._feature else None
        for b in _raw_batches(self._loader):
            input_nodes, seeds, blocks, features, timings, pos_u, pos_v, neg_u, neg_v, _ = b
            self._add_timings(timings)
            if feat is not None and features is not None:
                feat._remember(input_nodes, features)
            pair = pair_graph(pos_u, pos_v, seeds)
            blocks = [block_from_native(b) for b in blocks]
            if self._sampler.negative_sampler is None:
                yield input_nodes, pair, blocks
            else:
                yield input_nodes, pair, pair_graph(neg_u, neg_v, seeds), blocks
