"""dgld addition: checkpoints of a DGL-style training script, and resuming
from them (docs/reliability.md, "Checkpoints").

    ckpt = dgld.distributed.Checkpointer(
        args.checkpoint_dir, model=model, optimizer=optimizer,
        embeddings=[emb], sparse_optimizers=[emb_optimizer],
        loaders=[dataloader], every_steps=20)
    start_epoch = ckpt.restore()[0]        # (0, 0) on a fresh start
    for epoch in range(start_epoch, args.num_epochs):
        for step, (input_nodes, seeds, blocks) in ckpt.batches(dataloader, epoch):
            ...                            # one training step
        ...                                # the epoch's evaluation

The files, their sealing (temporary name, fsync, CRC-32, rename), which
checkpoint counts (the newest every trainer holds intact), refusing a
truncated or altered one with its path and reason, and pruning are
common/checkpoint_store's, the same code as trainer-host's (dgld._C.
CheckpointStore). A checkpoint holds, per trainer: the model's and the
optimiser's state_dict, torch's and Python's random state, the seed of each
loader's order and sampling, and the rows of each DistEmbedding that this
trainer owns with their sparse optimiser state (the owner rule of the sparse
optimisers: every row is saved by one trainer, once). Resuming at step S of
an epoch runs that epoch's batches S, S+1, ... of the same order, so the
epoch covers every training node once.

Under dgl-launch --max-restarts, a restarted job (DGLD_RESTART > 0) resumes
by itself from restore(); rank 0 tells dgl-launch of each checkpoint every
trainer holds ("dgld-progress" lines on stderr), so a job that fails again
without a new checkpoint is not restarted in a loop.

Replicas (replicas=K, default 1): once a position is committed, each
trainer's two files go to a trainer on each of the K machines after its own
(ip_config order) over torch.distributed (send/recv of byte tensors in the
script's process group) and are kept, verified, in `<directory>/replica/`
there; restore() agrees on the newest position whose files of every rank
are held on some machine and hands a rank without its own (a spare, a wiped
disk) its files from a holder. So a spare can take a lost machine's place
with each machine's checkpoints on its own disk; with replicas=0 the
directory must be on storage every machine sees.
"""

import json
import logging
import os
import random
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as tdist

from .. import _C
from .._errors import Corruption, InvalidArgument, Timeout
from .dist_context import _client
from .dist_dataloader import _EpochLoader
from .nn.pytorch.sparse_emb import DistEmbedding
from .optim.pytorch.sparse_optim import _SparseOptimizer, owned_ids

__all__ = ["Checkpointer"]

_FORMAT = "dgld-python-checkpoint-1"
_log = logging.getLogger("dgld.checkpoint")
_TAG = 0x434B  # the point-to-point transfers of checkpoint files ("CK")
_TRANSFER_TIMEOUT = timedelta(seconds=600)  # as the commit barrier's


def _world():
    if tdist.is_available() and tdist.is_initialized():
        return tdist.get_rank(), tdist.get_world_size()
    return 0, 1


class Checkpointer:
    """Saves and restores a training script's state under `directory`
    (one subdirectory per trainer rank).

    every_steps: save after every that many steps of an epoch (0: never
    mid-epoch); every_epochs: save at the end of every that many epochs;
    replicas: copies of each trainer's committed checkpoint on that many
    other machines (0: none; the module's docstring)."""

    def __init__(self, directory, model=None, optimizer=None, embeddings=(), sparse_optimizers=(), loaders=(),
                 every_steps=0, every_epochs=1, replicas=1):
        if int(every_steps) < 0 or int(every_epochs) < 0 or int(replicas) < 0:
            raise InvalidArgument(f"Checkpointer: every_steps ({every_steps}), every_epochs ({every_epochs}) and "
                                  f"replicas ({replicas}) must be >= 0")
        self.replicas = int(replicas)
        self._machines = None  # the machine of each rank, once asked
        self._client = _client()
        self.rank, self.world = _world()
        if self.world != self._client.num_trainers:
            raise InvalidArgument(f"Checkpointer: the job has {self._client.num_trainers} trainers, but "
                                  f"torch.distributed has {self.world} processes; call "
                                  "torch.distributed.init_process_group before creating it")
        self.model, self.optimizer = model, optimizer
        self.embeddings = [embeddings] if isinstance(embeddings, DistEmbedding) else list(embeddings)
        self.sparse_optimizers = ([sparse_optimizers] if isinstance(sparse_optimizers, _SparseOptimizer)
                                  else list(sparse_optimizers))
        self.loaders = [loaders] if isinstance(loaders, _EpochLoader) else list(loaders)
        for e in self.embeddings:
            if not isinstance(e, DistEmbedding):
                raise InvalidArgument(f"Checkpointer: embeddings must be DistEmbeddings, got {type(e).__name__}")
            if not e.weight.part_policy.is_node:
                raise InvalidArgument(f"Checkpointer: DistEmbedding {e.name!r} is partitioned by edges; only "
                                      "node embeddings (one row per node) are checkpointed")
        for o in self.sparse_optimizers:
            for p in o._params:
                if p not in self.embeddings:
                    raise InvalidArgument(f"Checkpointer: the sparse optimiser of {p.name!r} is given, but not the "
                                          "DistEmbedding itself (add it to embeddings)")
        self.every_steps, self.every_epochs = int(every_steps), int(every_epochs)
        self.directory = str(directory)
        self._store = _C.CheckpointStore(self.directory, self.rank)
        self._store.prepare()
        self._owned = {}  # embedding name -> the ids of its rows this rank saves and loads
        self._resume_epoch, self._resume_step = 0, 0  # where restore() found the job

    # ------------------------------------------------------------------ saving

    def batches(self, loader, epoch):
        """(step, batch) of `loader`'s epoch `epoch`, from the step restore()
        returned when it is that epoch; saves after every `every_steps`
        steps and at the end of the epoch (every `every_epochs` epochs). A
        step is saved when the next batch is asked for, that is after the
        training step of the batch before it."""
        if not isinstance(loader, _EpochLoader):
            raise InvalidArgument(f"Checkpointer.batches: expected a DistNodeDataLoader or DistEdgeDataLoader, got "
                                  f"{type(loader).__name__}")
        epoch = int(epoch)
        first = self._resume_step if epoch == self._resume_epoch else 0
        num = len(loader)
        for step, batch in enumerate(loader._iter_from(epoch, first), start=first):
            yield step, batch
            if self.every_steps and (step + 1) % self.every_steps == 0 and step + 1 < num:
                self.save(epoch, step + 1)
        if self.every_epochs and (epoch + 1) % self.every_epochs == 0:
            self.save(epoch + 1, 0)

    def save(self, epoch, step=0):
        """Saves the position (epoch, step): the next step to run is step
        `step` of epoch `epoch` (the end of epoch E is (E + 1, 0)).
        Collective: every trainer calls it with the same position."""
        pos = (int(epoch), int(step))
        tmp = self._store.temp_payload_path(pos)
        try:
            torch.save(self._payload(), tmp)
        except BaseException:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise
        self._store.seal(pos, tmp, json.dumps(self._meta()))
        # Committed once every trainer holds it; then the older ones can go.
        self._client.barrier(f"dgld.checkpoint.{pos[0]}.{pos[1]}", 600.0)
        self._store.prune(pos)
        _log.info("checkpoint of %s written to %s", _C.position_str(pos), self._store.dir)
        self._replicate(pos)
        self._announce("checkpoint", pos)

    # ---------------------------------------------------------------- replicas

    def _machine_of_rank(self):
        """Each rank's machine (collective the first time)."""
        if self._machines is None:
            t = torch.zeros(self.world, dtype=torch.int64)
            t[self.rank] = self._client.machine_id
            if self.world > 1:
                tdist.all_reduce(t)
            self._machines = [int(m) for m in t.tolist()]
        return self._machines

    def _exchange(self, sends, recvs, what):
        """Posts every (rank, byte tensor) send and receive, then waits for each."""
        works = [(f"{t.numel()} bytes from rank {r}", tdist.irecv(t, src=r, tag=_TAG)) for r, t in recvs]
        works += [(f"{t.numel()} bytes to rank {r}", tdist.isend(t, dst=r, tag=_TAG)) for r, t in sends]
        for desc, work in works:
            try:
                done = work.wait(_TRANSFER_TIMEOUT)
            except RuntimeError as e:
                raise Timeout(f"{what}: {desc} failed (a trainer died or hangs): {str(e).splitlines()[0]}") from e
            if done is False:
                raise Timeout(f"{what}: {desc} did not complete within {_TRANSFER_TIMEOUT.total_seconds():.0f} s")

    @staticmethod
    def _pack(payload, meta):
        return torch.frombuffer(bytearray(payload + meta), dtype=torch.uint8)

    def _replicate(self, pos):
        """After every rank committed `pos`: this rank's files to its replica
        holders, and the replicas this rank holds received and verified."""
        if self.world == 1 or self.replicas == 0:
            return
        machines = self._machine_of_rank()
        if not _C.replica_holders(machines, 0, self.replicas):
            return  # one machine: nowhere else to keep them (the same answer on every rank)
        t0 = time.monotonic()
        holders = _C.replica_holders(machines, self.rank, self.replicas)
        sources = _C.replicas_held_by(machines, self.rank, self.replicas)
        payload, meta = self._store.read(pos)
        sizes = torch.zeros((self.world, 2), dtype=torch.int64)
        sizes[self.rank] = torch.tensor([len(payload), len(meta)])
        tdist.all_reduce(sizes)
        packed = self._pack(payload, meta)
        recvs = [(s, torch.empty(int(sizes[s].sum()), dtype=torch.uint8)) for s in sources]
        what = f"replicating the checkpoint of {_C.position_str(pos)}"
        self._exchange([(h, packed) for h in holders], recvs, what)
        for s, t in recvs:
            raw, n = t.numpy().tobytes(), int(sizes[s, 0])
            store = _C.CheckpointStore.replica(self.directory, s)
            try:
                store.adopt(pos, raw[:n], raw[n:], f"rank {s} (machine {machines[s]})")
            except Corruption as e:  # the job goes on; this copy does not count
                _log.warning("%s; rank %d's checkpoint has no replica on this machine", e, s)
                continue
            store.prune(pos)
        _log.info("checkpoint of %s replicated in %.3f s: %d bytes to rank(s) %s, replicas of rank(s) %s held",
                  _C.position_str(pos), time.monotonic() - t0, packed.numel() * len(holders), holders, sources)

    def _fetch(self, pos, source):
        """The files of `pos` sent by their holders to the ranks without their own."""
        transfers = [(to, frm) for to, frm in enumerate(source) if frm != to]
        if not transfers:
            return
        machines = self._machine_of_rank()
        what = f"fetching the checkpoint of {_C.position_str(pos)} from the machines holding it"
        sizes = torch.zeros((self.world, 2), dtype=torch.int64)
        sends = []
        for to, frm in transfers:
            if frm != self.rank:
                continue
            try:
                payload, meta = _C.CheckpointStore.replica(self.directory, to).read(pos)
            except Exception as e:  # told to every rank below
                _log.error("%s: %s", what, e)
                sizes[to, 0] = -1
                continue
            sizes[to] = torch.tensor([len(payload), len(meta)])
            sends.append((to, self._pack(payload, meta)))
        tdist.all_reduce(sizes)
        recvs = []
        for to, frm in transfers:
            if int(sizes[to, 0]) < 0:
                raise Corruption(f"{what}: rank {frm} (machine {machines[frm]}) could not read its replica of rank "
                                 f"{to} (its log says why)")
            if to == self.rank:
                recvs.append((frm, torch.empty(int(sizes[to].sum()), dtype=torch.uint8)))
        t0 = time.monotonic()
        self._exchange(sends, recvs, what)
        for frm, t in recvs:
            raw, n = t.numpy().tobytes(), int(sizes[self.rank, 0])
            sender = f"rank {frm}'s replica (machine {machines[frm]})"
            self._store.adopt(pos, raw[:n], raw[n:], sender)
            _log.warning("no intact checkpoint of %s in %s: fetched from %s (%d bytes, %.3f s) and verified",
                      _C.position_str(pos), self._store.dir, sender, t.numel(), time.monotonic() - t0)

    def _meta(self):
        return {"format": _FORMAT, "num_trainers": self.world,
                "embeddings": {e.name: [e.num_embeddings, e.embedding_dim] for e in self.embeddings},
                "loaders": len(self.loaders)}

    def _owned_ids(self, emb):
        if emb.name not in self._owned:
            self._owned[emb.name] = owned_ids(emb, self.rank) if self.world > 1 else \
                torch.arange(emb.num_embeddings, dtype=torch.int64)
        return self._owned[emb.name]

    def _row_tensors(self, emb):
        """(key, DistTensor) of every per-row tensor saved with `emb`: its
        weight and its sparse optimisers' state ("SparseAdam.mem", ...)."""
        yield "weight", emb.weight
        for o in self.sparse_optimizers:
            for p, state in o._row_states():
                if p is emb:
                    for name, t in state.items():
                        yield f"{type(o).__name__}.{name}", t

    def _payload(self):
        emb_state = {}
        for e in self.embeddings:
            ids = self._owned_ids(e)
            emb_state[e.name] = {"ids": ids, "rows": {key: t[ids] for key, t in self._row_tensors(e)}}
        return {
            "model": self.model.state_dict() if self.model is not None else None,
            "optimizer": self.optimizer.state_dict() if self.optimizer is not None else None,
            "torch_rng": torch.get_rng_state(),
            "python_rng": random.getstate(),
            "loader_seeds": [ld.seed for ld in self.loaders],
            "embeddings": emb_state,
        }

    def _announce(self, event, pos):
        if self.rank == 0 and os.environ.get("DGLD_JOB_ID"):
            print(_C.progress_line(event, pos), file=sys.stderr, flush=True)

    # ---------------------------------------------------------------- resuming

    def restore(self):
        """Loads the newest checkpoint every trainer holds intact and returns
        its (epoch, step); (0, 0) when there is none. A checkpoint found
        truncated or altered is refused (logged with its path and reason)
        and an older one used. Collective."""
        held, refused = self._store.valid()
        # Every rank's files this rank holds: its own and any replicas here.
        everything = [[] for _ in range(self.world)]
        everything[self.rank] = [tuple(p) for p in held]
        for r in range(self.world):
            replica = _C.CheckpointStore.replica(self.directory, r)
            if r != self.rank and os.path.isdir(replica.dir):
                positions, bad = replica.valid()
                everything[r] = [tuple(p) for p in positions]
                refused += bad
        for path, reason in refused:
            if reason.startswith(path + ": "):
                reason = reason[len(path) + 2:]
            _log.warning("refused checkpoint %s: %s", path, reason)
        agreed, source = self._agree(everything)
        if agreed is None:
            return (0, 0)
        if held and tuple(held[0]) > agreed:
            _log.warning("resuming from %s: the newer %s in %s is not held intact by every trainer",
                         _C.position_str(agreed), _C.position_str(held[0]), self._store.dir)
        self._fetch(agreed, source)
        meta = json.loads(self._store.verify(agreed))
        self._check_meta(meta, self._store.meta_path(agreed))
        path = self._store.payload_path(agreed)
        payload = torch.load(path)
        self._load(payload, path)
        # No trainer reads another's rows before that trainer wrote them back.
        self._client.barrier(f"dgld.checkpoint.restored.{agreed[0]}.{agreed[1]}", 600.0)
        self._resume_epoch, self._resume_step = agreed
        _log.info("resumed from the checkpoint of %s in %s", _C.position_str(agreed), self._store.dir)
        self._announce("resumed", agreed)
        return agreed

    def _agree(self, held):
        """The newest position whose files of every rank some rank holds
        (each offers its newest few of each rank), and the rank that has
        each rank's files there."""
        offer = torch.tensor(_C.checkpoint_offer(held), dtype=torch.int64)
        table = torch.zeros((self.world, offer.numel()), dtype=torch.int64)
        table[self.rank] = offer
        if self.world > 1:
            tdist.all_reduce(table)
        agreed, source = _C.agreed_from_offers(table.flatten().tolist(), self.world, self.directory,
                                               "its checkpoint directory", "Checkpointer's replicas")
        return (None, []) if agreed is None else (tuple(agreed), source)

    def _check_meta(self, meta, path):
        want = self._meta()
        for key in ("format", "num_trainers", "embeddings", "loaders"):
            have = meta.get(key)
            if have != want[key]:
                raise InvalidArgument(f"{path}: the checkpoint has {key} = {json.dumps(have)}, but this run has "
                                      f"{json.dumps(want[key])} (a checkpoint of another job; use another directory)")

    def _load(self, payload, path):
        if self.model is not None:
            if payload["model"] is None:
                raise InvalidArgument(f"{path}: the checkpoint holds no model, but a model was given")
            self.model.load_state_dict(payload["model"])
        if self.optimizer is not None and payload["optimizer"] is not None:
            self.optimizer.load_state_dict(payload["optimizer"])
        torch.set_rng_state(payload["torch_rng"])
        random.setstate(payload["python_rng"])
        for ld, seed in zip(self.loaders, payload["loader_seeds"]):
            ld._reseed(seed)
        for e in self.embeddings:
            saved = payload["embeddings"][e.name]
            ids, rows = saved["ids"], saved["rows"]
            if not torch.equal(ids, self._owned_ids(e)):
                raise InvalidArgument(f"{path}: the rows of {e.name!r} it holds are not the ones rank {self.rank} "
                                      "owns in this job (another partitioning or trainer count)")
            for key, t in self._row_tensors(e):
                if key not in rows:
                    raise InvalidArgument(f"{path}: no {key} state for {e.name!r} (the checkpoint was "
                                          "written with another sparse optimiser)")
                t[ids] = rows[key]
