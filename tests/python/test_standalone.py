"""DGL's standalone mode and DGL's DistGraphServer on dgld
(dgld/distributed/dist_context.py, dist_graph_server.py), each in a process
of its own as DGL's scripts and tests run them:
- DGL_DIST_MODE=standalone: a script on a 1-partition graph with no servers
  and no launcher (an ip_config that does not exist, as DGL's tests pass):
  DistGraph, node data, a new DistTensor, node_split, a loader; nothing left
  in /dev/shm; a graph of 2 partitions is refused by name.
- DistGraphServer in spawned processes (DGL's tests, GraphStorm): client_g
  and the partition book before start(); start() serves until the job's
  clients have all left, then returns; keep_alive keeps it up; a trainer
  that gives DistGraph no config gets the servers'."""

import os
import subprocess
import sys
import textwrap

import pytest
from conftest import BUILD, binary, free_port_block

ENV = dict(os.environ, PYTHONPATH=str(BUILD / "python"), OMP_NUM_THREADS="1")
GRAPH = "sbm:nodes=3000,avg_degree=8,classes=4,feat_dim=8,seed=3"


def parts(out, n):
    subprocess.run([binary("partition/dgl-partition"), "--log-level", "warn", "--generate", GRAPH, "--num-parts",
                    str(n), "--graph-name", "g", "--output", str(out)], check=True, stdout=subprocess.DEVNULL)
    return out / "g.json"


def run(code, cwd, env=None, timeout=120):
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=env or ENV, text=True,
                       capture_output=True, timeout=timeout)
    return r.returncode, r.stdout, r.stderr


def shm_of(pid_marker):
    return [f for f in os.listdir("/dev/shm") if pid_marker in f]


def test_standalone_mode_runs_a_script_on_one_partition_without_servers(tmp_path):
    config = parts(tmp_path / "p1", 1)
    rc, out, err = run(f"""
        import os, torch
        os.environ["DGL_DIST_MODE"] = "standalone"
        import dgld as dgl
        dgl.distributed.initialize("kv_ip_config.txt")  # does not exist: unused in standalone mode
        g = dgl.distributed.DistGraph("g", part_config={str(config)!r})
        assert g.num_nodes() == 3000 and g.ndata["features"][torch.arange(4)].shape == (4, 8)
        t = dgl.distributed.DistTensor((g.num_nodes(), 2), torch.float32, "t")
        t[torch.arange(3)] = torch.ones(3, 2)
        assert t[torch.arange(4)].sum().item() == 6
        nids = dgl.distributed.node_split(g.ndata["train_mask"], g.get_partition_book())
        loader = dgl.dataloading.DistNodeDataLoader(g, nids, dgl.dataloading.NeighborSampler([5, 5]),
                                                    batch_size=100)
        seeds = sum(len(out) for _, out, _ in loader)
        assert seeds == len(nids) > 0, (seeds, len(nids))
        # DGL's bool DistTensors, their | and count_nonzero (DGL's test_dist_tensor).
        m1 = dgl.distributed.DistTensor((g.num_edges(),), torch.bool, init_func=lambda s, d: torch.randn(s) > 0)
        m2 = dgl.distributed.DistTensor((g.num_edges(),), torch.bool, init_func=lambda s, d: torch.randn(s) > 0)
        m3 = m1 | m2
        assert m3.dtype == torch.bool and m1[0:10].dtype == torch.bool
        every = torch.arange(g.num_edges())
        assert torch.equal(m3[every], m1[every] | m2[every])
        assert m1.count_nonzero() == int(m1[every].sum()) > 0
        print("PID", os.getpid())
        dgl.distributed.exit_client()
        print("OK")
    """, tmp_path)
    assert rc == 0 and "OK" in out, err[-3000:]
    pid = out.split("PID ")[1].split()[0]
    assert shm_of(f"standalone-{pid}-") == []


def test_standalone_mode_refuses_a_graph_of_several_partitions(tmp_path):
    config = parts(tmp_path / "p2", 2)
    rc, out, err = run(f"""
        import dgld as dgl
        dgl.distributed.initialize("none.txt")
        dgl.distributed.DistGraph("g", part_config={str(config)!r})
    """, tmp_path, env=dict(ENV, DGL_DIST_MODE="standalone"))
    assert rc != 0 and "standalone mode serves one partition" in err and "has 2" in err, err[-2000:]


SERVER_SCRIPT = """
import multiprocessing as mp, os, sys, torch
import dgld as dgl
from dgld.distributed import DistGraphServer

def serve(sid, keep_alive):
    s = DistGraphServer(sid, "ip.txt", 1, 2, sys.argv[1], keep_alive=keep_alive)
    assert s.part_id == sid and not s.is_backup_server() and s.gpb.partid == sid
    assert s.client_g.num_nodes() > 1000
    s.start()
    os.write(1, f"server {sid} returned\\n".encode())  # one write: the two servers' lines do not interleave

def train(rank):
    os.environ["DGL_DIST_MODE"] = "distributed"
    os.environ["DGLD_MACHINE_ID"] = str(rank)
    dgl.distributed.initialize("ip.txt")
    # Trainer 1 gives no config: DGL's DistGraph takes the graph from the servers.
    g = dgl.distributed.DistGraph("g", part_config=sys.argv[1] if rank == 0 else None)
    assert g.ndata["features"][torch.arange(3000)].shape == (3000, 8)
    dgl.distributed.exit_client()

if __name__ == "__main__":
    keep_alive = sys.argv[2] == "keep"
    ctx = mp.get_context("spawn")
    servers = [ctx.Process(target=serve, args=(i, keep_alive)) for i in range(2)]
    clients = [ctx.Process(target=train, args=(r,)) for r in range(2)]
    for p in servers + clients:
        p.start()
    for p in clients:
        p.join(60)
        assert p.exitcode == 0, p.exitcode
    for p in servers:
        p.join(2 if keep_alive else 20)  # keep_alive: still up after 2 s
    print("servers alive", [p.is_alive() for p in servers], flush=True)
    for p in servers:
        if p.is_alive():
            p.terminate()
            p.join(20)
"""


@pytest.mark.parametrize("keep_alive", [False, True])
def test_dist_graph_servers_in_spawned_processes_serve_until_their_clients_leave(tmp_path, keep_alive):
    config = parts(tmp_path / "p2", 2)
    base = free_port_block(20)
    (tmp_path / "ip.txt").write_text(f"127.0.0.1 {base}\n127.0.0.1 {base + 10}\n")
    (tmp_path / "serve.py").write_text(SERVER_SCRIPT)
    r = subprocess.run([sys.executable, "serve.py", str(config), "keep" if keep_alive else "leave"], cwd=tmp_path,
                       env=ENV, text=True, capture_output=True, timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    if keep_alive:
        assert "servers alive [True, True]" in r.stdout, r.stdout
    else:
        assert "server 0 returned" in r.stdout and "server 1 returned" in r.stdout, r.stdout
        assert "servers alive [False, False]" in r.stdout, r.stdout


def test_a_dist_graph_server_whose_clients_never_come_stops_with_an_error(tmp_path):
    # DGL's server waits forever for the num_clients it was told of; dgld's
    # (keep_alive False) gives up after client_wait_s without a connected
    # client, naming how many came, so a harness whose trainer died first
    # gets an error instead of a server process that never exits.
    config = parts(tmp_path / "p1", 1)
    base = free_port_block(10)
    (tmp_path / "ip.txt").write_text(f"127.0.0.1 {base}\n")
    code, out, err = run(f"""
        import time
        import dgld
        from dgld.distributed import DistGraphServer
        s = DistGraphServer(0, "ip.txt", 1, 2, {str(config)!r})
        s.client_wait_s = 1.5
        t = time.monotonic()
        try:
            s.start()
            print("returned")
        except dgld.DGLError as e:
            print(type(e).__name__, round(time.monotonic() - t), e)
        """, tmp_path)
    assert code == 0, err[-3000:]
    assert out.startswith("Timeout"), out
    assert "0 of the 2 clients the job expects came" in out and "none connected for 1 s" in out, out
    assert int(out.split()[1]) <= 5, out


def test_standalone_mode_killed_with_sigterm_leaves_no_shared_memory(tmp_path):
    """A standalone script ended by SIGTERM (kill, a scheduler's limit) stops
    its in-process server on the way out: exit status 143, nothing of its job
    left in /dev/shm."""
    import signal
    import time

    config = parts(tmp_path / "p1", 1)
    code = textwrap.dedent(f"""
        import os, sys, time, torch
        os.environ["DGL_DIST_MODE"] = "standalone"
        import dgld as dgl
        dgl.distributed.initialize("kv_ip_config.txt")
        g = dgl.distributed.DistGraph("g", part_config={str(config)!r})
        t = dgl.distributed.DistTensor((g.num_nodes(), 2), torch.float32, "t")
        print("READY", flush=True)
        time.sleep(120)
        """)
    p = subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path, env=ENV, text=True, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)
    try:
        lines = []
        while not lines or lines[-1] != "READY":
            line = p.stdout.readline()
            assert line, "".join(lines)
            lines.append(line.strip())
        marker = f"standalone-{p.pid}-"
        assert shm_of(marker), "the in-process server made no shared memory: nothing to check"
        p.send_signal(signal.SIGTERM)
        out = p.communicate(timeout=60)[0]
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
            for f in shm_of(f"standalone-{p.pid}-"):  # SIGKILL leaves them: this test's own
                os.unlink(f"/dev/shm/{f}")
    deadline = time.time() + 5
    while shm_of(marker) and time.time() < deadline:
        time.sleep(0.1)
    left = shm_of(marker)
    for f in left:  # removed before failing, so one failure does not leave them behind
        os.unlink(f"/dev/shm/{f}")
    assert p.returncode == 143, out
    assert left == [], out
