"""torch.distributed's env:// rendezvous through dgld's store.

A training script of a dgld job (started by dgl-launch, which sets
DGLD_JOB_ID, MASTER_ADDR/MASTER_PORT = machine 0's base port + 900, RANK and
WORLD_SIZE) calls torch.distributed.init_process_group(backend="gloo") as
DGL's scripts do. Torch would serve that rendezvous with its TCPStore, which
takes any connection without a word; with dgld imported it goes through the
store trainer-host uses (client/rendezvous_store.h): rank 0 serves it, every
connection authenticates with the job's secret (DGLD_SECRET_FILE), and a
stranger, a replayed handshake or random bytes are refused with a log line
naming the peer. Once the group has formed, its Gloo pairs prove the secret
over themselves as trainer-host's do (prove_pairs; unlike trainer-host, a
failed proof is an error, not another try: torch forms the group). Outside a
dgld job torch's own handler runs unchanged.
"""

import datetime
import functools
import importlib
import os
from urllib.parse import parse_qs, urlparse

import torch
import torch.distributed as dist

# The module, not the function torch.distributed exports under the same name.
_torch_rendezvous = importlib.import_module("torch.distributed.rendezvous")

from .. import _C
from .._errors import DGLError

# Rank 0's server, and every store handed to torch: torch keeps only the C++
# part of a Python store (in the PrefixStore it wraps it in), and the methods
# defined here are found through the Python object, so it must stay alive.
_state = {"torch_env_handler": None, "servers": [], "stores": [], "torch_init": None}

# How long a pair's proof may take once the group has formed (its pairs are connected).
PAIR_PROOF_TIMEOUT = datetime.timedelta(seconds=10)


class RendezvousStore(dist.Store):
    """A torch.distributed.Store over dgld._C.RendezvousClient: what the
    process group's construction and its barriers read and write."""

    def __init__(self, host, port, secret_file="", timeout=datetime.timedelta(seconds=60)):
        super().__init__()
        self._client = _C.RendezvousClient.connect(host, int(port), secret_file, timeout.total_seconds())
        self._client.set_timeout(timeout.total_seconds())

    def _deadline(self):
        self._client.set_timeout(self.timeout.total_seconds())

    def set(self, key, value):
        self._client.set(key, value if isinstance(value, bytes) else str(value).encode())

    def get(self, key):
        self._deadline()
        return self._client.get(key)

    def add(self, key, value):
        return self._client.add(key, int(value))

    def compare_set(self, key, expected, desired):
        return self._client.compare_set(key, expected, desired)

    compareSet = compare_set

    def check(self, keys):
        return self._client.check(list(keys))

    def delete_key(self, key):
        return self._client.delete_key(key)

    deleteKey = delete_key

    def num_keys(self):
        return self._client.num_keys()

    getNumKeys = num_keys

    def wait(self, keys, timeout=None):
        timeout = self.timeout if timeout is None else timeout
        self._client.wait(list(keys), timeout.total_seconds())


def _dgld_env_handler(url, timeout=datetime.timedelta(minutes=30), **kwargs):
    if not os.environ.get("DGLD_JOB_ID"):
        yield from _state["torch_env_handler"](url, timeout, **kwargs)
        return
    query = {k: v[-1] for k, v in parse_qs(urlparse(url).query).items()}

    def setting(name, env):
        value = query.get(name) or os.environ.get(env)
        if not value:
            raise ValueError(f"env:// rendezvous: environment variable {env} expected, but not set "
                             "(dgl-launch sets it for every trainer)")
        return value

    rank = int(setting("rank", "RANK"))
    world_size = int(setting("world_size", "WORLD_SIZE"))
    host, port = setting("master_addr", "MASTER_ADDR"), int(setting("master_port", "MASTER_PORT"))
    secret = os.environ.get("DGLD_SECRET_FILE", "")
    if rank == 0:
        # Lives as long as this process: the group's later barriers meet in it.
        _state["servers"].append(_C.RendezvousServer.start(host, port, secret))
    store = RendezvousStore(host, port, secret, timeout)
    _state["stores"].append(store)
    yield (store, rank, world_size)
    raise DGLError("env:// rendezvous: dgld's store does not re-rendezvous; start the job again")


def prove_pairs():
    """Every trainer sends every other one its proof of the job's secret over
    their Gloo pair (dgld._C.pair_proof, trainer-host's rule) and checks what
    arrives: Gloo's connections have no handshake, and a stranger who took a
    pair's port while the group formed would otherwise sit in the allreduce.
    A proof that does not verify raises, naming the rank."""
    secret = os.environ.get("DGLD_SECRET_FILE", "")
    if not secret or not _state["stores"]:
        return
    store, rank, world = _state["stores"][-1], dist.get_rank(), dist.get_world_size()
    key = _C.pair_proof_session_key
    if rank == 0:
        store.set(key, os.urandom(32))
    session = store.get(key)
    works, received = [], {}
    for peer in range(world):
        if peer == rank:
            continue
        mine = torch.frombuffer(bytearray(_C.pair_proof(secret, session, rank, peer)), dtype=torch.uint8)
        received[peer] = torch.zeros(mine.numel(), dtype=torch.uint8)
        works.append((peer, dist.irecv(received[peer], src=peer)))
        works.append((peer, dist.isend(mine, dst=peer)))
    for peer, work in works:
        if not work.wait(PAIR_PROOF_TIMEOUT):
            raise DGLError(f"proving the Gloo pairs hold the job's secret: nothing from rank {peer} within "
                           f"{PAIR_PROOF_TIMEOUT.total_seconds():.0f} s")
    for peer, got in received.items():
        if not _C.pair_proof_matches(secret, session, peer, rank, got.numpy().tobytes()):
            raise DGLError(f"the Gloo connection from rank {peer} did not prove the job's secret (a stranger "
                           "connected to this trainer's Gloo port while the group formed?); refusing to train "
                           "with it")


def _init_process_group(*args, **kwargs):
    result = _state["torch_init"](*args, **kwargs)
    if os.environ.get("DGLD_JOB_ID") and _state["stores"] and dist.get_backend() == "gloo":
        prove_pairs()
    return result


def install():
    """Routes env:// (init_process_group's default) through dgld's store in
    a dgld job. Torch has no public way to replace a registered handler, so
    its registry is updated in place; a torch without one keeps TCPStore."""
    handlers = getattr(_torch_rendezvous, "_rendezvous_handlers", None)
    if not isinstance(handlers, dict) or "env" not in handlers:
        return False
    if handlers["env"] is not _dgld_env_handler:
        _state["torch_env_handler"] = handlers["env"]
        handlers["env"] = _dgld_env_handler
    # The pairs' proofs once the default group has formed (prove_pairs).
    if _state["torch_init"] is None:
        _state["torch_init"] = dist.init_process_group
        wrapped = functools.wraps(dist.init_process_group)(_init_process_group)
        dist.init_process_group = wrapped
        dist.distributed_c10d.init_process_group = wrapped
    return True
