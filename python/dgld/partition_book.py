"""GraphPartitionBook: which partition owns which node and edge ids (DGL's
RangePartitionBook). DistGraph's book comes from the job (from_client);
load_partition's from the partition config, without a job."""

import torch

from ._errors import InvalidArgument
from .dist_tensor import _as_ids

__all__ = ["GraphPartitionBook"]


class _TypeSpace:
    """Per-type ids of a heterogeneous graph's nodes or edges: type t's ids
    in partition p are one homogeneous range; per-type ids run over the
    partitions in order."""

    def __init__(self, kind, type_ranges):
        self.kind = kind  # "node" or "edge"
        self.types = {}
        for t, ranges in (type_ranges or {}).items():
            starts = torch.tensor([s for s, _ in ranges], dtype=torch.int64)
            counts = torch.tensor([e - s for s, e in ranges], dtype=torch.int64)
            self.types[t] = (starts, torch.cumsum(counts, 0) - counts, counts)

    def __bool__(self):
        return bool(self.types)

    def get(self, name):
        if name not in self.types:
            raise InvalidArgument(f"{name!r} is not a {self.kind} type of the graph "
                                  f"(known: {', '.join(map(str, self.types))})")
        return self.types[name]

    def to_homo(self, ids, name):
        starts, type_starts, counts = self.get(name)
        total = int(counts.sum())
        ids = _as_ids(ids, total)
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= total):
            raise InvalidArgument(f"{name!r} {self.kind} ids must be in [0, {total})")
        part = torch.searchsorted(type_starts + counts, ids, right=True)
        return starts[part] + (ids - type_starts[part])

    def to_per_type(self, ids):
        types, per_type = torch.full_like(ids, -1), torch.empty_like(ids)
        for i, (starts, type_starts, counts) in enumerate(self.types.values()):
            for p in range(len(starts)):
                m = (ids >= starts[p]) & (ids < starts[p] + counts[p])
                types[m] = i
                per_type[m] = ids[m] - starts[p] + type_starts[p]
        if ids.numel() and bool((types < 0).any()):
            raise InvalidArgument(f"{self.kind} id {int(ids[types < 0][0])} is not an {self.kind} of the graph")
        return types, per_type

    def part_ids(self, partid, name):
        _, type_starts, counts = self.get(name)
        first = int(type_starts[partid])
        return torch.arange(first, first + int(counts[partid]), dtype=torch.int64)


class GraphPartitionBook:
    """Which machine owns which ids (DGL's RangePartitionBook): every
    partition owns one contiguous range of node ids and one of edge ids."""

    def __init__(self, node_ranges, edge_ranges, partid, machines=(), ntype_ranges=None, etype_ranges=None):
        """node_ranges / edge_ranges: each partition's [start, end) of node /
        edge ids (the config's node_map and edge_map); partid: this
        process's partition; machines: (host, base port) of each;
        ntype_ranges (heterogeneous graphs): {ntype: each partition's
        [start, end) of that type's homogeneous ids}, in type id order;
        etype_ranges likewise {canonical etype tuple: ranges}."""
        self._node_ranges = [tuple(r) for r in node_ranges]
        self._edge_ranges = [tuple(r) for r in edge_ranges]
        self._node_ends = torch.tensor([e for _, e in self._node_ranges], dtype=torch.int64)
        self._edge_ends = torch.tensor([e for _, e in self._edge_ranges], dtype=torch.int64)
        self._partid = partid
        self._machines = list(machines)
        self._types = _TypeSpace("node", ntype_ranges)
        self._etypes = _TypeSpace("edge", etype_ranges)

    @classmethod
    def from_client(cls, client):
        """The book of the job a client (dgld._C.Client) has joined."""
        typed = {t: client.ntype_ranges(i) for i, t in enumerate(client.ntypes)}
        etyped = {tuple(t.split(":")): client.etype_ranges(i) for i, t in enumerate(client.canonical_etypes)}
        return cls(client.node_ranges(), client.edge_ranges(), client.machine_id, client.machines(), typed, etyped)

    def _etype_key(self, etype):
        """A canonical edge type tuple from DGL's forms: (src, rel, dst), the
        relation name when it is unique, or "src:rel:dst"."""
        if isinstance(etype, tuple):
            return etype
        if isinstance(etype, str) and etype.count(":") == 2:
            return tuple(etype.split(":"))
        found = [c for c in self._etypes.types if c[1] == etype]
        if len(found) != 1:
            known = ", ".join(":".join(c) for c in self._etypes.types)
            raise InvalidArgument(f"edge type {etype!r} is " + ("ambiguous" if found else "unknown") +
                                  f"; give a canonical (src, rel, dst) (known: {known})")
        return found[0]

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
        """The node ids partition partid owns; with a node type of a
        heterogeneous graph, that type's (per-type) ids."""
        if ntype != "_N" and self._types:
            return self._types.part_ids(partid, ntype)
        start, end = self._node_ranges[partid]
        return torch.arange(start, end, dtype=torch.int64)

    def map_to_homo_nid(self, ids, ntype):
        """Per-type ids of ntype -> homogeneous node ids (DGL's)."""
        if not self._types:
            return _as_ids(ids, int(self._node_ends[-1]))
        return self._types.to_homo(ids, ntype)

    def map_to_per_ntype(self, ids):
        """Homogeneous node ids -> (node type ids, per-type ids) (DGL's)."""
        ids = _as_ids(ids, int(self._node_ends[-1]))
        if not self._types:
            return torch.zeros_like(ids), ids
        return self._types.to_per_type(ids)

    def map_to_homo_eid(self, ids, etype):
        """Per-type ids of edge type etype -> homogeneous edge ids (DGL's)."""
        if not self._etypes:
            return _as_ids(ids, int(self._edge_ends[-1]))
        return self._etypes.to_homo(ids, self._etype_key(etype))

    def map_to_per_etype(self, ids):
        """Homogeneous edge ids -> (edge type ids, per-type ids) (DGL's)."""
        ids = _as_ids(ids, int(self._edge_ends[-1]))
        if not self._etypes:
            return torch.zeros_like(ids), ids
        return self._etypes.to_per_type(ids)

    def partid2eids(self, partid, etype="_E"):
        """The edge ids partition partid owns; with an edge type of a
        heterogeneous graph, that type's (per-type) ids."""
        if etype != "_E" and self._etypes:
            return self._etypes.part_ids(partid, self._etype_key(etype))
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
        return list(self._types.types) or ["_N"]

    @property
    def etypes(self):
        return [c[1] for c in self._etypes.types] or ["_E"]

    @property
    def canonical_etypes(self):
        return list(self._etypes.types) or [("_N", "_E", "_N")]
