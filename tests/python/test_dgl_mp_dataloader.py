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
  servers stop.
- DistEdgeDataLoader on a typed graph gives DGL's typed pair graphs."""

import os
import subprocess
import sys

from conftest import BUILD, free_port_block, generate_parts, run_result

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


TYPED_EDGE_SCRIPT = r"""
import json, torch
import dgld as dgl, dgld.distributed as dist

dist.initialize({ip!r})
g = dist.DistGraph('g', part_config={part!r})
cw = ("author", "writes", "paper")
eids = torch.arange(100)
src, dst = g.find_edges(eids, etype=cw)
edges = sorted(zip(src.tolist(), dst.tolist()))
sampler = dgl.dataloading.MultiLayerNeighborSampler([3, 3])
loader = dgl.dataloading.DistEdgeDataLoader(g, {{"writes": eids}}, sampler, batch_size=32, shuffle=True,
                                            negative_sampler=dgl.dataloading.negative_sampler.Uniform(2))
out = {{"types": True, "dst_match": True, "neg": True, "block_edges": True, "others_empty": True}}
seen = []
for input_nodes, pos, neg, blocks in loader:
    out["types"] &= set(pos.ntypes) == set(g.ntypes) and set(input_nodes) == set(g.ntypes)
    u, v = pos.edges(etype=cw)
    a, p = pos.nodes["author"].data[dgl.NID], pos.nodes["paper"].data[dgl.NID]
    seen += list(zip(a[u].tolist(), p[v].tolist()))
    out["others_empty"] &= all(pos.num_edges(c) == 0 for c in pos.canonical_etypes if c != cw)
    nu, nv = neg.edges(etype=cw)
    out["neg"] &= neg.num_edges() == 2 * pos.num_edges() and bool(torch.equal(nu, u.repeat_interleave(2)))
    out["neg"] &= bool((neg.nodes["paper"].data[dgl.NID][nv] < g.num_nodes("paper")).all())
    last = blocks[-1]
    for t in g.ntypes:
        out["dst_match"] &= bool(torch.equal(last.dstnodes[t].data[dgl.NID], pos.nodes[t].data[dgl.NID]))
        out["dst_match"] &= bool(torch.equal(last.dstnodes[t].data[dgl.NID], neg.nodes[t].data[dgl.NID]))
    bu, bv = last.edges(etype=cw)
    if bu.numel():
        fu, fv = g.find_edges(last.edges[cw].data[dgl.EID], etype=cw)
        out["block_edges"] &= bool(torch.equal(fu, last.srcnodes["author"].data[dgl.NID][bu])) and \
            bool(torch.equal(fv, last.dstnodes["paper"].data[dgl.NID][bv]))
out["every_edge_once"] = sorted(seen) == edges
try:
    dgl.dataloading.DistEdgeDataLoader(g, eids, sampler, batch_size=32)
    out["untyped"] = "no error"
except Exception as e:
    out["untyped"] = str(e)
print("RESULT " + json.dumps(out))
dist.exit_client()
"""


def test_typed_edge_loader_gives_dgl_typed_pair_graphs():
    """DistEdgeDataLoader on a typed graph (DGL's test_dataloader[edge] and
    test_neg_dataloader on their random heterograph): training edges as
    {etype: per-type ids}; the pair graphs typed as DGL's (every node type,
    the seeds of each type as the last block's destination nodes, the
    positive edges under their type, none under the others); negatives of
    an edge type drawn among its destination type's nodes."""
    res = run_result(TYPED_EDGE_SCRIPT, graph="hsbm:papers=600,authors=300,venues=8,topics=20,feat_dim=8,seed=3",
                     part_flags=("--add-reverse",), prefix="dgld-pytest-typed-edges-")
    for key in ("types", "dst_match", "neg", "block_edges", "others_empty", "every_edge_once"):
        assert res[key] is True, (key, res)
    assert "several edge types" in res["untyped"], res["untyped"]
