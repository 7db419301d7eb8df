"""This process's membership in a dgld job (DGL's
dgl.distributed.dist_context): initialize() with every DGL version's
signature, the connection to the graph-servers (made once, as a trainer, or
as one of a trainer's sampler processes), the job's partition book, and
leaving the job (exit_client).

The lowest module of dgld.distributed with a state: dist_tensor, the
embedding, the loaders and dist_graph import it; of them it imports only
graph_partition_book. What must happen once the trainer has joined
(starting its sampler processes) registers itself with
on_trainer_connect(), what must happen before the client leaves (stopping
them) with on_exit(). dgld._client is this module under its old name.
"""

import atexit
import json
import logging
import operator
import os
import sys
import shutil
import signal
import socket
import tempfile
import threading

from .. import _C
from .._errors import DGLError, InvalidArgument, NotFound
from .graph_partition_book import GraphPartitionBook

_state = {"ip_config": None, "client": None, "book": None, "options": {}, "interrupted": False,
          "role": "trainer", "group": -1, "standalone": False, "server": None, "scratch": None,
          "sigterm_handler": None}
_exit_hooks = []
_connect_hooks = []
_DEFAULT_TIMEOUT_S = 600.0

# DGL's default max_queue_size (bytes of its client queue; 20 GiB).
MAX_QUEUE_SIZE = 20 * 1024 * 1024 * 1024

# A second positional argument below this is DGL 0.5-0.9's num_servers; at or
# above it DGL 1.x-2.x's max_queue_size (bytes).
_SMALL_INT = 1 << 20

_OLD_ORDER = ("num_servers", "num_workers", "max_queue_size", "net_type", "num_worker_threads")
_NEW_ORDER = ("max_queue_size", "net_type", "num_worker_threads", "use_graphbolt")
_DGL_KEYWORDS = frozenset(_OLD_ORDER + _NEW_ORDER)
_DGLD_KEYWORDS = frozenset(("part_config", "connect_timeout_s", "call_timeout_s"))


def _env_int(name, default):
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise InvalidArgument(f"environment variable {name}={value!r} is not an integer") from None


def _is_int(value):
    try:
        operator.index(value)
    except TypeError:
        return False
    return not isinstance(value, bool)


def _int_arg(name, value, low):
    if not _is_int(value) or operator.index(value) < low:
        raise InvalidArgument(f"initialize: {name} must be an integer >= {low}, got {value!r}")
    return operator.index(value)


_log = logging.getLogger("dgld")
_graphbolt_noted = []


def note_graphbolt(where):
    """DGL 2.x's use_graphbolt=True (initialize, partition_graph,
    load_partition): accepted and served by dgld's own sampling, said once
    per process."""
    if not _graphbolt_noted:
        _graphbolt_noted.append(where)
        _log.warning("%s(use_graphbolt=True): dgld samples with its own C++ sampler over dgl-partition's "
                     "partitions (GraphBolt is not used; the batches are drawn as DGL's sampler draws them)", where)


def initialize_options(args=(), kwargs=None):
    """initialize()'s arguments after ip_config as one dict of dgld's
    options. Positional arguments follow DGL 0.5-0.9's order (num_servers,
    num_workers, max_queue_size, net_type, num_worker_threads) when the first
    is a small integer, else DGL 1.x-2.x's (max_queue_size, net_type,
    num_worker_threads, use_graphbolt). TypeError for what Python would
    refuse (an unknown keyword, one given twice), InvalidArgument for a value
    dgld cannot honour or that contradicts dgl-launch."""
    kwargs = dict(kwargs or {})
    if args:
        first = args[0]
        old = _is_int(first) and 0 <= operator.index(first) < _SMALL_INT
        order = _OLD_ORDER if old else _NEW_ORDER
        if len(args) > len(order):
            raise TypeError(f"initialize() takes at most {len(order) + 1} positional arguments in DGL "
                            f"{'0.5-0.9' if old else '1.x-2.x'}'s order ({', '.join(('ip_config',) + order)}), "
                            f"got {len(args) + 1}")
        for name, value in zip(order, args):
            if name in kwargs:
                raise TypeError(f"initialize() got multiple values for argument {name!r}")
            kwargs[name] = value
    unknown = sorted(set(kwargs) - _DGL_KEYWORDS - _DGLD_KEYWORDS)
    if unknown:
        raise TypeError(f"initialize() got an unexpected keyword argument {unknown[0]!r}")

    if kwargs.get("use_graphbolt"):
        note_graphbolt("initialize")
    net_type = kwargs.get("net_type")
    if net_type not in (None, "socket", "tensorpipe"):
        raise InvalidArgument(f"initialize: net_type must be 'socket' or 'tensorpipe' (both ignored: dgld has "
                              f"its own transport), got {net_type!r}")
    if kwargs.get("max_queue_size") is not None:
        _int_arg("max_queue_size", kwargs["max_queue_size"], 1)
    threads = _int_arg("num_worker_threads", kwargs.get("num_worker_threads", 1), 1)

    num_servers = kwargs.get("num_servers")
    num_servers = _env_int("DGL_NUM_SERVER", 1) if num_servers is None else _int_arg("num_servers", num_servers, 1)
    launched = _env_int("DGL_NUM_SAMPLER", None)
    if launched is not None and launched < 0:
        raise InvalidArgument(f"DGL_NUM_SAMPLER={launched} must be >= 0")
    num_workers = kwargs.get("num_workers")
    if num_workers is None:
        num_workers = launched if launched is not None else 0
    else:
        num_workers = _int_arg("num_workers", num_workers, 0)
        if launched is not None and launched != num_workers:
            raise InvalidArgument(f"initialize(num_workers={num_workers}) but dgl-launch --num-samplers {launched} "
                                  f"(DGL_NUM_SAMPLER={launched}): they must agree")
    return {
        "num_servers": num_servers,
        "num_workers": num_workers,
        "num_worker_threads": threads,
        "part_config": kwargs.get("part_config"),
        "connect_timeout_s": float(kwargs.get("connect_timeout_s", 30.0)),
        "call_timeout_s": float(kwargs.get("call_timeout_s", 60.0)),
    }


def standalone_mode(ip_config=None):
    """Whether this process runs DGL's standalone mode: DGL_DIST_MODE is
    'standalone', or (DGL's default) it is unset in a process no launcher
    started (no DGL_ROLE, no DGLD_JOB_ID) whose ip_config does not exist."""
    mode = os.environ.get("DGL_DIST_MODE", "")
    if mode:
        if mode not in ("standalone", "distributed"):
            raise InvalidArgument(f"DGL_DIST_MODE={mode!r}: expected 'standalone' or 'distributed'")
        return mode == "standalone"
    launched = os.environ.get("DGL_ROLE") or os.environ.get("DGLD_JOB_ID")
    ip_config = ip_config or os.environ.get("DGL_IP_CONFIG")
    return not launched and not (ip_config and os.path.isfile(ip_config))


def initialize(ip_config=None, *args, **kwargs):
    """Joins the job described by ip_config (DGL's dgl.distributed.initialize).

    Takes every DGL version's signature: DGL 0.5-0.9's (ip_config,
    num_servers=1, num_workers=0, max_queue_size, net_type,
    num_worker_threads) and DGL 1.x-2.x's (ip_config, max_queue_size,
    net_type, num_worker_threads, use_graphbolt=False); dgld's own keywords
    part_config, connect_timeout_s (30) and call_timeout_s (60).

    - ip_config defaults to $DGL_IP_CONFIG; num_servers to $DGL_NUM_SERVER or 1.
    - num_workers: sampler processes that run DistDataLoader's collate_fn
      (0: it runs in this process). Defaults to $DGL_NUM_SAMPLER (dgl-launch
      --num-samplers), which it must equal when both are given.
    - num_worker_threads: torch threads in each sampler process.
    - max_queue_size and net_type ('socket', 'tensorpipe') are accepted and
      ignored (dgld has its own transport); use_graphbolt=True is refused.

    When the partition config is known here ($DGL_CONF_PATH, as dgl-launch
    sets it, or part_config) the process connects to every graph-server now;
    otherwise when DistGraph is created.

    Standalone mode (standalone_mode(): DGL_DIST_MODE=standalone): no
    servers, no launcher, ip_config unused; DistGraph serves its one
    partition from this process (a graph-server in a thread of its own on a
    private loopback port, reached through the same calls)."""
    options = initialize_options(args, kwargs)
    if _state["client"] is not None:
        raise DGLError("dgld.distributed.initialize was called twice in this process")
    if standalone_mode(ip_config):
        if options["num_workers"] > 0:
            raise InvalidArgument("standalone mode runs no sampler processes: num_workers must be 0, got "
                                  f"{options['num_workers']}")
        _state["standalone"] = True
        _state["ip_config"] = os.fspath(ip_config) if ip_config else ""
        _state["options"] = options
        part_config = options["part_config"]
        if part_config:
            _connect(part_config)
        return
    _state["standalone"] = False  # an earlier standalone run in this process is over
    ip_config = _launcher_ip_config(ip_config)
    if ip_config is not None:
        ip_config = os.fspath(ip_config)
    if not ip_config:
        raise InvalidArgument("initialize needs ip_config (or DGL_IP_CONFIG in the environment)")
    if not os.path.isfile(ip_config):
        raise NotFound(f"ip_config file {ip_config!r} does not exist")
    _state["ip_config"] = ip_config
    _state["options"] = options
    part_config = options["part_config"] or os.environ.get("DGL_CONF_PATH")
    if part_config:
        _connect(part_config)


def _launcher_ip_config(ip_config):
    """The ip_config to read: the argument, else $DGL_IP_CONFIG. In an
    attempt dgl-launch restarted after a spare took a lost machine's place
    ($DGLD_RESTART > 0), the launcher's $DGL_IP_CONFIG (its copy with the
    spare's line) wins over the path the script names: a script that names
    its file literally instead of taking --ip_config would otherwise read the
    lost machine's address (or, on the spare, no file at all)."""
    launched = os.environ.get("DGL_IP_CONFIG")
    if not ip_config:
        return launched
    restarted = os.environ.get("DGLD_RESTART", "0") not in ("", "0")
    if restarted and launched and os.path.abspath(launched) != os.path.abspath(os.fspath(ip_config)):
        print(f"dgld: initialize({os.fspath(ip_config)!r}): using {launched} instead, dgl-launch's ip_config for "
              "this attempt (a spare took a lost machine's place)", file=sys.stderr, flush=True)
        return launched
    return ip_config


def _connect(part_config):
    """Connects this process as a trainer (once; later calls return the client)."""
    if _state["client"] is not None:
        return _state["client"]
    if _state["ip_config"] is None:
        raise DGLError("call dgld.distributed.initialize(ip_config) before creating a DistGraph")
    part_config = os.fspath(part_config)
    if _state["standalone"]:
        return _connect_standalone(part_config)
    o = _client_options(part_config)
    o.machine_id = _env_int("DGLD_MACHINE_ID", -1)
    o.rank = _env_int("DGLD_TRAINER_RANK", -1)
    o.num_trainers = _env_int("DGLD_NUM_TRAINERS", 0)
    o.job_id = os.environ.get("DGLD_JOB_ID", "")
    client = _open(o, part_config)
    for hook in list(_connect_hooks):
        hook()
    return client


def part_config_from_servers():
    """The partition config the job's servers loaded (machine 0's main
    server says which): DGL's DistGraph takes the graph from the servers
    when it is given no config. An error naming the path when this machine
    has no file there."""
    if _state["ip_config"] is None:
        raise DGLError("call dgld.distributed.initialize(ip_config) before creating a DistGraph")
    if _state["standalone"]:
        raise InvalidArgument("standalone mode needs part_config (DistGraph(name, part_config=...)): there are no "
                              "servers to ask")
    info = _C.query_graph_info(_state["ip_config"], os.environ.get("DGLD_SECRET_FILE", ""),
                               _state["options"]["connect_timeout_s"])
    path = info["part_config"]
    if not path:
        raise InvalidArgument("the graph-servers did not say which partition config they loaded (an older dgld): "
                              "pass part_config to DistGraph or set DGL_CONF_PATH")
    if not os.path.isfile(path):
        raise NotFound(f"the graph-servers loaded the partition config {path!r}, which this machine does not have: "
                       "pass part_config to DistGraph or set DGL_CONF_PATH")
    return path


def _free_loopback_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _connect_standalone(part_config):
    """Standalone mode: a graph-server for the config's one partition in this
    process, on a loopback port of its own with a secret of its own, and this
    process its only trainer."""
    if not os.path.isfile(part_config):
        raise NotFound(f"partition config {part_config!r} does not exist")
    with open(part_config) as f:
        num_parts = json.load(f).get("num_parts")
    if num_parts != 1:
        raise InvalidArgument(f"standalone mode serves one partition, but {part_config} has {num_parts}: partition "
                              "the graph with num_parts=1, or run the job with dgl-launch")
    scratch = tempfile.mkdtemp(prefix="dgld-standalone-")
    _state["scratch"] = scratch
    ip_config = os.path.join(scratch, "ip_config.txt")
    secret = os.path.join(scratch, "secret")
    _C.write_new_secret_file(secret)
    job_id = f"standalone-{os.getpid()}-{os.path.basename(scratch).rsplit('-', 1)[-1]}"
    last = None
    for _ in range(5):  # another process may take the port between its choice and the bind
        with open(ip_config, "w") as f:
            f.write(f"127.0.0.1 {_free_loopback_port()}\n")
        so = _C.GraphServerOptions()
        so.part_config, so.ip_config = part_config, ip_config
        so.server_id, so.num_servers, so.num_clients, so.num_samplers = 0, 1, 1, 0
        so.job_id = job_id
        so.set_secret_file(secret)
        try:
            _state["server"] = _C.GraphServer(so)
            break
        except DGLError as e:
            last = e
            if "cannot listen" not in str(e):
                raise
    else:
        raise last
    _state["ip_config"] = ip_config
    _stop_on_sigterm()
    o = _client_options(part_config)
    o.machine_id, o.rank, o.num_trainers = 0, 0, 1
    o.job_id = job_id
    o.secret_file = secret
    return _open(o, part_config)


def _stop_on_sigterm():
    """Standalone mode's server lives in this process, with shared memory
    that only its stop removes: SIGTERM (kill, a scheduler's time limit)
    becomes SystemExit, so exit_client runs on the way out instead of the
    segments staying in /dev/shm. Left alone when the script has a SIGTERM
    handler of its own, or off the main thread (where none can be set)."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def on_sigterm(signum, frame):
        _state["interrupted"] = True
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends the process at once
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_sigterm)
    _state["sigterm_handler"] = on_sigterm


def _client_options(part_config):
    if not os.path.isfile(part_config):
        raise NotFound(f"partition config {part_config!r} does not exist")
    o = _C.ClientOptions()
    o.ip_config = _state["ip_config"]
    o.part_config = part_config
    o.num_servers = _state["options"]["num_servers"]
    o.connect_timeout_s = _state["options"]["connect_timeout_s"]
    o.call_timeout_s = _state["options"]["call_timeout_s"]
    return o


def _open(o, part_config):
    client = _C.Client(o)
    _state["client"] = client
    _state["book"] = GraphPartitionBook(client.partition_book())
    _state["part_config"] = part_config
    atexit.register(exit_client)
    return client


def sampler_spec():
    """What a sampler process of this trainer needs to join the job as one
    (plain values, picklable)."""
    c = _client()
    o = _state["options"]
    return {"ip_config": os.path.abspath(_state["ip_config"]), "part_config": os.path.abspath(_state["part_config"]),
            "machine_id": c.machine_id, "trainer_rank": c.rank, "num_trainers": c.num_trainers,
            "job_id": c.job_id, "options": dict(o)}


def join_as_sampler(spec):
    """Connects this process (a trainer's sampler process) to the job as a
    sampler of that trainer (its group), with the trainer's options."""
    if _state["client"] is not None:
        raise DGLError("this process is connected to a dgld job already")
    _state["ip_config"] = spec["ip_config"]
    _state["options"] = dict(spec["options"], num_workers=0)
    _state["role"] = "sampler"
    _state["group"] = spec["trainer_rank"]
    o = _client_options(spec["part_config"])
    o.role = "sampler"
    o.group = spec["trainer_rank"]
    o.rank = -1
    o.machine_id = spec["machine_id"]
    o.num_trainers = spec["num_trainers"]
    o.job_id = spec["job_id"]
    return _open(o, spec["part_config"])


def _client():
    c = _state["client"]
    if c is None:
        raise DGLError("not connected to a dgld job: call dgld.distributed.initialize(ip_config) and create a "
                       "DistGraph first")
    return c


def partition_book():
    """The job's GraphPartitionBook (this machine's partition's view)."""
    _client()
    return _state["book"]


def trainer_rank():
    """This trainer's rank; in a sampler process, the rank of its trainer."""
    return _state["group"] if _state["role"] == "sampler" else _client().rank


def num_sampler_workers():
    """initialize()'s num_workers (0 before initialize and in a sampler process)."""
    return _state["options"].get("num_workers", 0) if _state["ip_config"] is not None else 0


def option(name):
    return _state["options"][name]


def is_initialized():
    return _state["ip_config"] is not None


def on_trainer_connect(hook):
    """hook() runs when this process has joined a job of servers as a
    trainer (not in standalone mode)."""
    if hook not in _connect_hooks:
        _connect_hooks.append(hook)


def launched_by_dgl_launch():
    """Whether dgl-launch started this process (it names the job)."""
    return bool(os.environ.get("DGLD_JOB_ID"))


def on_exit(hook):
    """hook() runs when this process leaves the job, before its client closes."""
    if hook not in _exit_hooks:
        _exit_hooks.append(hook)


def exit_client():
    """Leaves the job (at exit, or when called). Idempotent. Sampler
    processes are stopped first. After Ctrl-C the connections are dropped at
    once instead (nothing waits for a deadline on the way out)."""
    for hook in list(_exit_hooks):
        try:
            hook()
        except Exception:  # noqa: BLE001 - leaving must go on; the hook reports its own trouble
            pass
    c = _state["client"]
    if c is not None:
        _state["client"] = None
        _state["book"] = None
        try:
            c.close(abort=_state["interrupted"])
        except DGLError:
            pass  # the servers may already be gone at exit
    server = _state["server"]
    if server is not None:  # standalone mode's: it goes with its only client
        _state["server"] = None
        server.stop("standalone mode's client left")
        del server
    if _state["scratch"] is not None:
        shutil.rmtree(_state["scratch"], ignore_errors=True)
        _state["scratch"] = None
    if _state.get("sigterm_handler") is not None:
        if signal.getsignal(signal.SIGTERM) is _state["sigterm_handler"]:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        _state["sigterm_handler"] = None
    _state["standalone"] = False
    _state["part_config"] = None  # the next initialize starts a new job (DGL's tests run several per process)


def _interrupted():
    _state["interrupted"] = True
