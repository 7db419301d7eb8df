"""Heterogeneous graphs in Python: DistGraph's ntypes, etypes,
canonical_etypes, per-type counts, and g.nodes[ntype].data indexed by that
type's ids (DGL's API), over a typed graph (hsbm with reverse relations)
partitioned by dgl-partition and served by two graph-servers."""

import json
import subprocess
import sys
import tempfile

from conftest import Job

SCRIPT = r"""
import json, torch
import dgld, dgld.distributed as dist

dist.initialize({ip!r})
g = dist.DistGraph('g', part_config={part!r})
out = {{
    "ntypes": g.ntypes, "etypes": g.etypes, "canonical": [list(c) for c in g.canonical_etypes],
    "homogeneous": g.is_homogeneous(), "num_nodes": g.num_nodes(),
    "papers": g.num_nodes("paper"), "authors": g.num_nodes("author"),
    "writes": g.num_edges("writes"), "edges": g.num_edges(),
}}
feat = g.nodes["paper"].data["features"]
out["feat_shape"] = list(feat.shape)
# Per-type ids 0 .. n-1 of papers, through the homogeneous ids and back.
ids = torch.arange(g.num_nodes("paper"))
hom = g.to_homogeneous_ids("paper", ids)
types, back = g.to_type_wise_ids(hom)
out["round_trip"] = bool(torch.equal(back, ids)) and bool((types == g.ntypes.index("paper")).all())
# g.nodes['paper'].data['features'][i] is paper i's row in the partition files.
rows = feat[ids]
out["rows"] = list(rows.shape)
out["rows_equal"] = True
for p in range(2):
    gids, part_rows = dgld._C._partition_node_tensor({part!r}, p, "paper/features")
    _, tw = g.to_type_wise_ids(gids)
    out["rows_equal"] &= bool(torch.equal(rows[tw], part_rows))
labels = g.nodes["paper"].data["labels"][ids]
out["labels_ok"] = bool(((labels >= 0) & (labels < 8)).all())
try:
    g.nodes["journal"]
    out["unknown_type"] = "no error"
except Exception as e:
    out["unknown_type"] = str(e)
try:
    feat[torch.tensor([g.num_nodes("paper")])]
    out["out_of_range"] = "no error"
except Exception as e:
    out["out_of_range"] = str(e)
# Writes go to the type's rows.
mask = g.nodes["paper"].data["train_mask"]
before = mask[torch.tensor([0, 1])].clone()
mask[torch.tensor([0, 1])] = torch.tensor([1, 0], dtype=torch.uint8)
out["written"] = mask[torch.tensor([0, 1])].tolist()
mask[torch.tensor([0, 1])] = before
print("RESULT " + json.dumps(out))
dist.exit_client()
"""


def test_distgraph_types_and_per_type_data():
    with tempfile.TemporaryDirectory(prefix="dgld-pytest-hetero-") as d:
        job = Job(d, graph="hsbm:papers=1200,authors=500,venues=16,topics=30,feat_dim=8,seed=5",
                  part_flags=("--add-reverse",))
        try:
            code = SCRIPT.format(ip=job.ip_config, part=job.part_config)
            r = subprocess.run([sys.executable, "-c", code], cwd=job.root, env=job.env(0, 0, 1),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240)
            cfg = json.load(open(job.part_config))
        finally:
            job.stop()
    assert r.returncode == 0, r.stdout[-4000:]
    res = json.loads(next(line for line in r.stdout.splitlines() if line.startswith("RESULT "))[7:])
    assert res["ntypes"] == ["paper", "author", "venue", "topic"]
    assert "writes" in res["etypes"] and "rev-writes" in res["etypes"]
    assert ["author", "writes", "paper"] in res["canonical"]
    assert res["homogeneous"] is False
    assert res["papers"] == 1200 and res["authors"] == 500
    assert res["num_nodes"] == sum(e - s for ranges in cfg["node_map"].values() for s, e in ranges)
    assert res["writes"] == cfg["dgld"]["etype_counts"][cfg["etypes"]["author:writes:paper"]]
    assert res["edges"] == cfg["num_edges"]
    assert res["feat_shape"] == [1200, 8] and res["rows"] == [1200, 8]
    assert res["round_trip"] and res["rows_equal"] and res["labels_ok"]
    assert "'journal' is not a node type" in res["unknown_type"]
    assert "out of range" in res["out_of_range"]
    assert res["written"] == [1, 0]
