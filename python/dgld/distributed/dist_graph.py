"""DistGraph (DGL's dgl.distributed.DistGraph): the partitioned graph of the
job, its sizes and types, node and edge data as DistTensors, degrees and
edges, the partition book and barriers; node_split / edge_split pick this
trainer's ids with DGL's rules. Every call that waits runs in C++ without
the GIL and has a deadline; an error is a dgld.DGLError carrying the
library's message."""

import collections
import itertools
import os
import types
from collections.abc import MutableMapping

import numpy as np
import torch

from .. import _C
from .._errors import InvalidArgument, NotFound
from ..base import ALL, EID, as_ids, is_all
from ..convert import graph, heterograph
from ..transforms import compact_graphs
from . import role
from .dist_context import _DEFAULT_TIMEOUT_S, _connect, _state, part_config_from_servers, trainer_rank
from .dist_context import partition_book as _job_book  # node_split's argument is DGL's partition_book
from .dist_tensor import DistTensor
from .graph_partition_book import EdgePartitionPolicy, NodePartitionPolicy
from .partition import RESERVED_FIELD_DTYPE  # noqa: F401  (DGL's tests read it as dist_graph's)

__all__ = ["DistGraph", "node_split", "edge_split"]

# DGL's frame.Scheme: one row's shape and the dtype, as node_attr_schemes gives them.
Scheme = collections.namedtuple("Scheme", ["shape", "dtype"])


# ---------------------------------------------------------------- DistGraph

class _TypeViews:
    """g.nodes / g.edges: g.nodes[ntype].data is that node type's data,
    g.edges[etype].data that edge type's (by name or canonical triple)."""

    def __init__(self, graph, edges):
        self._g = graph
        self._edges = edges
        self._views = {}  # one per type: its DistTensors stay open (and keep rows a loader fetched)

    def __getitem__(self, key):
        if self._edges:
            name = ":".join(self._g.canonical_etypes[self._g._etype_id(key)])  # an unknown type is an error here
        else:
            self._g._ntype_id(key)
            name = key
        if name not in self._views:
            view = types.SimpleNamespace()
            view.data = _DataView(self._g, edges=self._edges, prefix=name + "/")
            self._views[name] = view
        return self._views[name]

    def __call__(self, ntype=None):
        if self._edges:
            raise InvalidArgument("DistGraph.edges() is not supported (DGL's DistGraph has no edge list either); "
                                  "use g.edges[etype].data or g.find_edges(ids, etype)")
        return torch.arange(self._g.num_nodes(ntype), dtype=torch.int64)


class _DataView(MutableMapping):
    """g.ndata / g.edata: the graph's tensors by name, as DistTensors."""

    def __init__(self, graph, edges, prefix=None):
        self._g = graph
        self._edges = edges
        self._prefix = prefix or (graph._client.etype if edges else graph._client.ntype) + "/"
        self._opened = {}
        self._assigned = {}
        self._alias_of = {}

    def _names(self):
        names = {n[len(self._prefix):] for n in self._g._client.tensors() if n.startswith(self._prefix)}
        return sorted(names | set(self._assigned))

    # DGL's partition_graph names a node type's features 'feat' and its labels
    # 'label'; dgl-partition writes 'features' and 'labels' (as partition_graph
    # here renames them). A script asking for DGL's name gets the same tensor.
    _ALIASES = {"feat": "features", "label": "labels"}

    def _resolve(self, key):
        alias = self._ALIASES.get(key)
        if alias is None or key in self._assigned or key in self._opened:
            return key
        if key not in self._alias_of:  # asked once: the servers' list of tensors
            self._alias_of[key] = key if self._prefix + key in self._g._client.tensors() else alias
        return self._alias_of[key]

    def __contains__(self, key):
        key = self._resolve(key)
        return key in self._assigned or key in self._opened or self._prefix + key in self._g._client.tensors()

    def __getitem__(self, key):
        key = self._resolve(key)
        if key in self._assigned:
            return self._assigned[key]
        if key not in self._opened:
            try:
                t = _C.DistTensor.open(self._g._client, self._prefix + key)
            except NotFound:
                raise KeyError(f"the graph has no {'edge' if self._edges else 'node'} data {key!r} "
                               f"(it has: {', '.join(self._names()) or 'none'})") from None
            self._opened[key] = DistTensor(None, None, _from=t)
        return self._opened[key]

    def __setitem__(self, key, value):
        if not isinstance(value, DistTensor):
            raise InvalidArgument("g.ndata / g.edata take DistTensors; create one with "
                                  "dgld.distributed.DistTensor(shape, dtype, name)")
        self._assigned[key] = value

    def __delitem__(self, key):
        if key in self._assigned:
            del self._assigned[key]
            return
        raise InvalidArgument(f"{key!r} is the partition's own data and cannot be deleted")

    def __iter__(self):
        return iter(self._names())

    def __len__(self):
        return len(self._names())


class DistGraph:
    """The partitioned graph (DGL's dgl.distributed.DistGraph): sizes, node
    and edge data, degrees and edges, the partition book, barriers."""

    def __init__(self, graph_name, gpb=None, part_config=None):
        if part_config is None and _state["client"] is not None:
            part_config = _state.get("part_config")  # the job's (a config left by an earlier job is not)
        part_config = part_config or os.environ.get("DGL_CONF_PATH")
        if _state["client"] is None and not part_config:
            part_config = part_config_from_servers()
        self._client = _connect(part_config) if _state["client"] is None else _state["client"]
        # DGL's DistGraph is the job's graph whatever it is called (its tests
        # name it other than partition_graph did): the name is the caller's.
        self._name = graph_name
        self._gpb = _job_book()
        self.ndata = _DataView(self, edges=False)
        self.edata = _DataView(self, edges=True)
        self._barriers = itertools.count()

    def _ntype_id(self, ntype):
        return self._gpb.ntype_id(ntype)

    def _etype_id(self, etype):
        return self._gpb.etype_id(etype)

    def get_ntype_id(self, ntype):
        """A node type's id (its index in g.ntypes); None: the only type's."""
        if ntype is None:
            if len(self.ntypes) != 1:
                raise InvalidArgument(f"the graph has several node types ({', '.join(self.ntypes)}): name one")
            return 0
        return self._ntype_id(ntype)

    def get_etype_id(self, etype):
        """An edge type's id (name or canonical triple; its index in
        g.canonical_etypes); None: the only type's."""
        if etype is None or self.is_homogeneous():
            if etype is None and len(self.canonical_etypes) != 1:
                raise InvalidArgument("the graph has several edge types: name one")
            return 0
        return self._etype_id(etype)

    def num_nodes(self, ntype=None):
        return self._gpb._num_nodes(None if self.is_homogeneous() else ntype)

    def num_edges(self, etype=None):
        return self._gpb._num_edges(None if self.is_homogeneous() else etype)

    number_of_nodes = num_nodes
    number_of_edges = num_edges

    @property
    def graph_name(self):
        return self._name

    @property
    def ntypes(self):
        return self._gpb.ntypes

    @property
    def etypes(self):
        return self._gpb.etypes

    @property
    def canonical_etypes(self):
        return self._gpb.canonical_etypes

    def to_canonical_etype(self, etype):
        """The canonical (src type, relation, dst type) of an edge type named
        by relation, "src:rel:dst" or triple (DGL's)."""
        return self.canonical_etypes[self.get_etype_id(etype)]

    @property
    def nodes(self):
        """g.nodes[ntype].data[name]: a node type's data, indexed by that
        type's ids (DGL's per-type node data of a heterogeneous graph)."""
        if getattr(self, "_node_types", None) is None:
            self._node_types = _TypeViews(self, edges=False)
        return self._node_types

    @property
    def edges(self):
        """g.edges[etype].data[name]: an edge type's data, indexed by that
        type's edge ids (DGL's per-type edge data)."""
        if getattr(self, "_edge_types", None) is None:
            self._edge_types = _TypeViews(self, edges=True)
        return self._edge_types

    def to_homogeneous_ids(self, ntype, ids):
        """Per-type ids of `ntype` -> the graph's homogeneous node ids (what
        sampled blocks and g.ndata use)."""
        self._ntype_id(ntype)  # an unknown type is an error, "_N" too on a typed graph
        return self._gpb.map_to_homo_nid(ids, ntype)

    def to_type_wise_ids(self, ids):
        """Homogeneous node ids -> (type ids, per-type ids); ntypes[t] names type t."""
        return self._gpb.map_to_per_ntype(ids)

    def to_homogeneous_eids(self, etype, ids):
        """Per-type edge ids of `etype` -> the graph's homogeneous edge ids."""
        return self._gpb.map_to_homo_eid(ids, self.canonical_etypes[self._etype_id(etype)])

    def to_type_wise_eids(self, ids):
        """Homogeneous edge ids -> (edge type ids, per-type ids);
        canonical_etypes[t] names type t."""
        return self._gpb.map_to_per_etype(ids)

    @property
    def idtype(self):
        return torch.int64

    @property
    def device(self):
        return torch.device("cpu")

    def is_homogeneous(self):
        return self._gpb.is_homogeneous()

    def get_partition_book(self):
        return self._gpb

    def get_node_partition_policy(self, ntype="_N"):
        return NodePartitionPolicy(self._gpb, ntype)

    def get_edge_partition_policy(self, etype="_E"):
        """The policy of etype's edges (by name, "src:rel:dst" or canonical
        triple; every edge by default)."""
        if etype not in (None, "_E", ("_N", "_E", "_N")):
            etype = self._gpb.to_canonical_etype(etype)
        return EdgePartitionPolicy(self._gpb, etype)

    def rank(self):
        """This trainer's rank (in a trainer's sampler process: that trainer's)."""
        return trainer_rank()

    def barrier(self):
        """Waits until every trainer of the job reached its own barrier() call
        of the same number."""
        self._client.barrier(f"dgld.python.{next(self._barriers)}", _DEFAULT_TIMEOUT_S)

    def _ids(self, v, n):
        if is_all(v):
            return torch.arange(n, dtype=torch.int64), False
        scalar = isinstance(v, (int, np.integer))
        return as_ids(v, None, n, check_range=False), scalar  # the servers name an id out of range

    def in_degrees(self, v=ALL):
        ids, scalar = self._ids(v, self.num_nodes())
        d = self._client.degrees(ids, False)
        return int(d[0]) if scalar else d

    def out_degrees(self, u=ALL):
        ids, scalar = self._ids(u, self.num_nodes())
        d = self._client.degrees(ids, True)
        return int(d[0]) if scalar else d

    def find_edges(self, edges, etype=None):
        """(src, dst) of edges. On a heterogeneous graph with etype, as DGL:
        edges are per-type ids of etype and src, dst per-type node ids (of
        etype's source and destination types); with etype None, homogeneous
        edge and node ids."""
        if etype is not None and not self.is_homogeneous():
            src, dst = self._client.find_edges(self.to_homogeneous_eids(etype, edges))
            return self.to_type_wise_ids(src)[1], self.to_type_wise_ids(dst)[1]
        return self._client.find_edges(as_ids(edges, None, self.num_edges(), check_range=False))

    def node_attr_schemes(self):
        """{name: Scheme(shape of one row, dtype)} of every node tensor
        (DGL's DistGraph.node_attr_schemes)."""
        return {k: Scheme(tuple(self.ndata[k].shape[1:]), self.ndata[k].dtype) for k in self.ndata}

    def edge_attr_schemes(self):
        """{name: Scheme(shape of one row, dtype)} of every edge tensor."""
        return {k: Scheme(tuple(self.edata[k].shape[1:]), self.edata[k].dtype) for k in self.edata}

    def edge_subgraph(self, edges, relabel_nodes=True, store_ids=True):
        """The graph of these edges (DGL's DistGraph.edge_subgraph), a local
        dgld graph: edata[dgl.EID] their ids; with relabel_nodes only their
        end nodes, renumbered as compact_graphs does (ndata[dgl.NID] their
        ids in g), else every node of g. A dict {etype: ids} on a typed
        graph gives a heterograph of those types (per-type ids)."""
        if not store_ids:
            raise InvalidArgument("DistGraph.edge_subgraph always stores the edges' ids (store_ids=True), as DGL's")
        if isinstance(edges, dict):
            data, ids = {}, {}
            for etype, e in edges.items():
                c = self.canonical_etypes[self._etype_id(etype)]
                ids[c] = as_ids(e, "edge_subgraph", self.num_edges(c), check_range=False)
                data[c] = self.find_edges(ids[c], c)
            sub = heterograph(data, {t: self.num_nodes(t) for t in self.ntypes})
            for c, e in ids.items():
                sub.edges[c].data[EID] = e
        else:
            if len(self.etypes) != 1:
                raise InvalidArgument("DistGraph.edge_subgraph of a typed graph takes {etype: edge ids}")
            ids = as_ids(edges, "edge_subgraph", self.num_edges(), check_range=False)
            sub = graph(self.find_edges(ids), num_nodes=self.num_nodes())
            sub.edata[EID] = ids
        return compact_graphs(sub) if relabel_nodes else sub

    @property
    def local_partition(self):
        return None

    def __repr__(self):
        return f"DistGraph(name={self._name!r}, num_nodes={self.num_nodes()}, num_edges={self.num_edges()})"

    def __reduce__(self):
        # A handle: the graph's name and partition config, and the tensors
        # assigned to ndata / edata (by name). Unpickled in a trainer's
        # sampler process it opens the graph over that process's own client.
        return _reopen, (self._name, _state.get("part_config"), dict(self.ndata._assigned),
                         dict(self.edata._assigned))


def _reopen(graph_name, part_config, ndata, edata):
    """What a pickled DistGraph becomes."""
    g = DistGraph(graph_name, part_config=part_config)
    g.ndata._assigned.update(ndata)
    g.edata._assigned.update(edata)
    return g


# ---------------------------------------------------------------- splits

def _mask_tensor(mask, length, what):
    if isinstance(mask, DistTensor):
        mask = mask[0:len(mask)]
    elif isinstance(mask, np.ndarray):
        mask = torch.from_numpy(mask)
    else:
        mask = torch.as_tensor(mask)
    if mask.dim() != 1 or mask.numel() != length:
        raise InvalidArgument(f"{what}: the mask must have one value per id ({length}), got shape "
                              f"{tuple(mask.shape)}")
    return mask


def _split_book(mask, partition_book):
    """The partition book a split follows: the one given, a DistTensor
    mask's, or the job's."""
    if partition_book is None and isinstance(mask, DistTensor):
        partition_book = mask.part_policy.partition_book
    if partition_book is None:
        return _job_book()
    if not isinstance(getattr(partition_book, "_book", None), _C.PartitionBook):
        raise InvalidArgument(f"node_split / edge_split: partition_book must be a dgld GraphPartitionBook "
                              f"(load_partition_book, DistGraph.get_partition_book()), got {partition_book!r}")
    return partition_book


def _split(mask, partition_book, type_name, rank, force_even, trainer_ids, num_trainers, edges):
    """node_split (edges=False) or edge_split of `mask` over every node
    (edge), or over type_name's when it names one type of a typed graph
    (then the result is that type's ids, as DGL's per-type split). The
    rules are client/split.h's; the book, rank and trainer count are all
    it needs, so a process that joined no job splits too."""
    book = _split_book(mask, partition_book)
    what = "edge_split" if edges else "node_split"
    whole = "_E" if edges else "_N"
    typed = type_name not in (None, whole, ("_N", "_E", "_N"), "_N:_E:_N") and not book.is_homogeneous()
    count = book._num_edges if edges else book._num_nodes
    if typed:
        per_type = _mask_tensor(mask, count(type_name), f"{what} of {type_name!r}")
        mask = torch.zeros(count(), dtype=torch.bool)
        to_homo = book.map_to_homo_eid if edges else book.map_to_homo_nid
        mask[to_homo(torch.nonzero(per_type).reshape(-1), type_name)] = True
    else:
        mask = _mask_tensor(mask, count(), what)
    tids = None if trainer_ids is None else _mask_tensor(trainer_ids, count(), what)
    rank = role.get_trainer_rank() if rank is None else int(rank)
    num_trainers = role.get_num_trainers() if num_trainers is None else int(num_trainers)
    ids = _C.split_ids(mask, book._book, bool(edges), bool(force_even), rank, num_trainers, tids)
    if typed:
        ids = (book.map_to_per_etype if edges else book.map_to_per_ntype)(ids)[1]
    return ids


def node_split(nodes, partition_book=None, ntype="_N", rank=None, force_even=True, node_trainer_ids=None,
               num_trainers=None):
    """This trainer's nodes among those `nodes` (a boolean mask over all
    nodes: a DistTensor or a tensor) selects, by DGL's rules: with
    force_even the selected ids are cut into near-equal slices per
    partition, and a partition's slice among its trainers; without it a
    trainer takes its share of the selected nodes its partition owns.
    partition_book defaults to the mask's (a DistTensor's) or the job's.
    rank defaults to this trainer's and num_trainers (a dgld addition) to
    the job's, or with no job to dgld.distributed.role's tables (as DGL's);
    the rank says the partition (DGL's layout: partition p's T trainers are
    ranks p*T .. p*T+T-1). On a typed graph, with ntype
    the mask covers that type's nodes and the result is that type's ids."""
    return _split(nodes, partition_book, ntype, rank, force_even, node_trainer_ids, num_trainers, edges=False)


def edge_split(edges, partition_book=None, etype="_E", rank=None, force_even=True, edge_trainer_ids=None,
               num_trainers=None):
    """node_split for edges (etype: one edge type's ids of a typed graph)."""
    return _split(edges, partition_book, etype, rank, force_even, edge_trainer_ids, num_trainers, edges=True)
