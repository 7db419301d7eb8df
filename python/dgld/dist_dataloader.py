"""DGL's generic DistDataLoader(dataset, batch_size, shuffle, collate_fn,
drop_last, queue_size): batches of dataset items passed through collate_fn
(the form DGL's distributed guide uses: collate_fn=sampler.sample_blocks).

With initialize(num_workers=N), N > 0 (dgl-launch --num-samplers N), the
collate_fn runs in the trainer's N sampler processes (_sampler_pool.py),
queue_size batches ahead (default 4 N), and the batches come back in order;
with 0 it runs in this process when the batch is asked for. Each iter() is
an epoch: the items are shuffled (torch's generator) when shuffle is set.
As in DGL, collate_fn gets a list of items, tensor and numpy scalars turned
into Python numbers."""

import numpy as np
import torch

from . import _client
from . import _sampler_pool
from ._errors import InvalidArgument

__all__ = ["DistDataLoader"]


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
        self.num_workers = _client.num_sampler_workers() if collate_fn is not None else 0
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
            _client._interrupted()
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
