"""GraphPartitionBook: which partition owns which node and edge ids (DGL's
RangePartitionBook). DistGraph's book comes from the job (from_client);
load_partition's from the partition config, without a job."""

import torch

from ._errors import InvalidArgument
from .dist_tensor import _as_ids

__all__ = ["GraphPartitionBook"]


class GraphPartitionBook:
    """Which machine owns which ids (DGL's RangePartitionBook): every
    partition owns one contiguous range of node ids and one of edge ids."""

    def __init__(self, node_ranges, edge_ranges, partid, machines=()):
        """node_ranges / edge_ranges: each partition's [start, end) of node /
        edge ids (the config's node_map and edge_map); partid: this
        process's partition; machines: (host, base port) of each."""
        self._node_ranges = [tuple(r) for r in node_ranges]
        self._edge_ranges = [tuple(r) for r in edge_ranges]
        self._node_ends = torch.tensor([e for _, e in self._node_ranges], dtype=torch.int64)
        self._edge_ends = torch.tensor([e for _, e in self._edge_ranges], dtype=torch.int64)
        self._partid = partid
        self._machines = list(machines)

    @classmethod
    def from_client(cls, client):
        """The book of the job a client (dgld._C.Client) has joined."""
        return cls(client.node_ranges(), client.edge_ranges(), client.machine_id, client.machines())

    @property
    def partid(self):
        return self._partid

    def num_partitions(self):
        return len(self._node_ranges)

    def metadata(self):
        return [{"machine_id": i, "num_nodes": ne - ns, "num_edges": ee - es}
                for i, ((ns, ne), (es, ee)) in enumerate(zip(self._node_ranges, self._edge_ranges))]

    def _owner(self, ids, ends, kind):
        ids = _as_ids(ids, int(ends[-1]) if len(ends) else 0)
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= int(ends[-1])):
            bad = ids[(ids < 0) | (ids >= ends[-1])][0]
            raise InvalidArgument(f"{kind} id {int(bad)} is out of range [0, {int(ends[-1])})")
        return torch.searchsorted(ends, ids, right=True)

    def nid2partid(self, nids, ntype="_N"):
        return self._owner(nids, self._node_ends, "node")

    def eid2partid(self, eids, etype="_E"):
        return self._owner(eids, self._edge_ends, "edge")

    def partid2nids(self, partid, ntype="_N"):
        start, end = self._node_ranges[partid]
        return torch.arange(start, end, dtype=torch.int64)

    def partid2eids(self, partid, etype="_E"):
        start, end = self._edge_ranges[partid]
        return torch.arange(start, end, dtype=torch.int64)

    def nid2localnid(self, nids, partid, ntype="_N"):
        nids = _as_ids(nids, int(self._node_ends[-1]))
        start, end = self._node_ranges[partid]
        if nids.numel() and (int(nids.min()) < start or int(nids.max()) >= end):
            raise InvalidArgument(f"node ids outside partition {partid}'s range [{start}, {end})")
        return nids - start

    def eid2localeid(self, eids, partid, etype="_E"):
        eids = _as_ids(eids, int(self._edge_ends[-1]))
        start, end = self._edge_ranges[partid]
        if eids.numel() and (int(eids.min()) < start or int(eids.max()) >= end):
            raise InvalidArgument(f"edge ids outside partition {partid}'s range [{start}, {end})")
        return eids - start

    @property
    def ntypes(self):
        return ["_N"]

    @property
    def etypes(self):
        return ["_E"]
