"""DistEmbedding (DGL's dgl.distributed.DistEmbedding, in DGL's
dgl/distributed/nn/pytorch/sparse_emb.py): a learnable per-node embedding
whose rows live in a DistTensor on the servers.

emb(ids) pulls the rows as a tensor that records its gradient (when
autograd is recording); the sparse optimisers (dgld.distributed.optim)
update the rows of the lookups made since their last step."""

import itertools

import torch

from ....base import as_ids
from ...dist_context import _client
from ...dist_tensor import DistTensor

__all__ = ["DistEmbedding"]

_names = itertools.count()


def _zeros(shape, dtype):
    return torch.zeros(shape, dtype=dtype)


class DistEmbedding:
    def __init__(self, num_embeddings, embedding_dim, name=None, init_func=None, part_policy=None):
        self._client = _client()
        if name is None:
            name = f"dist-embedding-{next(_names)}"
        self._name = name
        self.num_embeddings = int(num_embeddings)
        self.embedding_dim = int(embedding_dim)
        self.weight = DistTensor((self.num_embeddings, self.embedding_dim), torch.float32, name,
                                 init_func=init_func or _zeros, part_policy=part_policy, persistent=True)
        self._trace = []
        self._optimizer = None

    @property
    def name(self):
        return self._name

    def __call__(self, idx, device=torch.device("cpu")):
        ids = as_ids(idx, None, self.num_embeddings, check_range=False)  # the servers name an id out of range
        rows = self.weight[ids]
        if torch.is_grad_enabled():
            rows.requires_grad_(True)
            self._trace.append((ids, rows))
        return rows.to(device)

    def reset_trace(self):
        self._trace = []
