"""The distributed loaders as DGL's tests/distributed/test_mp_dataloader.py
drives them: graph-servers started with DGL's DistGraphServer in spawned
processes (no dgl-launch), several "machines" of the ip_config on this one
host and no DGLD_MACHINE_ID (the trainer takes the first line, as DGL's
client does), a DistGraph named other than the partitioned graph, and
DGL_NUM_SAMPLER set for the trainer only:
- with DGL_NUM_SAMPLER=K the servers count 1 + K clients (DGL's
  num_clients) and stop once all have left; the trainer's K sampler
  processes start with it, as DGL's initialize() starts them, so a trainer
  that uses only DistNodeDataLoader (dgld's C++ sampling) still lets the
  servers stop."""

import os
import subprocess
import sys

from conftest import BUILD, free_port_block, generate_parts

GRAPH = "sbm:nodes=3000,avg_degree=8,classes=4,feat_dim=8,seed=3"
# Not under dgl-launch: none of its variables.
ENV = {k: v for k, v in os.environ.items() if not k.startswith(("DGLD_", "DGL_"))}
ENV.update(PYTHONPATH=str(BUILD / "python"), OMP_NUM_THREADS="1")

SCRIPT = """
import multiprocessing as mp, os, sys, torch
import dgld as dgl
from dgld.distributed import DistGraphServer

CONFIG, K = sys.argv[1], int(sys.argv[2])

def serve(sid):
    DistGraphServer(sid, "ip.txt", 1, K + 1, CONFIG).start()
    os.write(1, f"server {sid} returned\\n".encode())

def train():
    dgl.distributed.initialize("ip.txt")
    g = dgl.distributed.DistGraph("another_name", part_config=CONFIG)
    sampler = dgl.dataloading.MultiLayerNeighborSampler([5, 10])
    loader = dgl.dataloading.DistNodeDataLoader(g, torch.arange(200), sampler, batch_size=32, shuffle=True,
                                                num_workers=K)
    seeds = torch.cat([out for _, out, _ in loader])
    assert torch.equal(seeds.sort().values, torch.arange(200))
    dgl.distributed.exit_client()
    os.write(1, b"trainer done\\n")

if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    servers = [ctx.Process(target=serve, args=(i,)) for i in range(2)]
    for p in servers:
        p.start()
    os.environ["DGL_DIST_MODE"] = "distributed"
    os.environ["DGL_NUM_SAMPLER"] = str(K)  # after the servers started, as DGL's tests set it
    trainer = ctx.Process(target=train)
    trainer.start()
    trainer.join(150)
    assert trainer.exitcode == 0, trainer.exitcode
    for p in servers:
        p.join(30)
    print("servers alive", [p.is_alive() for p in servers], flush=True)
    for p in servers:
        if p.is_alive():
            p.terminate()
            p.join(20)
"""


def test_servers_counting_sampler_processes_stop_after_a_node_loader_trainer(tmp_path):
    config = generate_parts(tmp_path / "p2", GRAPH)
    base = free_port_block(20)
    (tmp_path / "ip.txt").write_text(f"127.0.0.1 {base}\n127.0.0.1 {base + 10}\n")
    (tmp_path / "mp.py").write_text(SCRIPT)
    r = subprocess.run([sys.executable, "mp.py", str(config), "2"], cwd=tmp_path, env=ENV, text=True,
                       capture_output=True, timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "trainer done" in r.stdout, r.stdout
    assert "servers alive [False, False]" in r.stdout, (r.stdout, r.stderr[-3000:])
    assert "taking machine 0, the first" in r.stderr  # two lines of ip.txt are this host
    assert r.stderr.count("registered sampler") == 2, r.stderr[-3000:]
