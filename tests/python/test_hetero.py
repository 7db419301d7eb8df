"""Heterogeneous graphs in Python: DistGraph's ntypes, etypes,
canonical_etypes, per-type counts, and g.nodes[ntype].data indexed by that
type's ids (DGL's API), over a typed graph (hsbm with reverse relations)
partitioned by dgl-partition and served by two graph-servers."""

import json
import subprocess
import sys
import tempfile

import pytest
import torch

from conftest import Job, run_result

SCRIPT = r"""
import json, torch
import dgld, dgld.distributed as dist
from dgld import _test_hooks

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
    gids, part_rows = _test_hooks.partition_node_tensor({part!r}, p, "paper/features")
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
# Per-type edge ids (DGL's layout): an edge type's data holds one row per edge
# of that type, indexed by its per-type ids; find_edges(ids, etype) gives per-type
# node ids; the partition book maps both ways.
cw = ("author", "writes", "paper")
n_w = g.num_edges(cw)
ew = torch.arange(n_w)
src, dst = g.find_edges(ew, etype=cw)
hsrc, hdst = g.find_edges(g.to_homogeneous_eids(cw, ew))
out["find_edges_typed"] = (bool(torch.equal(g.to_homogeneous_ids("author", src), hsrc)) and
                           bool(torch.equal(g.to_homogeneous_ids("paper", dst), hdst)) and
                           int(src.max()) < g.num_nodes("author") and int(dst.max()) < g.num_nodes("paper"))
gpb = g.get_partition_book()
et, back = gpb.map_to_per_etype(gpb.map_to_homo_eid(ew, cw))
out["eid_round_trip"] = bool(torch.equal(back, ew)) and bool((et == g.canonical_etypes.index(cw)).all())
out["partid2eids"] = sorted(torch.cat([gpb.partid2eids(p, cw) for p in range(2)]).tolist()) == ew.tolist()
weight = dist.DistTensor((n_w, 2), torch.float32, name="w", part_policy=g.get_edge_partition_policy(cw),
                         init_func=lambda shape, dtype: torch.zeros(shape, dtype=dtype))
weight[ew] = torch.stack([ew.float(), src.float()], 1)
g.edges[cw].data["w"] = weight
got = g.edges["writes"].data["w"][ew]
out["edge_data"] = bool(torch.equal(got[:, 0], ew.float())) and bool(torch.equal(got[:, 1], src.float()))
try:  # writes and rev-writes have as many edges: the row count names no single policy
    dist.DistTensor((n_w, 1), torch.float32, name="w2")
    out["edge_policy"] = "no error"
except Exception as e:
    out["edge_policy"] = str(e)
try:
    g.edges["writes"].data["w"][torch.tensor([n_w])]
    out["edge_out_of_range"] = "no error"
except Exception as e:
    out["edge_out_of_range"] = str(e)
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
            import dgld.distributed as dist  # the book from the config alone, no job (DGL's load_partition_book)
            gpb, name, ntypes, etypes = dist.load_partition_book(job.part_config, 1)
        finally:
            job.stop()
    assert r.returncode == 0, r.stdout[-4000:]
    res = json.loads(next(line for line in r.stdout.splitlines() if line.startswith("RESULT "))[7:])
    assert name == "g" and ntypes == {t: i for t, i in cfg["ntypes"].items()}
    assert etypes == {tuple(t.split(":")): i for t, i in cfg["etypes"].items()}
    cw = ("author", "writes", "paper")
    (s0, e0), (s1, e1) = cfg["edge_map"]["author:writes:paper"]
    assert gpb.partid2eids(1, cw).tolist() == list(range(e0 - s0, e0 - s0 + e1 - s1))
    assert gpb.map_to_homo_eid(gpb.partid2eids(1, cw), cw).tolist() == list(range(s1, e1))
    assert gpb.canonical_etypes == [tuple(t.split(":")) for t in sorted(cfg["etypes"], key=cfg["etypes"].get)]
    # The book is the C++ one: DGL's three names of an edge type, per-type
    # ownership, and its errors.
    assert gpb.etype_id("writes") == gpb.etype_id(cw) == gpb.etype_id("author:writes:paper") == cfg["etypes"][
        "author:writes:paper"]
    papers = torch.arange(1200)
    owners = gpb.nid2partid(papers, "paper")
    assert torch.equal(owners, gpb.nid2partid(gpb.map_to_homo_nid(papers, "paper")))
    assert torch.equal(papers[owners == 1], gpb.partid2nids(1, "paper"))
    assert torch.equal(gpb.nid2localnid(gpb.partid2nids(1, "paper"), 1, "paper"),
                       torch.arange(int((owners == 1).sum())))
    with pytest.raises(ValueError, match="'journal' is not a node type of the graph"):
        gpb.ntype_id("journal")
    with pytest.raises(ValueError, match="'nope' is not an edge type of the graph"):
        gpb.partid2eids(0, "nope")
    with pytest.raises(ValueError, match="node id 1200 of type 'paper' is out of range"):
        gpb.map_to_homo_nid([1200], "paper")
    with pytest.raises(ValueError, match="partition 2 does not exist"):
        gpb.partid2nids(2)
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
    assert res["find_edges_typed"] and res["eid_round_trip"] and res["partid2eids"]
    assert res["edge_data"], res
    assert "several partition policies match" in res["edge_policy"]
    assert "'author:writes:paper' edges" in res["edge_policy"]
    assert "out of range" in res["edge_out_of_range"]
    # DGL's typed partition config: one edge_map list per canonical edge type.
    assert sorted(cfg["edge_map"]) == sorted(cfg["etypes"])
    for et, ranges in cfg["edge_map"].items():
        assert sum(e - s for s, e in ranges) == cfg["dgld"]["etype_counts"][cfg["etypes"][et]]


LOADER_SCRIPT = r"""
import json, torch
import dgld, dgld.distributed as dist
from dgld.dataloading import DistNodeDataLoader, NeighborSampler

dist.initialize({ip!r})
g = dist.DistGraph('g', part_config={part!r})
torch.manual_seed(0)
out = {{}}
# node_split by type: the two trainers of a 2-machine job get every paper whose mask is set, as paper ids.
mask = g.nodes["paper"].data["train_mask"]
train = torch.cat([dist.node_split(mask, g.get_partition_book(), ntype="paper", rank=r, num_trainers=2)
                   for r in range(2)])
full = mask[torch.arange(g.num_nodes("paper"))]
out["split_ok"] = sorted(train.tolist()) == torch.nonzero(full).reshape(-1).tolist()
# A fanout per edge type (DGL's dict form) in the input layer, an int for every type in the output layer.
cets = g.canonical_etypes
fan0 = {{c: (1 + i % 3) for i, c in enumerate(cets)}}
loader = DistNodeDataLoader(g, {{"paper": train}}, NeighborSampler([fan0, 4]), batch_size=64, shuffle=True)
seen, ok = [], {{"types": True, "edges": True, "fanout": True, "feat": True, "labels": True, "dst_first": True}}
feat = g.nodes["paper"].data["features"]
labels = g.nodes["paper"].data["labels"]
for input_nodes, seeds, blocks in loader:
    ok["types"] &= sorted(input_nodes) == sorted(g.ntypes) and sorted(seeds) == sorted(g.ntypes)
    ok["types"] &= all(seeds[t].numel() == 0 for t in g.ntypes if t != "paper")
    seen += seeds["paper"].tolist()
    ok["types"] &= torch.equal(blocks[-1].dstdata[dgld.NID]["paper"], seeds["paper"])
    for t in g.ntypes:
        ok["types"] &= torch.equal(blocks[0].srcdata[dgld.NID][t], input_nodes[t])
    for layer, b in enumerate(blocks):
        ok["types"] &= list(b.canonical_etypes) == list(cets)
        for t in g.ntypes:  # a block's dst nodes are its first src nodes, per type
            n = b.num_dst_nodes(t)
            ok["dst_first"] &= torch.equal(b.srcdata[dgld.NID][t][:n], b.dstdata[dgld.NID][t])
        for r, c in enumerate(cets):
            rel = b[c]
            u, v = rel.edges()
            eids = rel.edata[dgld.EID]
            # Every sampled edge is an edge of that relation between those nodes
            # (per-type edge and node ids, as DGL's find_edges gives them).
            su = b.srcdata[dgld.NID][c[0]][u]
            dv = b.dstdata[dgld.NID][c[2]][v]
            fu, fv = g.find_edges(eids, etype=c)
            ok["edges"] &= torch.equal(fu, su) and torch.equal(fv, dv)
            hu, hv = g.find_edges(g.to_homogeneous_eids(c, eids))
            ok["edges"] &= torch.equal(hu, g.to_homogeneous_ids(c[0], su))
            ok["edges"] &= bool(((eids >= 0) & (eids < g.num_edges(c))).all())
            limit = fan0[c] if layer == 0 else 4
            if v.numel():
                ok["fanout"] &= int(torch.bincount(v).max()) <= limit
    x = blocks[0].srcdata["features"]["paper"]
    ok["feat"] &= torch.equal(x, feat[input_nodes["paper"].clone()])
    ok["labels"] &= torch.equal(blocks[-1].dstdata["labels"]["paper"], labels[seeds["paper"].clone()])
out.update(ok)
out["all_seeds_once"] = sorted(seen) == sorted(train.tolist())
try:
    DistNodeDataLoader(g, {{"paper": train}}, NeighborSampler([{{"writes": 2}}]), batch_size=8)
    out["missing_etype"] = "no error"
except Exception as e:
    out["missing_etype"] = str(e)
try:
    DistNodeDataLoader(g, train, NeighborSampler([2]), batch_size=8)
    out["untyped_seeds"] = "no error"
except Exception as e:
    out["untyped_seeds"] = str(e)
# A DistEmbedding of one node type (DGL's part_policy=g.get_node_partition_policy(ntype)),
# indexed by that type's ids and trained by SparseAdam: only the rows looked up change.
n_auth = g.num_nodes("author")
emb = dist.DistEmbedding(n_auth, 4, name="author_emb", part_policy=g.get_node_partition_policy("author"),
                         init_func=lambda shape, dtype: torch.ones(shape, dtype=dtype))
opt = dist.optim.SparseAdam([emb], lr=0.1)
ids = torch.tensor([0, 3, n_auth - 1])
emb(ids).sum().backward()
opt.step()
after = emb.weight[torch.arange(n_auth)]
changed = torch.nonzero((after != 1).any(1)).reshape(-1).tolist()
out["emb_changed"] = changed
out["emb_name"] = emb.weight.name
try:
    dist.DistEmbedding(n_auth + 1, 4, part_policy=g.get_node_partition_policy("author"))
    out["emb_bad_rows"] = "no error"
except Exception as e:
    out["emb_bad_rows"] = str(e)
print("RESULT " + json.dumps(out))
dist.exit_client()
"""


def test_typed_loader_blocks_split_and_embedding():
    res = run_result(LOADER_SCRIPT, graph="hsbm:papers=600,authors=300,venues=8,topics=20,feat_dim=8,seed=3",
                     part_flags=("--add-reverse",), prefix="dgld-pytest-hetero-loader-")
    for key in ("split_ok", "types", "edges", "fanout", "feat", "labels", "dst_first", "all_seeds_once"):
        assert res[key] is True, (key, res)
    assert "lacks edge type" in res["missing_etype"], res["missing_etype"]
    assert "several node types" in res["untyped_seeds"], res["untyped_seeds"]
    assert res["emb_changed"] == [0, 3, 299], res["emb_changed"]
    assert res["emb_name"].startswith("author/"), res["emb_name"]
    assert "'author'" in res["emb_bad_rows"] and "300 rows" in res["emb_bad_rows"], res["emb_bad_rows"]


API_SCRIPT = r"""
import json, torch
import dgld, dgld.distributed as dist
import dgld.nn.pytorch as dglnn

dist.initialize({ip!r})
g = dist.DistGraph('g', part_config={part!r})
out = {{}}
out["ntype_ids"] = [g.get_ntype_id(t) for t in g.ntypes]
out["etype_id"] = g.get_etype_id(("author", "writes", "paper")) == g.canonical_etypes.index(("author", "writes", "paper"))
# DGL's names: 'feat' / 'label' read dgl-partition's 'features' / 'labels' (the same object).
out["feat_alias"] = ["feat" in g.nodes["paper"].data, g.nodes["paper"].data["feat"] is g.nodes["paper"].data["features"]]
out["no_feat"] = "feat" in g.nodes["author"].data
# The partition book per type: per-type ids of a partition, both ways.
pb = g.get_partition_book()
out["book_ntypes"] = pb.ntypes
owned = [pb.partid2nids(p, "paper") for p in range(2)]
out["partid2nids"] = torch.equal(torch.cat(owned), torch.arange(g.num_nodes("paper")))
ids = torch.arange(g.num_nodes("author"))
hom = pb.map_to_homo_nid(ids, "author")
out["map_homo"] = torch.equal(hom, g.to_homogeneous_ids("author", ids))
types, back = pb.map_to_per_ntype(hom)
out["map_back"] = torch.equal(back, ids) and bool((types == g.get_ntype_id("author")).all())
out["owner"] = torch.equal(pb.nid2partid(g.to_homogeneous_ids("paper", owned[1])),
                           torch.ones(owned[1].numel(), dtype=torch.int64))
# A DistTensor without part_policy takes the one policy of its row count.
t = dist.DistTensor((g.num_nodes("paper"),), torch.int64, "results", persistent=True)
out["policy"] = t.part_policy.policy_str
t[torch.tensor([0, 5])] = torch.tensor([7, 9])
out["policy_rows"] = t[torch.tensor([5, 0])].tolist()
try:
    dist.DistTensor((g.num_nodes("paper") + 1, 2), torch.float32, "nowhere")
    out["no_policy"] = "no error"
except Exception as e:
    out["no_policy"] = str(e)
# local_var: columns set on it leave the block's frames as they were.
block = dgld.create_block({{("author", "writes", "paper"): (torch.tensor([0, 1]), torch.tensor([0, 0]))}},
                          num_src_nodes={{"author": 2, "paper": 1}}, num_dst_nodes={{"paper": 1}})
block.srcdata["h"] = {{"author": torch.ones(2, 3)}}
lv = block.local_var()
lv.srcdata["h"] = {{"author": torch.zeros(2, 3)}}
lv.dstdata["x"] = {{"paper": torch.ones(1, 1)}}
out["local_var"] = bool(block.srcdata["h"]["author"].sum() == 6) and "x" not in block.dstdata and \
    bool(lv.srcdata["h"]["author"].sum() == 0) and block.to("cpu") is block
wb = dglnn.WeightBasis((3, 4), 2, 5)
w = wb()
out["basis_shape"] = list(w.shape)
out["basis"] = torch.allclose(w[3], wb.w_comp[3, 0] * wb.weight[0] + wb.w_comp[3, 1] * wb.weight[1])
print("RESULT " + json.dumps(out))
dist.exit_client()
"""


def test_dgl_typed_api_names():
    res = run_result(API_SCRIPT, graph="hsbm:papers=400,authors=200,venues=8,topics=20,feat_dim=4,seed=2",
                     part_flags=("--add-reverse",), prefix="dgld-pytest-hetero-api-")
    assert res["ntype_ids"] == [0, 1, 2, 3] and res["etype_id"]
    assert res["feat_alias"] == [True, True] and res["no_feat"] is False, res
    assert res["book_ntypes"] == ["paper", "author", "venue", "topic"]
    for key in ("partid2nids", "map_homo", "map_back", "owner", "local_var", "basis"):
        assert res[key] is True, (key, res)
    assert res["policy"] == "node~paper" and res["policy_rows"] == [9, 7]
    assert "no partition policies match" in res["no_policy"] and "'paper' nodes" in res["no_policy"], res["no_policy"]
    assert res["basis_shape"] == [5, 3, 4]
