"""DistGraphServer (DGL's dgl.distributed.DistGraphServer): one graph-server
of a job, for launchers that start the servers themselves (DGL's own tests,
GraphStorm) instead of dgl-launch. It is dgld's graph-server, the library
the daemon is made of, run in this process: start() serves the partition
(KVStore in shared memory, sampling, graph queries, membership) until the
job's clients have all left (keep_alive=False, as DGL), a Shutdown request,
or Ctrl-C.

The constructor takes DGL's arguments; what DGL's server exposes to its
caller is here too: server_id, ip_config, num_servers, num_clients,
part_id, is_backup_server(), the partition book (gpb) and the partition's
graph (client_g, loaded on first use; None for a backup server).
disable_shared_mem, graph_format and net_type are accepted and have no
effect: dgld's servers always share their partition with the machine's
clients through shared memory, keep every format their requests need, and
speak their own protocol."""

import os
import signal
import threading

from .. import _C
from .._errors import InvalidArgument, NotFound
from .dist_context import note_graphbolt
from .partition import load_partition, load_partition_book

__all__ = ["DistGraphServer"]


def _positive_int(name, value, low):
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InvalidArgument(f"DistGraphServer: {name} must be an integer >= {low}, got {value!r}")
    return value


class DistGraphServer:
    """See the module's doc."""

    def __init__(self, server_id, ip_config, num_servers, num_clients, part_config, disable_shared_mem=False,
                 graph_format=("csc", "coo"), keep_alive=False, net_type="socket", use_graphbolt=False):
        self.server_id = _positive_int("server_id", server_id, 0)
        self.num_servers = _positive_int("num_servers", num_servers, 1)
        self.num_clients = _positive_int("num_clients", num_clients, 0)
        if use_graphbolt:  # DGL 2.x: served by dgld's own sampling
            note_graphbolt("DistGraphServer")
        # dgld addition: with keep_alive False, how long start() waits while no
        # client is connected and some of the num_clients never came, before it
        # raises a Timeout naming how many came (DGL's server waits forever).
        self.client_wait_s = 600.0
        self.ip_config = os.fspath(ip_config)
        self.part_config = os.fspath(part_config)
        for what, path in (("ip_config", self.ip_config), ("part_config", self.part_config)):
            if not os.path.isfile(path):
                raise NotFound(f"DistGraphServer: {what} file {path!r} does not exist")
        self.part_id = self.server_id // self.num_servers
        self.keep_alive = bool(keep_alive)
        self.disable_shared_mem = bool(disable_shared_mem)
        self.graph_format = graph_format
        self.net_type = net_type
        self.gpb, self.graph_name, self.ntypes, self.etypes = load_partition_book(self.part_config, self.part_id)
        self._client_g = None
        self._server = None

    def is_backup_server(self):
        """Whether this server attaches to its machine's main server's partition
        instead of loading it (DGL: server_id % num_servers != 0)."""
        return self.server_id % self.num_servers != 0

    @property
    def client_g(self):
        """The partition's graph as load_partition gives it (None for a
        backup server, as DGL's); loaded on first use."""
        if self.is_backup_server():
            return None
        if self._client_g is None:
            self._client_g = load_partition(self.part_config, self.part_id, load_feats=False)[0]
        return self._client_g

    def start(self):
        """Serves until the job's clients have all left (unless keep_alive),
        a Shutdown request, Ctrl-C or SIGTERM (both end it as a stop: the
        shared-memory segments it made are removed); raises if the server
        fails."""
        o = _C.GraphServerOptions()
        o.part_config, o.ip_config = self.part_config, self.ip_config
        o.server_id, o.num_servers, o.num_clients = self.server_id, self.num_servers, self.num_clients
        o.num_samplers = int(os.environ.get("DGL_NUM_SAMPLER", "0") or 0)
        o.job_id = os.environ.get("DGLD_JOB_ID", "")
        o.exit_when_clients_leave = not self.keep_alive
        o.client_wait_s = float(self.client_wait_s)
        secret = os.environ.get("DGLD_SECRET_FILE", "")
        if secret:
            o.set_secret_file(secret)
        self._server = _C.GraphServer(o)
        # SIGTERM (a launcher's terminate()) becomes SystemExit in serve(), so
        # the server stops and removes its segments instead of the process
        # dying with them left in /dev/shm.
        main = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGTERM, _exit_on_sigterm) if main else None
        try:
            self._server.serve()
        finally:
            if main:
                signal.signal(signal.SIGTERM, previous)
            server, self._server = self._server, None
            server.stop()
            del server


def _exit_on_sigterm(signum, frame):
    raise SystemExit(128 + signum)
