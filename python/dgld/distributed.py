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

import atexit
import itertools
import os
import types
from collections.abc import MutableMapping

import numpy as np
import torch

from . import _C
from ._errors import DGLError, InvalidArgument, NotFound

__all__ = [
    "initialize", "exit_client", "is_initialized", "DistGraph", "DistTensor", "GraphPartitionBook",
    "node_split", "edge_split", "sample_neighbors", "DistEmbedding", "SparseAdagrad", "SparseAdam",
    "NodePartitionPolicy", "EdgePartitionPolicy", "NeighborSampler", "DistNodeDataLoader", "DistDataLoader",
]

_state = {"ip_config": None, "client": None, "options": {}, "interrupted": False}
_DEFAULT_TIMEOUT_S = 600.0


def _env_int(name, default):
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise InvalidArgument(f"environment variable {name}={value!r} is not an integer") from None


def initialize(ip_config=None, max_queue_size=None, net_type=None, num_worker_threads=1, num_servers=None,
               part_config=None, connect_timeout_s=30.0, call_timeout_s=60.0):
    """Joins the job described by ip_config (DGL's dgl.distributed.initialize).

    ip_config defaults to $DGL_IP_CONFIG. When the partition config is known
    here ($DGL_CONF_PATH, as dgl-launch sets it, or part_config) the process
    connects to every graph-server now; otherwise when DistGraph is created.
    max_queue_size, net_type and num_worker_threads are DGL's and have no
    effect (dgld has its own transport)."""
    if _state["client"] is not None:
        raise DGLError("dgld.distributed.initialize was called twice in this process")
    ip_config = ip_config or os.environ.get("DGL_IP_CONFIG")
    if not ip_config:
        raise InvalidArgument("initialize needs ip_config (or DGL_IP_CONFIG in the environment)")
    if not os.path.isfile(ip_config):
        raise NotFound(f"ip_config file {ip_config!r} does not exist")
    _state["ip_config"] = ip_config
    _state["options"] = {
        "num_servers": num_servers if num_servers is not None else _env_int("DGL_NUM_SERVER", 1),
        "connect_timeout_s": float(connect_timeout_s),
        "call_timeout_s": float(call_timeout_s),
    }
    part_config = part_config or os.environ.get("DGL_CONF_PATH")
    if part_config:
        _connect(part_config)


def _connect(part_config):
    if _state["client"] is not None:
        return _state["client"]
    if _state["ip_config"] is None:
        raise DGLError("call dgld.distributed.initialize(ip_config) before creating a DistGraph")
    if not os.path.isfile(part_config):
        raise NotFound(f"partition config {part_config!r} does not exist")
    o = _C.ClientOptions()
    o.ip_config = _state["ip_config"]
    o.part_config = part_config
    o.machine_id = _env_int("DGLD_MACHINE_ID", -1)
    o.rank = _env_int("DGLD_TRAINER_RANK", -1)
    o.num_trainers = _env_int("DGLD_NUM_TRAINERS", 0)
    o.num_servers = _state["options"]["num_servers"]
    o.job_id = os.environ.get("DGLD_JOB_ID", "")
    o.connect_timeout_s = _state["options"]["connect_timeout_s"]
    o.call_timeout_s = _state["options"]["call_timeout_s"]
    client = _C.Client(o)
    _state["client"] = client
    _state["part_config"] = part_config
    atexit.register(exit_client)
    return client


def _client():
    c = _state["client"]
    if c is None:
        raise DGLError("not connected to a dgld job: call dgld.distributed.initialize(ip_config) and create a "
                       "DistGraph first")
    return c


def is_initialized():
    return _state["ip_config"] is not None


def exit_client():
    """Leaves the job (at exit, or when called). Idempotent. After Ctrl-C
    the connections are dropped at once instead (nothing waits for a
    deadline on the way out)."""
    c = _state["client"]
    if c is not None:
        _state["client"] = None
        try:
            c.close(abort=_state["interrupted"])
        except DGLError:
            pass  # the servers may already be gone at exit


def _interrupted():
    _state["interrupted"] = True


# ---------------------------------------------------------------- ids

def _as_ids(idx, length):
    """An index (tensor, array, list, slice, int) as a 1-d int64 tensor; a
    boolean mask of `length` values selects its true positions."""
    if isinstance(idx, DistTensor):
        idx = idx[0:len(idx)]
    if isinstance(idx, slice):
        start, stop, step = idx.indices(length)
        return torch.arange(start, stop, step, dtype=torch.int64)
    if isinstance(idx, (int, np.integer)):
        return torch.tensor([int(idx)], dtype=torch.int64)
    if isinstance(idx, np.ndarray):
        idx = torch.from_numpy(idx)
    elif not isinstance(idx, torch.Tensor):
        idx = torch.as_tensor(idx)
    if idx.dtype == torch.bool:
        if idx.numel() != length:
            raise InvalidArgument(f"a boolean index must have {length} values, got {idx.numel()}")
        return torch.nonzero(idx, as_tuple=False).reshape(-1)
    if idx.is_floating_point():
        raise InvalidArgument(f"ids must be integers, got {idx.dtype}")
    return idx.reshape(-1).to(torch.int64)


# ---------------------------------------------------------------- partition book

class NodePartitionPolicy:
    """Rows partitioned like the nodes (DGL's NodePartitionPolicy)."""
    policy_str = "node:_N"
    is_node = True

    def __init__(self, partition_book=None, ntype="_N"):
        self.partition_book = partition_book
        self.type_name = ntype


class EdgePartitionPolicy:
    """Rows partitioned like the edges (DGL's EdgePartitionPolicy)."""
    policy_str = "edge:_E"
    is_node = False

    def __init__(self, partition_book=None, etype="_E"):
        self.partition_book = partition_book
        self.type_name = etype


class GraphPartitionBook:
    """Which machine owns which ids (DGL's RangePartitionBook): every
    partition owns one contiguous range of node ids and one of edge ids."""

    def __init__(self, client):
        self._node_ranges = client.node_ranges()
        self._edge_ranges = client.edge_ranges()
        self._node_ends = torch.tensor([e for _, e in self._node_ranges], dtype=torch.int64)
        self._edge_ends = torch.tensor([e for _, e in self._edge_ranges], dtype=torch.int64)
        self._partid = client.machine_id
        self._machines = client.machines()

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


# ---------------------------------------------------------------- DistTensor

_anonymous = itertools.count()


class DistTensor:
    """A tensor whose rows live on the graph-servers, partitioned like the
    nodes (or edges) of the graph (DGL's dgl.distributed.DistTensor).

    t[ids] pulls rows (rows of this machine are read from shared memory, the
    others fetched from their owners, all at once), t[ids] = v pushes them.
    Creation is collective: every trainer creates the same tensors in the
    same order. `init_func(shape, dtype)` fills each machine's rows (called
    by one trainer per machine); without it the rows start at zero."""

    def __init__(self, shape, dtype, name=None, init_func=None, part_policy=None, persistent=False,
                 is_gdata=True, attach=True, _from=None):
        if _from is not None:
            self._t = _from
            self._policy = EdgePartitionPolicy() if _from.is_edge else NodePartitionPolicy()
            self._recent = []
            return
        client = _client()
        shape = tuple(int(s) for s in shape)
        if len(shape) == 0:
            raise InvalidArgument("a DistTensor needs at least one dimension")
        if part_policy is None:
            if shape[0] == client.num_nodes:
                part_policy = NodePartitionPolicy()
            elif shape[0] == client.num_edges:
                part_policy = EdgePartitionPolicy()
            else:
                raise InvalidArgument(f"DistTensor of {shape[0]} rows: the graph has {client.num_nodes} nodes and "
                                      f"{client.num_edges} edges; pass part_policy")
        elif isinstance(part_policy, str):
            part_policy = EdgePartitionPolicy() if part_policy.startswith("edge") else NodePartitionPolicy()
        edges = not part_policy.is_node
        want = client.num_edges if edges else client.num_nodes
        if shape[0] != want:
            raise InvalidArgument(f"DistTensor partitioned by {'edges' if edges else 'nodes'} must have {want} "
                                  f"rows, got {shape[0]}")
        if name is None:
            name = f"anonymous-{next(_anonymous)}"
            persistent = False
        self._t = _C.DistTensor.create(client, name, list(shape), dtype, edges, "zeros", 0.0, 1.0, 0,
                                       bool(persistent), _DEFAULT_TIMEOUT_S)
        self._policy = part_policy
        self._recent = []
        if init_func is not None:
            self._initialize(client, init_func, shape, dtype, edges)

    def _initialize(self, client, init_func, shape, dtype, edges):
        # Machine m's rows are filled by its first trainer, or, in a job with
        # fewer trainers than machines, by trainer m % num_trainers.
        ranges = client.edge_ranges() if edges else client.node_ranges()
        trainers, machines = max(1, client.num_trainers), len(ranges)
        per_machine = trainers // machines
        for m, (start, end) in enumerate(ranges):
            owner = m * per_machine if per_machine >= 1 else m % trainers
            if owner == client.rank and end > start:
                rows = init_func((end - start,) + tuple(shape[1:]), dtype)
                self._t.push(torch.arange(start, end, dtype=torch.int64), torch.as_tensor(rows))
        client.barrier(f"dgld.init.{self._t.name}", _DEFAULT_TIMEOUT_S)

    @property
    def shape(self):
        return tuple(self._t.shape)

    @property
    def dtype(self):
        return self._t.dtype

    @property
    def name(self):
        return self._t.name

    @property
    def part_policy(self):
        return self._policy

    def __len__(self):
        return self._t.shape[0]

    def _remember(self, ids, rows):
        """Rows the data loader fetched with a batch: t[ids] with that very
        ids tensor returns them without a request."""
        self._recent = [(ids, rows)] + self._recent[:1]

    def _row_ids(self, idx):
        """The homogeneous ids of rows `idx`. A node type's tensor of a
        heterogeneous graph (g.nodes[ntype].data[name]) is indexed by that
        type's ids, as in DGL."""
        ids = _as_ids(idx, len(self))
        if self._t.ntype >= 0:
            ids = _client().to_homogeneous(self._t.ntype, ids)
        return ids

    def __getitem__(self, idx):
        for ids, rows in self._recent:
            if idx is ids:
                return rows
        scalar = isinstance(idx, (int, np.integer))
        rows = self._t.pull(self._row_ids(idx))
        return rows[0] if scalar else rows

    def __setitem__(self, idx, value):
        ids = self._row_ids(idx)
        value = torch.as_tensor(value)
        if value.dim() == len(self.shape) - 1:
            value = value.expand((ids.numel(),) + tuple(self.shape[1:]))
        self._recent = []
        self._t.push(ids, value)

    def __repr__(self):
        return f"DistTensor(name={self.name!r}, shape={self.shape}, dtype={self.dtype})"

    def __del__(self):
        pass  # the rows live on the servers; non-persistent tensors go with the job


# ---------------------------------------------------------------- DistGraph

class _NodeTypes:
    """g.nodes: g.nodes[ntype].data is that node type's data."""

    def __init__(self, graph):
        self._g = graph

    def __getitem__(self, ntype):
        self._g._ntype_id(ntype)  # an unknown type is an error here
        view = types.SimpleNamespace()
        view.data = _DataView(self._g, edges=False, prefix=ntype + "/")
        return view

    def __call__(self, ntype=None):
        return torch.arange(self._g.num_nodes(ntype), dtype=torch.int64)


class _DataView(MutableMapping):
    """g.ndata / g.edata: the graph's tensors by name, as DistTensors."""

    def __init__(self, graph, edges, prefix=None):
        self._g = graph
        self._edges = edges
        self._prefix = prefix or (graph._client.etype if edges else graph._client.ntype) + "/"
        self._opened = {}
        self._assigned = {}

    def _names(self):
        names = {n[len(self._prefix):] for n in self._g._client.tensors() if n.startswith(self._prefix)}
        return sorted(names | set(self._assigned))

    def __getitem__(self, key):
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

    def __contains__(self, key):
        return key in self._names()

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
        self._gpb = GraphPartitionBook(self._client)
        self.ndata = _DataView(self, edges=False)
        self.edata = _DataView(self, edges=True)
        self._barriers = itertools.count()

    def _ntype_id(self, ntype):
        types = self._client.ntypes
        if ntype not in types:
            raise InvalidArgument(f"{ntype!r} is not a node type of {self._name!r} (known: {', '.join(types) or '_N'})")
        return types.index(ntype)

    def _etype_id(self, etype):
        canonical = self._client.canonical_etypes
        if isinstance(etype, tuple):
            etype = ":".join(etype)
        matches = [i for i, c in enumerate(canonical) if c == etype or c.split(":")[1] == etype]
        if len(matches) != 1:
            raise InvalidArgument(f"{etype!r} names {'no' if not matches else 'more than one'} edge type of "
                                  f"{self._name!r} (known: {', '.join(canonical)})")
        return matches[0]

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
        return _NodeTypes(self)

    def to_homogeneous_ids(self, ntype, ids):
        """Per-type ids of `ntype` -> the graph's homogeneous node ids (what
        sampled blocks and g.ndata use)."""
        return self._client.to_homogeneous(self._ntype_id(ntype), _as_ids(ids, self.num_nodes(ntype)))

    def to_type_wise_ids(self, ids):
        """Homogeneous node ids -> (type ids, per-type ids); ntypes[t] names type t."""
        return self._client.to_type_wise(_as_ids(ids, self.num_nodes()))

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
        return self._client.rank

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
        return self._client.find_edges(_as_ids(edges, self.num_edges()))

    @property
    def local_partition(self):
        return None

    def __repr__(self):
        return f"DistGraph(name={self._name!r}, num_nodes={self.num_nodes()}, num_edges={self.num_edges()})"


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
    addition) default to this trainer's and the job's."""
    client = _client()
    mask = _mask_tensor(nodes, client.num_nodes, "node_split")
    tids = None if node_trainer_ids is None else _mask_tensor(node_trainer_ids, client.num_nodes, "node_split")
    return client.split(mask, False, bool(force_even), -1 if rank is None else int(rank),
                        0 if num_trainers is None else int(num_trainers), tids)


def edge_split(edges, partition_book=None, etype="_E", rank=None, force_even=True, edge_trainer_ids=None,
               num_trainers=None):
    """node_split for edges."""
    client = _client()
    mask = _mask_tensor(edges, client.num_edges, "edge_split")
    tids = None if edge_trainer_ids is None else _mask_tensor(edge_trainer_ids, client.num_edges, "edge_split")
    return client.split(mask, True, bool(force_even), -1 if rank is None else int(rank),
                        0 if num_trainers is None else int(num_trainers), tids)


# ---------------------------------------------------------------- sampling

class SampledSubgraph:
    """What sample_neighbors returns: the sampled edges in global ids
    (edges() gives (src, dst); edata[dgl.EID] their edge ids)."""

    def __init__(self, src, dst, eid, num_nodes):
        self._src, self._dst = src, dst
        self.edata = {"_ID": eid}
        self._num_nodes = num_nodes

    def edges(self, form="uv"):
        if form == "all":
            return self._src, self._dst, self.edata["_ID"]
        return self._src, self._dst

    def num_edges(self):
        return int(self._src.numel())

    number_of_edges = num_edges

    def num_nodes(self):
        return self._num_nodes


def sample_neighbors(g, nodes, fanout, edge_dir="in", prob=None, exclude_edges=None, replace=False,
                     output_device=None, etype_sorted=True, _rng_seed=None):
    """Samples `fanout` in-neighbours (edge_dir='out': out-neighbours) of
    every seed in `nodes` (-1: all), as DGL's distributed sample_neighbors:
    seeds grouped by owner, one request per machine, local seeds sampled in
    process. `prob` names an edge tensor of weights. The random stream comes
    from torch's global generator."""
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
    return SampledSubgraph(src, dst, eid, g.num_nodes())


# ---------------------------------------------------------------- embeddings

from .embedding import DistEmbedding, SparseAdagrad, SparseAdam  # noqa: E402
from .dataloading import NeighborSampler, DistNodeDataLoader, DistDataLoader  # noqa: E402
