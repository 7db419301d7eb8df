"""DistTensor (DGL's dgl.distributed.DistTensor): a tensor whose rows live
on the graph-servers, partitioned like the nodes or the edges (or one type's
nodes or edges; graph_partition_book.py's policies). A DistTensor pickles
to its name and opens the same tensor in the process that unpickles it (a
trainer's sampler process)."""

import itertools
import weakref

import numpy as np
import torch

from .. import _C
from .._errors import DGLError, InvalidArgument
from ..base import as_ids
from .dist_context import _DEFAULT_TIMEOUT_S, _client, _log, _state, partition_book
from .graph_partition_book import EdgePartitionPolicy, NodePartitionPolicy, PartitionPolicy

__all__ = ["DistTensor"]

_anonymous = itertools.count()


def _policy_for_rows(book, rows):
    """DGL's choice of a DistTensor's partition policy by its row count: the
    one policy (all nodes, all edges, one node type's nodes or one edge
    type's edges) of that many rows, or the one node policy among several;
    an error when none or several match."""
    num_nodes, num_edges = book._num_nodes(), book._num_edges()
    ntypes, etypes = [], []
    if not book.is_homogeneous():
        ntypes = [(t, book._num_nodes(t)) for t in book.ntypes]
        etypes = [(":".join(c), book._num_edges(c)) for c in book.canonical_etypes]
    matches = []
    if rows == num_nodes:
        matches.append(NodePartitionPolicy(book))
    if rows == num_edges:
        matches.append(EdgePartitionPolicy(book))
    for t, n in ntypes:
        if rows == n and rows != num_nodes:
            matches.append(NodePartitionPolicy(book, ntype=t))
    for t, n in etypes:
        if rows == n and rows != num_edges:
            matches.append(EdgePartitionPolicy(book, etype=t))
    if len(matches) == 1:
        return matches[0]
    # DGL refuses every tie; dgld takes the one node policy among them (a
    # target type with one edge per node, as a paper's venue, keeps working).
    nodes = [m for m in matches if m.is_node]
    if len(nodes) == 1:
        return nodes[0]
    counts = f"{num_nodes} nodes, {num_edges} edges"
    if ntypes:
        counts += ", " + ", ".join(f"{n} {t!r} nodes" for t, n in ntypes)
        counts += ", " + ", ".join(f"{n} {t!r} edges" for t, n in etypes)
    what = "no" if not matches else "several"
    raise InvalidArgument(f"DistTensor of {rows} rows: {what} partition policies match (the graph has {counts}); "
                          f"pass part_policy")


# The DistTensors holding a batch's rows (_remember), weakly.
_remembering = weakref.WeakSet()


def forget_batch_rows():
    """Drops the rows every DistTensor remembers from the last batch: a loader
    starting an epoch calls it, so that the previous loader's last batch
    goes back to that loader's buffers before they are freed."""
    for t in list(_remembering):
        t._forget()
    _remembering.clear()


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
            book = partition_book()
            self._t = _from
            if _from.is_edge:
                self._policy = EdgePartitionPolicy(book, book.canonical_etypes[_from.etype]
                                                   if _from.etype >= 0 else "_E")
            else:
                self._policy = NodePartitionPolicy(book, book.ntypes[_from.ntype] if _from.ntype >= 0 else "_N")
            self._recent = []
            self._bool = False
            self._persistent = True
            self._owner = False
            return
        client, book = _client(), partition_book()
        shape = tuple(int(s) for s in shape)
        if len(shape) == 0:
            raise InvalidArgument("a DistTensor needs at least one dimension")
        if part_policy is None:
            part_policy = _policy_for_rows(book, shape[0])
        elif isinstance(part_policy, str):
            # "edge" and "edge:<anything>" (DGL 0.5's strings) are every edge, as before.
            part_policy = PartitionPolicy("edge" if part_policy.split(":")[0] == "edge" else part_policy, book)
        edges = not part_policy.is_node
        # A node (edge) type's tensor of a heterogeneous graph: its rows are
        # that type's nodes (edges). An unknown type is an error here.
        type_name = None
        if not edges and part_policy.type_name != "_N" and not book.is_homogeneous():
            type_name, want = part_policy.type_name, book._num_nodes(part_policy.type_name)
            what = f"the nodes of type {type_name!r}"
        elif edges and part_policy.type_name not in ("_E", ("_N", "_E", "_N")) and not book.is_homogeneous():
            type_name = ":".join(book.to_canonical_etype(part_policy.type_name))
            want = book._num_edges(type_name)
            what = f"the edges of type {type_name!r}"
        else:
            want, what = (book._num_edges(), "edges") if edges else (book._num_nodes(), "nodes")
        if shape[0] != want:
            raise InvalidArgument(f"DistTensor partitioned by {what} must have {want} rows, got {shape[0]}")
        if name is None:
            name = f"anonymous-{next(_anonymous)}"
            persistent = False
        if type_name is not None and not name.startswith(type_name + "/"):
            name = f"{type_name}/{name}"  # the servers keep "<type>/..." per type
        # torch.bool rows are kept as uint8 (one byte each, as torch stores
        # bools) and read back as bool.
        self._bool = dtype == torch.bool
        # DGL's owner: the handles whose (collective) call made the tensor,
        # not those that opened an existing name; a non-persistent tensor
        # goes when its owners do, and init_func fills only a new tensor.
        # Every trainer looks before any creates, so all see the same.
        self._owner = name not in client.tensors()
        client.barrier(f"dgld.exists.{name}", _DEFAULT_TIMEOUT_S)
        self._t = _C.DistTensor.create(client, name, list(shape), torch.uint8 if self._bool else dtype, edges,
                                       "zeros", 0.0, 1.0, 0, bool(persistent), _DEFAULT_TIMEOUT_S)
        self._persistent = bool(persistent)
        self._policy = part_policy
        self._recent = []
        if init_func is not None and self._owner:
            self._initialize(client, book, init_func, shape, dtype, edges, type_name)

    def _initialize(self, client, book, init_func, shape, dtype, edges, type_name=None):
        # Machine m's rows are filled by its first trainer, or, in a job with
        # fewer trainers than machines, by trainer m % num_trainers.
        ranges = book.edge_ranges(type_name) if edges else book.node_ranges(type_name)
        trainers, machines = max(1, client.num_trainers), len(ranges)
        per_machine = trainers // machines
        for m, (start, end) in enumerate(ranges):
            owner = m * per_machine if per_machine >= 1 else m % trainers
            if owner == client.rank and end > start:
                rows = torch.as_tensor(init_func((end - start,) + tuple(shape[1:]), dtype))
                self._t.push(torch.arange(start, end, dtype=torch.int64), self._stored(rows))
        client.barrier(f"dgld.init.{self._t.name}", _DEFAULT_TIMEOUT_S)

    @property
    def shape(self):
        return tuple(self._t.shape)

    @property
    def dtype(self):
        return torch.bool if self._bool else self._t.dtype

    def _stored(self, rows):
        return rows.to(torch.uint8) if self._bool else rows

    @property
    def name(self):
        return self._t.name

    @property
    def kvstore_key(self):
        """The tensor's name on the servers (DGL's key in its KVStore): in
        g._client.data_name_list() while the tensor exists."""
        return self._t.name

    @property
    def part_policy(self):
        return self._policy

    def __len__(self):
        return self._t.shape[0]

    def _remember(self, ids, rows):
        """Rows the data loader fetched with the batch it just yielded: t[ids]
        with that very ids tensor returns them without a request. Only that
        batch's (an earlier batch's rows would stay in memory for nothing),
        until forget_batch_rows()."""
        self._recent = [(ids, rows)]
        _remembering.add(self)

    def _forget(self):
        self._recent = []

    def _row_ids(self, idx):
        """The homogeneous ids of rows `idx`. A node type's tensor of a
        heterogeneous graph (g.nodes[ntype].data[name]) is indexed by that
        type's ids, as in DGL."""
        ids = as_ids(idx, None, len(self), check_range=False)  # the servers name an id out of range
        book = partition_book()
        if self._t.ntype >= 0:
            ids = book.map_to_homo_nid(ids, book.ntypes[self._t.ntype])
        elif self._t.etype >= 0:
            ids = book.map_to_homo_eid(ids, book.canonical_etypes[self._t.etype])
        return ids

    def __getitem__(self, idx):
        for ids, rows in self._recent:
            if idx is ids:
                return rows
        scalar = isinstance(idx, (int, np.integer))
        rows = self._t.pull(self._row_ids(idx))
        if self._bool:
            rows = rows.bool()
        return rows[0] if scalar else rows

    def __setitem__(self, idx, value):
        ids = self._row_ids(idx)
        value = torch.as_tensor(value)
        if value.dim() == len(self.shape) - 1:
            value = value.expand((ids.numel(),) + tuple(self.shape[1:]))
        self._recent = []
        self._t.push(ids, self._stored(value))

    # Elementwise operators and counts over every row (DGL's DistTensor has
    # __or__ and count_nonzero), in chunks of this many rows.
    _CHUNK = 1 << 16

    def _binary(self, other, op):
        """A new DistTensor of op(self, other), row by row. Collective, as
        creating a DistTensor is: every trainer computes its share of the
        rows, then all wait for the others."""
        if not isinstance(other, DistTensor) or other.shape != self.shape:
            raise InvalidArgument(f"DistTensor operator: the other operand must be a DistTensor of shape "
                                  f"{self.shape}, got {other!r}")
        out = DistTensor(self.shape, self.dtype, part_policy=self._policy, persistent=self._persistent)
        client = _client()
        n, world = len(self), max(1, client.num_trainers)
        start, end = n * max(0, client.rank) // world, n * (max(0, client.rank) + 1) // world
        for lo in range(start, end, self._CHUNK):
            ids = torch.arange(lo, min(end, lo + self._CHUNK), dtype=torch.int64)
            out[ids] = op(self[ids], other[ids])
        client.barrier(f"dgld.op.{out.name}", _DEFAULT_TIMEOUT_S)
        return out

    def __or__(self, other):
        return self._binary(other, torch.bitwise_or)

    def __and__(self, other):
        return self._binary(other, torch.bitwise_and)

    def __xor__(self, other):
        return self._binary(other, torch.bitwise_xor)

    def count_nonzero(self):
        """The number of nonzero elements over every row."""
        total = 0
        for lo in range(0, len(self), self._CHUNK):
            total += int(torch.count_nonzero(self[torch.arange(lo, min(len(self), lo + self._CHUNK))]))
        return total

    def __repr__(self):
        return f"DistTensor(name={self.name!r}, shape={self.shape}, dtype={self.dtype})"

    def __reduce__(self):
        # By name: the process that unpickles it (a trainer's sampler
        # process) opens the same tensor over its own connection.
        return _open_by_name, (self.name,)

    def __del__(self):
        # As DGL's: the owner of a non-persistent tensor deletes it from the
        # servers when it goes (collective, as creating it was: every
        # trainer's handle goes at the same point of the script). Tensors
        # outlive the handles that only opened them, and everything goes
        # with the job.
        if not getattr(self, "_owner", False) or self._persistent:
            return
        self._owner = False
        if _state["client"] is None:
            return  # the job is gone already (the process is exiting)
        try:
            self._t.destroy(_DEFAULT_TIMEOUT_S)
        except DGLError as e:
            _log.warning("DistTensor %r was not deleted from the servers: %s", self._t.name, e)


def _open_by_name(name):
    """The job's DistTensor `name`, opened in this process (what a pickled
    DistTensor becomes)."""
    return DistTensor(None, None, _from=_C.DistTensor.open(_client(), name))
