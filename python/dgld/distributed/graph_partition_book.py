"""GraphPartitionBook (DGL's dgl.distributed.GraphPartitionBook, a
RangePartitionBook): which partition owns which node and edge ids, and the
mapping between per-type and homogeneous ids of a heterogeneous graph; and
the partition policies (DGL's PartitionPolicy, NodePartitionPolicy,
EdgePartitionPolicy) that say how a DistTensor's rows are partitioned.

The book is a thin wrapper of dgld._C.PartitionBook, the C++ one
(common/partition/partition_book.h) with its type names: every mapping runs
there, vectorised, with the same rules the servers and loaders use.
DistGraph's book comes from the job (dist_context.partition_book());
load_partition_book's from the partition config alone.
"""

from .. import _C
from .._errors import InvalidArgument
from ..base import as_ids

__all__ = ["GraphPartitionBook", "PartitionPolicy", "NodePartitionPolicy", "EdgePartitionPolicy"]

# DGL's names of "every node" and "every edge": homogeneous ids.
_ALL_NODES = (None, "_N")
_ALL_EDGES = (None, "_E", ("_N", "_E", "_N"), "_N:_E:_N")


class GraphPartitionBook:
    """Which partition owns which ids (see the module doc). Every partition
    owns one contiguous range of node ids and one of edge ids; on a
    heterogeneous graph each type's ids of a partition are one range of
    those, and per-type ids run over the partitions in order. ntype / etype
    arguments default to every node (edge): homogeneous ids; a type name
    (an edge type as a canonical triple, "src:rel:dst" or a unique relation
    name) means that type's per-type ids, as in DGL."""

    def __init__(self, book):
        """book: a dgld._C.PartitionBook."""
        self._book = book

    @classmethod
    def load(cls, part_config, part_id):
        """The book of the partitioned graph at part_config, as partition
        part_id sees it (no job needed)."""
        return cls(_C.PartitionBook(str(part_config), int(part_id)))

    # ------------------------------------------------------------ types

    def _ntype(self, ntype):
        return -1 if ntype in _ALL_NODES else self._book.ntype_id(ntype)

    def _etype(self, etype):
        return -1 if etype in _ALL_EDGES else self._book.etype_id(etype)

    def ntype_id(self, ntype):
        """A node type's id (its index in ntypes); an error naming the known
        types for an unknown one."""
        return self._book.ntype_id(ntype)

    def etype_id(self, etype):
        """An edge type's id (its index in canonical_etypes), by canonical
        triple, "src:rel:dst" or unique relation name; an error for an
        unknown or ambiguous name."""
        return self._book.etype_id(etype)

    def to_canonical_etype(self, etype):
        return self.canonical_etypes[self.etype_id(etype)]

    @property
    def ntypes(self):
        return list(self._book.ntypes)

    @property
    def canonical_etypes(self):
        return [tuple(c.split(":")) for c in self._book.canonical_etypes]

    @property
    def etypes(self):
        return [c[1] for c in self.canonical_etypes]

    def is_homogeneous(self):
        return self._book.is_homogeneous

    def _num_nodes(self, ntype=None):
        t = self._ntype(ntype)
        return self._book.num_nodes if t < 0 else self._book.ntype_counts[t]

    def _num_edges(self, etype=None):
        t = self._etype(etype)
        return self._book.num_edges if t < 0 else self._book.etype_counts[t]

    # ------------------------------------------------------------ partitions

    @property
    def partid(self):
        """This process's partition (its machine's)."""
        return self._book.partid

    @property
    def graph_name(self):
        return self._book.graph_name

    def num_partitions(self):
        return self._book.num_partitions

    def metadata(self):
        return [{"machine_id": p, "num_nodes": ne - ns, "num_edges": ee - es}
                for p, ((ns, ne), (es, ee)) in enumerate(zip(self._book.node_ranges(), self._book.edge_ranges()))]

    def node_ranges(self, ntype=None):
        """Each partition's [start, end) of homogeneous node ids (of ntype's
        nodes when given)."""
        return self._book.node_ranges(self._ntype(ntype))

    def edge_ranges(self, etype=None):
        return self._book.edge_ranges(self._etype(etype))

    # ------------------------------------------------------------ ids

    def nid2partid(self, nids, ntype="_N"):
        """The owner of each node (per-type ids of ntype when it names a type)."""
        return self._book.nid2partid(self.map_to_homo_nid(nids, ntype))

    def eid2partid(self, eids, etype="_E"):
        return self._book.eid2partid(self.map_to_homo_eid(eids, etype))

    def partid2nids(self, partid, ntype="_N"):
        """The node ids partition partid owns; with a node type of a
        heterogeneous graph, that type's (per-type) ids."""
        return self._book.partid2nids(int(partid), self._ntype(ntype))

    def partid2eids(self, partid, etype="_E"):
        return self._book.partid2eids(int(partid), self._etype(etype))

    def nid2localnid(self, nids, partid, ntype="_N"):
        """Ids -> ids local to partition partid (per-type ones for a type)."""
        ids = as_ids(nids, "nid2localnid", self._num_nodes(ntype), check_range=False)
        return self._book.nid2localnid(ids, int(partid), self._ntype(ntype))

    def eid2localeid(self, eids, partid, etype="_E"):
        ids = as_ids(eids, "eid2localeid", self._num_edges(etype), check_range=False)
        return self._book.eid2localeid(ids, int(partid), self._etype(etype))

    def map_to_homo_nid(self, ids, ntype):
        """Per-type ids of ntype -> homogeneous node ids."""
        t = self._ntype(ntype)
        ids = as_ids(ids, "map_to_homo_nid", self._num_nodes(ntype), check_range=False)
        return ids if t < 0 else self._book.map_to_homo_nid(ids, t)

    def map_to_homo_eid(self, ids, etype):
        """Per-type ids of edge type etype -> homogeneous edge ids."""
        t = self._etype(etype)
        ids = as_ids(ids, "map_to_homo_eid", self._num_edges(etype), check_range=False)
        return ids if t < 0 else self._book.map_to_homo_eid(ids, t)

    def map_to_per_ntype(self, ids):
        """Homogeneous node ids -> (node type ids, per-type ids)."""
        ids = as_ids(ids, "map_to_per_ntype", self._book.num_nodes, check_range=False)
        return self._book.map_to_per_ntype(ids)

    def map_to_per_etype(self, ids):
        """Homogeneous edge ids -> (edge type ids, per-type ids)."""
        ids = as_ids(ids, "map_to_per_etype", self._book.num_edges, check_range=False)
        return self._book.map_to_per_etype(ids)

    def __repr__(self):
        return (f"GraphPartitionBook(graph={self.graph_name!r}, partid={self.partid}, "
                f"num_partitions={self.num_partitions()})")


class PartitionPolicy:
    """How a DistTensor's rows are partitioned (DGL's PartitionPolicy):
    policy_str "node:<ntype>" (rows like the nodes, or like one node type's
    nodes) or "edge:<etype>" (edges: "_E" or a canonical "src:rel:dst")."""

    def __init__(self, policy_str, partition_book=None):
        kind, _, type_name = str(policy_str).partition(":")
        if kind not in ("node", "edge"):
            raise InvalidArgument(f"a partition policy is 'node:<ntype>' or 'edge:<etype>', got {policy_str!r}")
        self.is_node = kind == "node"
        self.type_name = type_name or ("_N" if self.is_node else "_E")
        self.partition_book = partition_book

    @property
    def policy_str(self):
        return f"{'node' if self.is_node else 'edge'}:{self.type_name}"

    def _book(self):
        return self.partition_book

    def get_size(self):
        """The rows of all partitions (the type's count for a typed policy)."""
        b = self._book()
        return b._num_nodes(self.type_name) if self.is_node else b._num_edges(self.type_name)

    def get_part_size(self):
        """The rows this process's partition owns."""
        b = self._book()
        ids = b.partid2nids(b.partid, self.type_name) if self.is_node else b.partid2eids(b.partid, self.type_name)
        return int(ids.numel())

    def to_partid(self, ids):
        b = self._book()
        return b.nid2partid(ids, self.type_name) if self.is_node else b.eid2partid(ids, self.type_name)

    def to_local(self, ids):
        b = self._book()
        if self.is_node:
            return b.nid2localnid(ids, b.partid, self.type_name)
        return b.eid2localeid(ids, b.partid, self.type_name)

    def __repr__(self):
        return f"{type(self).__name__}({self.policy_str!r})"


class NodePartitionPolicy(PartitionPolicy):
    """Rows partitioned like the nodes (DGL's NodePartitionPolicy); with a
    node type of a heterogeneous graph, one row per node of that type."""

    def __init__(self, partition_book=None, ntype="_N"):
        super().__init__(f"node:{ntype}", partition_book)


class EdgePartitionPolicy(PartitionPolicy):
    """Rows partitioned like the edges (DGL's EdgePartitionPolicy); with an
    edge type of a heterogeneous graph (canonical triple, "src:rel:dst" or a
    unique relation name), one row per edge of that type."""

    def __init__(self, partition_book=None, etype="_E"):
        super().__init__("edge:" + (":".join(etype) if isinstance(etype, tuple) else etype), partition_book)
