"""dgld.distributed: DGL's dgl.distributed over dgld's graph-servers.

initialize() joins the job, DistGraph is the partitioned graph, DistTensor a
tensor whose rows live on the servers, node_split / edge_split pick this
trainer's ids with DGL's rules. Every call that waits (a pull, a barrier, the
next batch) runs in C++ without the GIL and has a deadline; an error is a
dgld.DGLError carrying the library's message.

Processes started by dgl-launch find everything in their environment
(DGL_IP_CONFIG, DGL_CONF_PATH, DGLD_MACHINE_ID, DGLD_TRAINER_RANK, ...); a
script started by hand passes ip_config to initialize() and part_config to
DistGraph(), and sets DGLD_MACHINE_ID when one host plays several machines.
"""

import itertools
import os
import sys
import types
from collections.abc import MutableMapping

import numpy as np
import torch

from . import _C
from . import dist_optim as optim
from ._client import (_DEFAULT_TIMEOUT_S, _client, _connect, _interrupted, _state, exit_client,  # noqa: F401
                      initialize, is_initialized, trainer_rank)
from ._errors import InvalidArgument, NotFound
from .dataloading import DistEdgeDataLoader, DistNodeDataLoader, NeighborSampler
from .dist_dataloader import DistDataLoader
from .graph import EID, DGLGraph
from .dist_tensor import DistTensor, EdgePartitionPolicy, NodePartitionPolicy, _as_ids, _etype_index  # noqa: F401
from .embedding import DistEmbedding, SparseAdagrad, SparseAdam
from .partition import load_partition, load_partition_book, load_partition_feats, partition_graph
from .partition_book import GraphPartitionBook

__all__ = [
    "initialize", "exit_client", "is_initialized", "DistGraph", "DistTensor", "GraphPartitionBook",
    "node_split", "edge_split", "sample_neighbors", "DistEmbedding", "SparseAdagrad", "SparseAdam",
    "NodePartitionPolicy", "EdgePartitionPolicy", "NeighborSampler", "DistNodeDataLoader", "DistEdgeDataLoader",
    "DistDataLoader", "optim", "partition_graph", "load_partition", "load_partition_book", "load_partition_feats",
]

# dgl.distributed.optim.SparseAdam (DGL 0.6+): `import dgld.distributed.optim`
# finds the submodule here.
sys.modules[__name__ + ".optim"] = optim


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
            name = self._g._client.canonical_etypes[self._g._etype_id(key)]  # an unknown type is an error here
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
        part_config = part_config or _state.get("part_config") or os.environ.get("DGL_CONF_PATH")
        if _state["client"] is None and not part_config:
            raise InvalidArgument("DistGraph needs part_config (or DGL_CONF_PATH in the environment)")
        self._client = _connect(part_config) if _state["client"] is None else _state["client"]
        if graph_name != self._client.graph_name:
            raise InvalidArgument(f"DistGraph({graph_name!r}): the job's graph is {self._client.graph_name!r}")
        self._name = graph_name
        self._gpb = GraphPartitionBook.from_client(self._client)
        self.ndata = _DataView(self, edges=False)
        self.edata = _DataView(self, edges=True)
        self._barriers = itertools.count()

    def _ntype_id(self, ntype):
        types = self._client.ntypes
        if ntype not in types:
            raise InvalidArgument(f"{ntype!r} is not a node type of {self._name!r} (known: {', '.join(types) or '_N'})")
        return types.index(ntype)

    def _etype_id(self, etype):
        return _etype_index(self._client, etype, who="", graph=repr(self._name))

    def get_ntype_id(self, ntype):
        """A node type's id (its index in g.ntypes); None: the only type's."""
        if ntype is None:
            if len(self.ntypes) != 1:
                raise InvalidArgument(f"the graph has several node types ({', '.join(self.ntypes)}): name one")
            return 0
        if self.is_homogeneous():
            if ntype != "_N":
                raise InvalidArgument(f"{ntype!r} is not a node type of {self._name!r} (known: _N)")
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
        if ntype is None or not self._client.ntypes:
            return self._client.num_nodes
        return self._client.ntype_counts[self._ntype_id(ntype)]

    def num_edges(self, etype=None):
        if etype is None or not self._client.canonical_etypes:
            return self._client.num_edges
        return self._client.etype_counts[self._etype_id(etype)]

    number_of_nodes = num_nodes
    number_of_edges = num_edges

    @property
    def graph_name(self):
        return self._name

    @property
    def ntypes(self):
        return list(self._client.ntypes) or ["_N"]

    @property
    def etypes(self):
        return [c.split(":")[1] for c in self._client.canonical_etypes] or ["_E"]

    @property
    def canonical_etypes(self):
        return [tuple(c.split(":")) for c in self._client.canonical_etypes] or [("_N", "_E", "_N")]

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
        return self._client.to_homogeneous(self._ntype_id(ntype), _as_ids(ids, self.num_nodes(ntype)))

    def to_type_wise_ids(self, ids):
        """Homogeneous node ids -> (type ids, per-type ids); ntypes[t] names type t."""
        return self._client.to_type_wise(_as_ids(ids, self.num_nodes()))

    def to_homogeneous_eids(self, etype, ids):
        """Per-type edge ids of `etype` -> the graph's homogeneous edge ids."""
        return self._client.to_homogeneous(self._etype_id(etype), _as_ids(ids, self.num_edges(etype)), edges=True)

    def to_type_wise_eids(self, ids):
        """Homogeneous edge ids -> (edge type ids, per-type ids);
        canonical_etypes[t] names type t."""
        return self._client.to_type_wise(_as_ids(ids, self.num_edges()), edges=True)

    @property
    def idtype(self):
        return torch.int64

    @property
    def device(self):
        return torch.device("cpu")

    def is_homogeneous(self):
        return not self._client.ntypes

    def get_partition_book(self):
        return self._gpb

    def get_node_partition_policy(self, ntype="_N"):
        return NodePartitionPolicy(self._gpb, ntype)

    def get_edge_partition_policy(self, etype="_E"):
        return EdgePartitionPolicy(self._gpb, etype)

    def rank(self):
        """This trainer's rank (in a trainer's sampler process: that trainer's)."""
        return trainer_rank()

    def barrier(self):
        """Waits until every trainer of the job reached its own barrier() call
        of the same number."""
        self._client.barrier(f"dgld.python.{next(self._barriers)}", _DEFAULT_TIMEOUT_S)

    def _ids(self, v, n):
        if isinstance(v, str) and v == "__ALL__":
            return torch.arange(n, dtype=torch.int64), False
        scalar = isinstance(v, (int, np.integer))
        return _as_ids(v, n), scalar

    def in_degrees(self, v="__ALL__"):
        ids, scalar = self._ids(v, self.num_nodes())
        d = self._client.degrees(ids, False)
        return int(d[0]) if scalar else d

    def out_degrees(self, u="__ALL__"):
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
        return self._client.find_edges(_as_ids(edges, self.num_edges()))

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


def node_split(nodes, partition_book=None, ntype="_N", rank=None, force_even=True, node_trainer_ids=None,
               num_trainers=None):
    """This trainer's nodes among those `nodes` (a boolean mask over all
    nodes: a DistTensor or a tensor) selects, by DGL's rules: with
    force_even the selected ids are cut into near-equal slices per machine,
    and a machine's slice among its trainers. rank and num_trainers (a dgld
    addition) default to this trainer's and the job's. On a heterogeneous
    graph, with ntype the mask covers that type's nodes and the result is
    that type's ids (DGL's per-type split)."""
    client = _client()
    typed = ntype != "_N" and bool(client.ntypes)
    if typed:
        if ntype not in client.ntypes:
            raise InvalidArgument(f"node_split: {ntype!r} is not a node type (known: {', '.join(client.ntypes)})")
        t = client.ntypes.index(ntype)
        per_type = _mask_tensor(nodes, client.ntype_counts[t], f"node_split of {ntype!r}")
        mask = torch.zeros(client.num_nodes, dtype=torch.bool)
        mask[client.to_homogeneous(t, torch.nonzero(per_type).reshape(-1))] = True
    else:
        mask = _mask_tensor(nodes, client.num_nodes, "node_split")
    tids = None if node_trainer_ids is None else _mask_tensor(node_trainer_ids, client.num_nodes, "node_split")
    ids = client.split(mask, False, bool(force_even), -1 if rank is None else int(rank),
                       0 if num_trainers is None else int(num_trainers), tids)
    if typed:
        ids = client.to_type_wise(ids)[1]
    return ids


def edge_split(edges, partition_book=None, etype="_E", rank=None, force_even=True, edge_trainer_ids=None,
               num_trainers=None):
    """node_split for edges."""
    client = _client()
    mask = _mask_tensor(edges, client.num_edges, "edge_split")
    tids = None if edge_trainer_ids is None else _mask_tensor(edge_trainer_ids, client.num_edges, "edge_split")
    return client.split(mask, True, bool(force_even), -1 if rank is None else int(rank),
                        0 if num_trainers is None else int(num_trainers), tids)


# ---------------------------------------------------------------- sampling

def sample_neighbors(g, nodes, fanout, edge_dir="in", prob=None, exclude_edges=None, replace=False,
                     output_device=None, etype_sorted=True, _rng_seed=None):
    """Samples `fanout` in-neighbours (edge_dir='out': out-neighbours) of
    every seed in `nodes` (-1: all), as DGL's distributed sample_neighbors:
    seeds grouped by owner, one request per machine, local seeds sampled in
    process. `prob` names an edge tensor of weights. The random stream comes
    from torch's global generator. Returns the frontier: a dgld.DGLGraph over
    all of g's nodes holding the sampled edges (edata[dgl.EID]: their global
    ids), as DGL's does."""
    if edge_dir not in ("in", "out"):
        raise InvalidArgument(f"edge_dir must be 'in' or 'out', got {edge_dir!r}")
    if exclude_edges is not None:
        raise InvalidArgument("sample_neighbors: exclude_edges is not supported by dgld yet")
    client = g._client
    seeds = _as_ids(nodes, g.num_nodes())
    seed = _rng_seed if _rng_seed is not None else int(torch.randint(0, 2**62, (1,)).item())
    prob_name = ""
    if prob is not None:
        prob_name = client.etype + "/" + prob if "/" not in prob else prob
    src, dst, eid = client.sample_neighbors(seeds, int(fanout), bool(replace), edge_dir == "out", prob_name, seed)
    # DGL's frontier: a graph over every node of g (global ids), the sampled
    # edges' global ids in edata[dgl.EID]; dgld.to_block(frontier, seeds)
    # makes it a block.
    n = g.num_nodes()
    frontier = DGLGraph._from_coo(src, dst, n, n)
    frontier.edata[EID] = eid
    return frontier
