"""The Python example under dgl-launch (2 machines x 1 trainer, DDP over
gloo), and what a script sees when something goes wrong: a dead server is
an error naming it within the call deadline, Ctrl-C stops a script waiting
for a batch at once, a wrong part_config path is an error before anything
is contacted."""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import torch

from conftest import BUILD, REPO, Job, binary, free_port_block, generate_parts, run_trainers


def run_script(job, code, timeout=60, **popen):
    return subprocess.Popen([sys.executable, "-c", code], cwd=job.root, env=job.env(0, 0, 1),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **popen)


def wait_ready(p):
    """Reads the script's output up to its 'ready' line (log lines come first)."""
    seen = []
    for line in p.stdout:
        if line.strip() == "ready":
            return
        seen.append(line)
    raise AssertionError("the script ended before 'ready':\n" + "".join(seen))


PRELUDE = """
import time, torch
import dgld, dgld.distributed as dist
dist.initialize({ip!r}, call_timeout_s={call_timeout})
g = dist.DistGraph('g', part_config={part!r})
"""


@pytest.fixture
def own_job():
    with tempfile.TemporaryDirectory(prefix="dgld-pytest-own-") as d:
        j = Job(d)
        try:
            yield j
        finally:
            j.stop()


def test_example_trains_under_dgl_launch():
    with tempfile.TemporaryDirectory(prefix="dgld-pytest-launch-") as d:
        d = Path(d)
        generate_parts(d / "parts", "sbm:nodes=6000,avg_degree=10,classes=4,feat_dim=16,seed=2")
        base = free_port_block(910)
        (d / "ip_config.txt").write_text(f"127.0.0.1 {base}\n127.0.0.1 {base + 10}\n")
        cmd = [binary("launcher/launch/dgl-launch"), "--local", "--no-copy", "--workspace", str(d),
               "--ip-config", "ip_config.txt", "--part-config", "parts/g.json", "--num-trainers", "1",
               "--extra-envs", f"PYTHONPATH={BUILD / 'python'}", "--",
               sys.executable, str(REPO / "examples/python/train_dist.py"), "--graph_name", "g",
               "--ip_config", "ip_config.txt", "--part_config", "parts/g.json", "--num_epochs", "6", "--batch_size", "100",
               "--eval_every", "0", "--lr", "0.01", "--log_every", "0", "--seed", "1", "--metrics_out", "metrics.json"]
        r = subprocess.run(cmd, cwd=d, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240)
        assert r.returncode == 0, r.stdout[-4000:]
        m = json.loads((d / "metrics.json").read_text())
        assert m["num_trainers"] == 2
        assert len(m["epochs"]) == 6
        assert m["epochs"][-1]["loss"] < m["epochs"][0]["loss"]
        assert m["test_acc"] > 0.5  # 4 classes: chance is 0.25
        assert "Part 0" in r.stdout and "Part 1" in r.stdout


def test_a_dead_server_is_an_error_naming_it_within_the_deadline(own_job):
    code = PRELUDE.format(ip=own_job.ip_config, part=own_job.part_config, call_timeout=3.0) + """
print('ready', flush=True)
input()
t0 = time.time()
try:
    g.ndata['features'][torch.tensor([2999])]   # owned by machine 1
    print('no error')
except dgld.DGLError as e:
    print(f'{type(e).__name__} after {time.time() - t0:.1f} s: {e}', flush=True)
"""
    p = run_script(own_job, code, stdin=subprocess.PIPE)
    wait_ready(p)
    own_job.servers[1].kill()
    own_job.servers[1].wait()
    out, _ = p.communicate("\n", timeout=60)
    assert p.returncode == 0, out
    line = [l for l in out.splitlines() if " after " in l]
    assert line, out
    assert ("Closed" in line[0] or "Timeout" in line[0]) and "graph-server 1" in line[0], line[0]
    assert float(line[0].split(" after ")[1].split(" s")[0]) < 10


def test_ctrl_c_stops_a_script_waiting_for_a_batch(own_job):
    code = PRELUDE.format(ip=own_job.ip_config, part=own_job.part_config, call_timeout=60.0) + """
ids = torch.arange(3000)
dl = dgld.dataloading.DistNodeDataLoader(g, ids, dgld.dataloading.NeighborSampler([5, 5]), batch_size=500)
print('ready', flush=True)
input()
try:
    for batch in dl:
        pass
    print('finished', flush=True)
except KeyboardInterrupt:
    print('interrupted', flush=True)
    raise
"""
    p = run_script(own_job, code, stdin=subprocess.PIPE)
    wait_ready(p)
    own_job.servers[1].send_signal(signal.SIGSTOP)  # every batch now waits for machine 1
    p.stdin.write("\n")
    p.stdin.flush()
    time.sleep(1.5)
    t0 = time.time()
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=30)
    took = time.time() - t0
    own_job.servers[1].send_signal(signal.SIGCONT)
    assert "interrupted" in out, out
    assert "KeyboardInterrupt" in out
    assert took < 5, f"the script took {took:.1f} s to stop after Ctrl-C"


def test_a_wrong_part_config_path_is_an_error_before_connecting(own_job):
    code = f"""
import dgld, dgld.distributed as dist
dist.initialize({own_job.ip_config!r})
try:
    dist.DistGraph('g', part_config='/no/such/dir/g.json')
except dgld.DGLError as e:
    print(type(e).__name__, e)
"""
    p = run_script(own_job, code)
    out, _ = p.communicate(timeout=60)
    assert "NotFound partition config '/no/such/dir/g.json' does not exist" in out, out


EMBEDDING_SCRIPT = """
import os, sys, torch, torch.distributed as tdist
import dgld, dgld.distributed as dist
rank = int(os.environ['RANK'])
dist.initialize({ip!r})
tdist.init_process_group('gloo')
g = dist.DistGraph('g', part_config={part!r})
emb = dist.DistEmbedding(g.num_nodes(), 4, name='pytest-emb', init_func=lambda s, d: torch.zeros(s, dtype=d))
opt = ({opt})([emb], lr=0.1)
c = torch.tensor([[1.0, -2.0, 0.5, 0.0]]) * (rank + 1)
ids = torch.tensor([5, 6]) if rank == 0 else torch.tensor([5, 2500])
for step in range(2):
    rows = emb(ids)
    (rows * c).sum().backward()
    opt.step()
    g.barrier()
    print('step', step, 'rows', emb.weight[torch.tensor([5, 6, 2500, 7])].tolist(), flush=True)
"""


@pytest.mark.parametrize("optimizer", ["SparseAdagrad", "SparseAdam"])
def test_dist_embedding_rows_follow_the_sparse_optimiser_across_trainers(own_job, optimizer):
    code = EMBEDDING_SCRIPT.format(ip=own_job.ip_config, part=own_job.part_config, opt=f"dist.{optimizer}")
    outs = run_trainers(own_job, [code, code])
    rows = [eval(l.split(" rows ")[1]) for l in outs[0].splitlines() if l.startswith("step ")]
    assert len(rows) == 2
    lr = 0.1
    # Row 5's gradient is the mean of both trainers' (c and 2c), row 6 rank 0's
    # (c), row 2500 rank 1's (2c), row 7 untouched. The first step of either
    # optimiser from zero state moves a row by lr * g / |g|: -lr * sign(g).
    sign = torch.sign(torch.tensor([1.0, -2.0, 0.5, 0.0]))
    for row in rows[0][:3]:
        torch.testing.assert_close(torch.tensor(row), -lr * sign, rtol=1e-4, atol=1e-6)
    assert rows[0][3] == [0.0, 0.0, 0.0, 0.0]
    if optimizer == "SparseAdagrad":
        # Second step, same gradient: state 2 g^2, so a further lr / sqrt(2) per element.
        want = -lr * sign * (1 + 1 / 2 ** 0.5)
    else:
        # Adam, second step with the same g: m_hat = g, v_hat = g^2 again.
        want = -2 * lr * sign
    for row in rows[1][:3]:
        torch.testing.assert_close(torch.tensor(row), want, rtol=1e-4, atol=1e-6)
