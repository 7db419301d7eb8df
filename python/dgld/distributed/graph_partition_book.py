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

__all__ = ["GraphPartitionBook", "RangePartitionBook", "PartitionPolicy", "NodePartitionPolicy",
           "EdgePartitionPolicy", "HeteroDataName", "parse_hetero_data_name", "DEFAULT_NTYPE", "DEFAULT_ETYPE"]

# DGL's names of a homogeneous graph's one node type and one edge type.
DEFAULT_NTYPE = "_N"
DEFAULT_ETYPE = ("_N", "_E", "_N")
CANONICAL_ETYPE_DELIMITER = ":"
NODE_PART_POLICY, EDGE_PART_POLICY, POLICY_DELIMITER = "node", "edge", "~"
# DGL's names of "every node" and "every edge": homogeneous ids.
_ALL_NODES = (None, DEFAULT_NTYPE)
_ALL_EDGES = (None, "_E", DEFAULT_ETYPE, "_N:_E:_N")


class EtypeError(InvalidArgument, AssertionError):
    """An edge type that is not canonical where DGL requires a canonical one
    (DGL asserts it: scripts and DGL's tests catch AssertionError)."""


def _etype_tuple_to_str(c_etype):
    """("user", "like", "item") -> "user:like:item"."""
    if not (isinstance(c_etype, tuple) and len(c_etype) == 3):
        raise EtypeError(f"a canonical edge type is (src type, relation, dst type), got {c_etype!r}")
    return CANONICAL_ETYPE_DELIMITER.join(c_etype)


def _etype_str_to_tuple(c_etype):
    """"user:like:item" -> ("user", "like", "item")."""
    parts = tuple(str(c_etype).split(CANONICAL_ETYPE_DELIMITER))
    if len(parts) != 3:
        raise EtypeError(f"a canonical edge type is 'src:relation:dst', got {c_etype!r}")
    return parts


def _canonical_etype(etype):
    """Every edge (None, "_E") as DEFAULT_ETYPE; a triple or "src:rel:dst" as
    a triple; a bare relation name is an EtypeError (DGL's assertion)."""
    if etype in _ALL_EDGES:
        return DEFAULT_ETYPE
    return etype if isinstance(etype, tuple) and len(etype) == 3 else _etype_str_to_tuple(etype)


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
        part_id sees it (no job needed): a RangePartitionBook, as DGL's."""
        book = RangePartitionBook.__new__(RangePartitionBook)
        GraphPartitionBook.__init__(book, _C.PartitionBook(str(part_config), int(part_id)))
        return book

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

    def _local_offsets(self, ranges):
        """DGL's local_ntype_offset / local_etype_offset: where each type's
        ids start among this partition's, by type id, and their end."""
        out = [0]
        for per_part in ranges:
            start, end = per_part[self.partid]
            out.append(out[-1] + end - start)
        return out

    @property
    def local_ntype_offset(self):
        return self._local_offsets([self.node_ranges(t) for t in self.ntypes] if not self.is_homogeneous()
                                   else [self.node_ranges()])

    @property
    def local_etype_offset(self):
        return self._local_offsets([self.edge_ranges(c) for c in self.canonical_etypes] if not self.is_homogeneous()
                                   else [self.edge_ranges()])

    def __repr__(self):
        return (f"{type(self).__name__}(graph={self.graph_name!r}, partid={self.partid}, "
                f"num_partitions={self.num_partitions()})")


def _type_table(types, what, canonical):
    """DGL's {type: id} as names by id (ids 0..n-1, each once)."""
    names = [None] * len(types)
    for t, i in types.items():
        if canonical:
            t = _etype_tuple_to_str(t)  # DGL asserts canonical edge types here
        if not isinstance(i, int) or not 0 <= i < len(types) or names[i] is not None:
            raise InvalidArgument(f"RangePartitionBook: {what} must map the types to the ids 0..{len(types) - 1}, "
                                  f"each once; got {types!r}")
        names[i] = t
    return names


def _range_lists(id_map, names, what, canonical):
    """DGL's {type: [[start, end] per partition]} as lists by type id."""
    lists = [None] * len(names)
    for key, ranges in id_map.items():
        name = _etype_tuple_to_str(key) if canonical else key
        if name not in names:
            raise EtypeError(f"RangePartitionBook: {what} has an entry for {key!r}, which is not one of its types "
                             f"{names}")
        rows = ranges.tolist() if hasattr(ranges, "tolist") else [list(r) for r in ranges]
        lists[names.index(name)] = [(int(a), int(b)) for a, b in rows]
    missing = [n for n, r in zip(names, lists) if r is None]
    if missing:
        raise InvalidArgument(f"RangePartitionBook: {what} has no ranges for {missing}")
    return lists


class RangePartitionBook(GraphPartitionBook):
    """DGL's RangePartitionBook: every partition owns one contiguous range
    of ids of each type. Made as DGL's is, from each type's ranges (node_map
    {ntype: [[start, end] per partition]}, edge_map {canonical etype: ...},
    ntypes {ntype: id}, etypes {canonical etype: id}), or loaded from a
    partition config (load_partition_book)."""

    def __init__(self, part_id, num_parts, node_map, edge_map, ntypes, etypes):
        if int(part_id) < 0 or int(num_parts) < 1 or int(part_id) >= int(num_parts):
            raise InvalidArgument(f"RangePartitionBook: part_id {part_id} is not a partition of {num_parts}")
        nnames = _type_table(ntypes, "ntypes", False)
        enames = _type_table(etypes, "etypes", True)
        book = _C.PartitionBook.from_ranges(
            int(part_id), int(num_parts), nnames, enames, _range_lists(node_map, nnames, "node_map", False),
            _range_lists(edge_map, enames, "edge_map", True))
        super().__init__(book)


class PartitionPolicy:
    """How a DistTensor's rows are partitioned (DGL's PartitionPolicy):
    policy_str "node~<ntype>" (rows like the nodes, or like one node type's
    nodes) or "edge~<src:rel:dst>" (rows like the edges, or one edge type's);
    "node" and "edge" alone mean every node and every edge. type_name is the
    node type, or the canonical edge type as a triple, as in DGL. (dgld's
    earlier "node:<ntype>" form is read as well.)"""

    def __init__(self, policy_str, partition_book=None):
        text = str(policy_str)
        kind, sep, type_name = text.partition(POLICY_DELIMITER)
        if not sep:
            kind, _, type_name = text.partition(":")
        if kind not in (NODE_PART_POLICY, EDGE_PART_POLICY):
            raise InvalidArgument(f"a partition policy is 'node~<ntype>' or 'edge~<src:rel:dst>', got {policy_str!r}")
        self._is_node = kind == NODE_PART_POLICY
        self._type_name = (type_name or DEFAULT_NTYPE) if self._is_node else _canonical_etype(type_name or None)
        self._partition_book = partition_book

    @property
    def policy_str(self):
        t = self._type_name if self._is_node else _etype_tuple_to_str(self._type_name)
        return f"{NODE_PART_POLICY if self._is_node else EDGE_PART_POLICY}{POLICY_DELIMITER}{t}"

    @property
    def type_name(self):
        return self._type_name

    @property
    def is_node(self):
        return self._is_node

    @property
    def partition_book(self):
        return self._partition_book

    @property
    def part_id(self):
        return self._partition_book.partid

    def get_data_name(self, name):
        return HeteroDataName(self._is_node, self._type_name, name)

    def get_size(self):
        """The rows of all partitions (the type's count for a typed policy)."""
        b = self._partition_book
        return b._num_nodes(self._type_name) if self._is_node else b._num_edges(self._type_name)

    def get_part_size(self):
        """The rows this process's partition owns."""
        b = self._partition_book
        ids = b.partid2nids(b.partid, self._type_name) if self._is_node else b.partid2eids(b.partid, self._type_name)
        return int(ids.numel())

    def to_partid(self, ids):
        b = self._partition_book
        return b.nid2partid(ids, self._type_name) if self._is_node else b.eid2partid(ids, self._type_name)

    def to_local(self, ids):
        b = self._partition_book
        if self._is_node:
            return b.nid2localnid(ids, b.partid, self._type_name)
        return b.eid2localeid(ids, b.partid, self._type_name)

    def __repr__(self):
        return f"{type(self).__name__}({self.policy_str!r})"


class NodePartitionPolicy(PartitionPolicy):
    """Rows partitioned like the nodes (DGL's NodePartitionPolicy); with a
    node type of a heterogeneous graph, one row per node of that type."""

    def __init__(self, partition_book=None, ntype=DEFAULT_NTYPE):
        super().__init__(f"{NODE_PART_POLICY}{POLICY_DELIMITER}{ntype}", partition_book)


class EdgePartitionPolicy(PartitionPolicy):
    """Rows partitioned like the edges (DGL's EdgePartitionPolicy); with a
    canonical edge type of a heterogeneous graph (a triple or "src:rel:dst"),
    one row per edge of that type. A bare relation name is an EtypeError, as
    DGL asserts (DistGraph.get_edge_partition_policy resolves one first)."""

    def __init__(self, partition_book=None, etype=DEFAULT_ETYPE):
        super().__init__(f"{EDGE_PART_POLICY}{POLICY_DELIMITER}{_etype_tuple_to_str(_canonical_etype(etype))}",
                         partition_book)


class HeteroDataName:
    """The full name of one node or edge data (DGL's HeteroDataName):
    whether it is node data, its node type or canonical edge type, and its
    name; str() is "node~<ntype>~<name>" / "edge~<src:rel:dst>~<name>"."""

    def __init__(self, is_node, entity_type, data_name):
        if not is_node and not (isinstance(entity_type, tuple) and len(entity_type) == 3):
            raise EtypeError(f"edge data need a canonical edge type (src, relation, dst), got {entity_type!r}")
        self._is_node = bool(is_node)
        self._entity_type = entity_type
        self.data_name = data_name

    @property
    def policy_str(self):
        t = self._entity_type if self._is_node else _etype_tuple_to_str(self._entity_type)
        return f"{NODE_PART_POLICY if self._is_node else EDGE_PART_POLICY}{POLICY_DELIMITER}{t}"

    def is_node(self):
        return self._is_node

    def is_edge(self):
        return not self._is_node

    def get_type(self):
        return self._entity_type

    def get_name(self):
        return self.data_name

    def __str__(self):
        return f"{self.policy_str}{POLICY_DELIMITER}{self.data_name}"


def parse_hetero_data_name(name):
    """HeteroDataName.__str__'s inverse."""
    parts = str(name).split(POLICY_DELIMITER)
    if len(parts) != 3 or parts[0] not in (NODE_PART_POLICY, EDGE_PART_POLICY):
        raise InvalidArgument(f"{name!r} is not a data name 'node~<ntype>~<name>' or 'edge~<src:rel:dst>~<name>'")
    is_node = parts[0] == NODE_PART_POLICY
    return HeteroDataName(is_node, parts[1] if is_node else _etype_str_to_tuple(parts[1]), parts[2])
