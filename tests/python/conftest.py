"""pytest support for the dgld Python package: a 2-machine job on loopback
(a generated graph cut into 2 partitions by dgl-partition, one graph-server
per partition) started once per session, and this test process joined to it
as trainer 0 on machine 0. Every process started here is stopped by PID.

The package and the binaries come from the build directory:
DGLD_BUILD_ROOT (set by meson test), else <repo>/build."""

import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("DGLD_BUILD_ROOT", REPO / "build"))
sys.path.insert(0, str(BUILD / "python"))

GRAPH = "sbm:nodes=3000,avg_degree=8,classes=4,feat_dim=8,seed=3"


def binary(path):
    p = BUILD / path
    if not p.exists():
        pytest.fail(f"{p} is missing: build first (ninja -C {BUILD})")
    return str(p)


def generate_parts(out, graph, name="g", flags=()):
    """dgl-partition --generate `graph` into 2 partitions under `out`; the
    partition config's path."""
    subprocess.run([binary("partition/dgl-partition"), "--log-level", "warn", "--generate", graph,
                    "--num-parts", "2", "--graph-name", name, "--output", str(out), *flags],
                   check=True, stdout=subprocess.DEVNULL)
    return Path(out) / f"{name}.json"


def free_port_block(span=20):
    """A base port with `span` free ports above it (probed by binding), below
    the kernel's ephemeral range as tests/support/process.cpp picks them: a
    port from that range that is free now can be taken as the local port of
    any outgoing connection before a graph-server binds it (a busy machine
    left no block of 20 free ephemeral ports in 200 tries)."""
    ephemeral_lo = 32768
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            ephemeral_lo = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    lo, width = 10000, ephemeral_lo - 1000 - 10000
    if width < 2000:
        lo, width = 20000, 30000
    rng = random.Random()
    for _ in range(200):
        base = lo + rng.randrange(width)
        ok = True
        for p in range(base, base + span):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", p))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError("no block of free ports")


class Job:
    """Graph-servers of a 2-machine job; `stop()` ends them by PID."""

    def __init__(self, root, graph=GRAPH, name="g", part_flags=()):
        self.root = Path(root)
        self.parts = self.root / "parts"
        self.part_config = str(generate_parts(self.parts, graph, name, part_flags))
        self.name = name
        base = free_port_block()
        self.ip_config = str(self.root / "ip_config.txt")
        with open(self.ip_config, "w") as f:
            f.write(f"127.0.0.1 {base}\n127.0.0.1 {base + 10}\n")
        self.job_id = f"pytest-{os.getpid()}-{base}"
        self.servers = []
        for m in range(2):
            log = open(self.root / f"server{m}.log", "w")
            self.servers.append(subprocess.Popen(
                [binary("daemons/graph_server/graph-server"), "--part-config", self.part_config, "--ip-config",
                 self.ip_config, "--server-id", str(m), "--job-id", self.job_id, "--heartbeat-interval-ms", "200",
                 "--heartbeat-timeout-ms", "10000"], stdout=log, stderr=subprocess.STDOUT))
        deadline = time.time() + 60
        for m in range(2):
            while "listening on" not in (self.root / f"server{m}.log").read_text():
                if self.servers[m].poll() is not None or time.time() > deadline:
                    raise RuntimeError(f"graph-server {m} did not start:\n"
                                       + (self.root / f"server{m}.log").read_text())
                time.sleep(0.05)

    def env(self, machine, rank, num_trainers):
        e = dict(os.environ)
        e.update({"PYTHONPATH": str(BUILD / "python"), "DGLD_MACHINE_ID": str(machine),
                  "DGLD_TRAINER_RANK": str(rank), "DGLD_NUM_TRAINERS": str(num_trainers),
                  "DGLD_JOB_ID": self.job_id, "PYTHONUNBUFFERED": "1"})
        return e

    def stop(self):
        for p in self.servers:
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.terminate()
        for p in self.servers:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        # A server killed with SIGKILL (a test of a dead peer) cannot remove
        # its shared memory; as dgl-launch does after a job, so does the test.
        for seg in Path("/dev/shm").glob(f"dgld.{self.job_id}.*"):
            seg.unlink(missing_ok=True)


def run_trainers(job, codes, timeout=120):
    """Runs codes[r] (a python -c script) as trainer r of len(codes) on
    machine r of job, with torch.distributed's variables set; returns their
    outputs. Kills them all and fails, with their output, past timeout."""
    port = free_port_block(2)
    procs = []
    for rank, code in enumerate(codes):
        env = job.env(rank, rank, len(codes))
        env.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank),
                    "WORLD_SIZE": str(len(codes))})
        procs.append(subprocess.Popen([sys.executable, "-c", code], cwd=job.root, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    try:
        outs = [p.communicate(timeout=timeout)[0] for p in procs]
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        outs = [p.communicate()[0] for p in procs]
        raise AssertionError(f"the trainers did not finish within {timeout} s:\n" + "\n----\n".join(outs))
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out
    return outs


def run_result(script, graph=GRAPH, part_flags=(), prefix="dgld-pytest-", timeout=240):
    """Partitions `graph`, starts its two graph-servers and runs `script`
    (formatted with ip= and part=) as trainer 0 of 1; returns the dict the
    script printed on its line starting with 'RESULT ' (as JSON). Fails with
    the script's output when it exits non-zero."""
    with tempfile.TemporaryDirectory(prefix=prefix) as d:
        job = Job(d, graph=graph, part_flags=part_flags)
        try:
            code = script.format(ip=job.ip_config, part=job.part_config)
            r = subprocess.run([sys.executable, "-c", code], cwd=job.root, env=job.env(0, 0, 1),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
        finally:
            job.stop()
    assert r.returncode == 0, r.stdout[-4000:]
    return json.loads(next(line for line in r.stdout.splitlines() if line.startswith("RESULT "))[7:])


@pytest.fixture(scope="session")
def job():
    with tempfile.TemporaryDirectory(prefix="dgld-pytest-") as d:
        j = Job(d)
        try:
            yield j
        finally:
            j.stop()


@pytest.fixture(scope="session")
def g(job):
    """The job's DistGraph, with this process as trainer 0 of 1 on machine 0."""
    os.environ.update({"DGLD_MACHINE_ID": "0", "DGLD_TRAINER_RANK": "0", "DGLD_NUM_TRAINERS": "1", "DGLD_JOB_ID": job.job_id})
    import dgld.distributed as dist
    dist.initialize(job.ip_config)
    graph = dist.DistGraph(job.name, part_config=job.part_config)
    yield graph
    dist.exit_client()
