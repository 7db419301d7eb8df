"""The sparse optimisers of DistEmbedding (DGL's
dgl.distributed.optim.SparseAdagrad and SparseAdam): each row's optimiser
state lives in DistTensors on the servers beside the embedding's rows.

step() sends every gradient row of the lookups made since the last step to
the trainer that owns it (torch.distributed all_to_all over the job's gloo
group; a machine's rows are split evenly among its trainers), which
averages the gradients of a row that came several times (from several
trainers, or several times in one batch), as DGL's optimisers do, and
updates the rows in place (weights and state are read and written in its
own machine's shared memory). A barrier ends the step, so the next lookup
sees every update.

zero_grad() keeps the lookups and their gradients, as DGL's does (there it
only asks the next step() to drop the lookups, which dgld's step() always
does): DGL's scripts call it between the forward pass and backward()
(emb(ids), model, loss, zero_grad(), backward(), step()), so the lookup of
that batch must still be updated by step(). A lookup whose rows got no
gradient is left out of the step."""

import os
import warnings

import torch
import torch.distributed as tdist

from ...._errors import InvalidArgument
from ...dist_context import partition_book
from ...dist_tensor import DistTensor
from ...nn.pytorch.sparse_emb import DistEmbedding

__all__ = ["SparseAdagrad", "SparseAdam"]


def _owner_rule(client):
    """(trainers per machine, each machine's [start, end) of homogeneous
    node ids): a machine's rows are split evenly among its trainers, in order."""
    per_machine = max(1, client.num_trainers // max(1, client.num_machines))
    ranges = partition_book().node_ranges()
    return per_machine, ranges


def _owners_of_homo(client, ids):
    """The trainer rank that updates the row of each homogeneous node id."""
    per_machine, ranges = _owner_rule(client)
    ends = torch.tensor([e for _, e in ranges], dtype=torch.int64)
    starts = torch.tensor([s for s, _ in ranges], dtype=torch.int64)
    machine = torch.searchsorted(ends, ids, right=True)
    size = (ends - starts)[machine]
    within = ((ids - starts[machine]) * per_machine) // torch.clamp(size, min=1)
    return machine * per_machine + within


def owned_ids(emb, rank):
    """The ids of `emb`'s rows that trainer `rank` updates (and saves in a
    checkpoint), by the same owner rule as the updates: every row has one
    owner. A machine's trainers own rows of that machine only."""
    client = emb._client
    per_machine, ranges = _owner_rule(client)
    machine = int(rank) // per_machine
    if machine >= len(ranges):
        return torch.empty(0, dtype=torch.int64)
    start, end = ranges[machine]
    ids = torch.arange(start, end, dtype=torch.int64)
    ids = ids[_owners_of_homo(client, ids) == int(rank)]
    ntype = emb.weight._t.ntype
    if ntype >= 0:
        book = partition_book()
        types, per_type = book.map_to_per_ntype(ids)
        ids = per_type[types == ntype]
    return ids


def _rank_world():
    """(rank, world size) of torch.distributed's default group, (0, 1)
    without one: whose state file save() and load() use, as DGL's."""
    if tdist.is_available() and tdist.is_initialized():
        return tdist.get_rank(), tdist.get_world_size()
    return 0, 1


class _SparseOptimizer:
    """Owner-computes sparse updates over DistTensors (see the module doc).

    As DGL's: _state maps each embedding's name to its state DistTensor
    (a tuple of them when there are several, in DGL's order), named
    "<embedding>_<state>"; _lr, _eps (and SparseAdam's _beta1, _beta2) are
    the hyper-parameters save() writes and load() restores."""

    # (state, row shape: None for the embedding's row, () for one value per row)
    _STATES = ()

    def __init__(self, params, lr, defaults):
        if isinstance(params, DistEmbedding):
            params = [params]
        for p in params:
            if not isinstance(p, DistEmbedding):
                raise InvalidArgument("sparse optimisers take DistEmbeddings")
        self._params = list(params)
        self._lr = float(lr)
        self._defaults = dict(defaults, _lr=self._lr)
        self._rows = []  # per embedding: {state: DistTensor}
        self._state = {}
        for p in self._params:
            if p.name in self._state:
                raise InvalidArgument(f"DistEmbedding {p.name!r} is given to the optimiser twice")
            states = {}
            for s, row in self._STATES:
                shape = (p.num_embeddings,) + ((p.embedding_dim,) if row is None else tuple(row))
                states[s] = DistTensor(shape, torch.float32, f"{p.name}_{s}", part_policy=p.weight.part_policy)
            self._rows.append(states)
            tensors = tuple(states.values())
            self._state[p.name] = tensors[0] if len(tensors) == 1 else tensors

    def _row_states(self):
        """(embedding, {state: DistTensor}) of every embedding."""
        return zip(self._params, self._rows)

    # ------------------------------------------------------------ save / load (DGL's format)

    def local_state_dict(self):
        """This rank's share of the state (DGL's local_state_dict):
        {"params": {"world_size": ..., "_lr": ..., ...}, "emb_states":
        {embedding: {"ids": global row ids, "states": {tensor name: rows}}}}.
        The ranks' shares are disjoint and together every row."""
        rank, world = _rank_world()
        out = {"params": dict(self._defaults, world_size=world), "emb_states": {}}
        for p, states in self._row_states():
            ids = owned_ids(p, rank) if world > 1 else torch.arange(p.num_embeddings, dtype=torch.int64)
            out["emb_states"][p.name] = {"ids": ids, "states": {t.name: t[ids] for t in states.values()}}
        return out

    def load_local_state_dict(self, state_dict):
        """Writes the rows of a local_state_dict() back, and its
        hyper-parameters (so _lr, _eps, ... are the saved ones, as DGL's)."""
        for emb_name, emb_state in state_dict["emb_states"].items():
            if emb_name not in self._state:
                raise ValueError(f"the saved state is of embedding {emb_name!r}, which this optimiser does not "
                                 f"update (it has: {', '.join(self._state)})")
            states = {t.name: t for p, rows in self._row_states() if p.name == emb_name for t in rows.values()}
            if len(emb_state["states"]) != len(states):
                raise ValueError(f"the saved state of embedding {emb_name!r} has {len(emb_state['states'])} "
                                 f"tensors, this optimiser {len(states)}")
            for name, rows in emb_state["states"].items():
                if name not in states:
                    raise ValueError(f"the saved state tensor {name!r} is not one of this optimiser's "
                                     f"({', '.join(states)})")
                states[name][emb_state["ids"]] = rows.to(torch.float32)
        params = dict(state_dict["params"])
        params.pop("world_size", None)
        self._defaults.update(params)
        self.__dict__.update(params)

    def save(self, f):
        """Writes this rank's share to "<f>_<rank>" (DGL's save; every rank
        of torch.distributed's group calls it)."""
        rank, world = _rank_world()
        if world > 1:
            tdist.barrier()
        torch.save(self.local_state_dict(), f"{os.fspath(f)}_{rank}")
        if world > 1:
            tdist.barrier()

    def load(self, f):
        """Reads "<f>_<rank>" (DGL's load; every rank calls it). Saved by
        more ranks than there are now, this rank also reads the files of
        ranks rank + world, rank + 2 world, ...; by fewer, the new ranks
        find no file and load nothing (a warning says so), as DGL's."""
        rank, world = _rank_world()
        if world > 1:
            tdist.barrier()
        path = f"{os.fspath(f)}_{rank}"
        if not os.path.exists(path):
            warnings.warn(f"{path} does not exist: rank {rank} loads no optimiser state")
        else:
            saved_world = self._load_from(path)
            for other in range(rank + world, saved_world, world):
                self._load_from(f"{os.fspath(f)}_{other}")
        if world > 1:
            tdist.barrier()

    def _load_from(self, path):
        state_dict = torch.load(path)
        world = int(state_dict["params"].get("world_size", 1))
        self.load_local_state_dict(state_dict)
        return world

    def zero_grad(self):
        """Nothing to clear: step() updates the rows of the lookups made since
        the previous step and then drops them. The lookups are kept (not
        reset_trace()): DGL's scripts call zero_grad() after the forward pass
        that made them and before backward()."""

    def _owners(self, client, ids, ntype):
        """The trainer rank that updates each row (ids of node type ntype's
        rows when ntype >= 0)."""
        book = partition_book()
        if ntype >= 0:
            ids = book.map_to_homo_nid(ids, book.ntypes[ntype])
        return _owners_of_homo(client, ids)

    def _exchange(self, client, ids, grads, ntype):
        """All-to-all of (ids, gradient rows) to their owners: what this
        trainer must update."""
        world = tdist.get_world_size() if tdist.is_available() and tdist.is_initialized() else 1
        if world == 1:
            return ids, grads
        owners = self._owners(client, ids, ntype)
        order = torch.argsort(owners, stable=True)
        ids, grads, owners = ids[order], grads[order], owners[order]
        send_counts = torch.bincount(owners, minlength=world)
        recv_counts = torch.empty_like(send_counts)
        tdist.all_to_all_single(recv_counts, send_counts)
        send, recv = send_counts.tolist(), recv_counts.tolist()
        out_ids = torch.empty(sum(recv), dtype=torch.int64)
        tdist.all_to_all_single(out_ids, ids, recv, send)
        out_grads = torch.empty((sum(recv), grads.shape[1]), dtype=grads.dtype)
        tdist.all_to_all_single(out_grads, grads.contiguous(), recv, send)
        return out_ids, out_grads

    def step(self):
        with torch.no_grad():
            for p, state in self._row_states():
                # Lookups whose rows got no gradient (no backward() through
                # them) are left out, as in DGL.
                traced = [(i, r.grad) for i, r in p._trace if r.grad is not None]
                if traced:
                    ids = torch.cat([i for i, _ in traced])
                    grads = torch.cat([g.to(torch.float32) for _, g in traced])
                else:
                    ids = torch.empty(0, dtype=torch.int64)
                    grads = torch.empty((0, p.embedding_dim), dtype=torch.float32)
                ids, grads = self._exchange(p._client, ids, grads, p.weight._t.ntype)
                if ids.numel():
                    # A row's gradients (from several trainers, or several
                    # places in one batch) are averaged, as DGL's optimisers do.
                    unique, inverse, counts = torch.unique(ids, return_inverse=True, return_counts=True)
                    mean = torch.zeros((unique.numel(), grads.shape[1]), dtype=grads.dtype)
                    mean.index_add_(0, inverse, grads)
                    mean /= counts.unsqueeze(1).to(grads.dtype)
                    self._update(p, state, unique, mean)
                p.reset_trace()
                p._client.barrier(f"dgld.sparse.{p.name}.{self._steps(p)}", 600.0)

    def _steps(self, p):
        self._count = getattr(self, "_count", {})
        self._count[p.name] = self._count.get(p.name, 0) + 1
        return self._count[p.name]


class SparseAdagrad(_SparseOptimizer):
    """Adagrad on the rows a step touched: state += g^2; w -= lr g / (sqrt(state) + eps)."""

    _STATES = (("sum", None),)

    def __init__(self, params, lr, eps=1e-10):
        self._eps = float(eps)
        super().__init__(params, lr, {"_eps": self._eps})

    def _update(self, p, state, ids, grad):
        s = state["sum"][ids] + grad * grad
        state["sum"][ids] = s
        p.weight[ids] = p.weight[ids] - self._lr * grad / (torch.sqrt(s) + self._eps)


class SparseAdam(_SparseOptimizer):
    """Adam on the rows a step touched, each row with its own step count."""

    _STATES = (("step", ()), ("mem", None), ("power", None))

    def __init__(self, params, lr, betas=(0.9, 0.999), eps=1e-08):
        self._beta1, self._beta2 = float(betas[0]), float(betas[1])
        self._eps = float(eps)
        super().__init__(params, lr, {"_eps": self._eps, "_beta1": self._beta1, "_beta2": self._beta2})

    def _update(self, p, state, ids, grad):
        m = self._beta1 * state["mem"][ids] + (1 - self._beta1) * grad
        v = self._beta2 * state["power"][ids] + (1 - self._beta2) * grad * grad
        t = state["step"][ids] + 1
        state["mem"][ids] = m
        state["power"][ids] = v
        state["step"][ids] = t
        t = t.unsqueeze(1)
        m_hat = m / (1 - torch.pow(torch.tensor(self._beta1), t))
        v_hat = v / (1 - torch.pow(torch.tensor(self._beta2), t))
        p.weight[ids] = p.weight[ids] - self._lr * m_hat / (torch.sqrt(v_hat) + self._eps)
