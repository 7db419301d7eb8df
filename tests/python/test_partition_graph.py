"""dgld.distributed.partition_graph and load_partition: the partitions of an
in-memory dgld.graph are dgl-partition's (the same C++ partitioner, the same
files byte for byte from the same input and seed), dgl-partition --verify
accepts them, return_mapping's maps and load_partition's graph and tensors
agree with the input graph, a DistGraph serves the graph's other data by
name, balance_ntypes balances, bad input is a clear
dgld error that leaves nothing behind, and Cora partitioned in Python trains
under dgl-launch to the accuracy of Cora partitioned by dgl-partition."""

import filecmp
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import BUILD, REPO, binary, free_port_block

import dgld  # noqa: E402 - conftest puts the build tree on sys.path
import dgld.distributed as dist  # noqa: E402
from dgld._errors import AlreadyExists, InvalidArgument, NotFound  # noqa: E402

CORA = REPO.parent / "shared" / "datasets" / "cora"
FILES = ("graph.dgld", "node_feat.dgld", "edge_feat.dgld")
ETYPE = "_N:_E:_N/"


@pytest.fixture(autouse=True, scope="module")
def quiet():
    dgld._C.set_log_level("warn")


def tool(*args):
    return subprocess.run([binary("partition/dgl-partition"), "--log-level", "warn", *map(str, args)],
                          check=True, stdout=subprocess.PIPE, text=True).stdout


def verify(config):
    r = subprocess.run([binary("partition/dgl-partition"), "--verify", str(config)],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert r.returncode == 0, r.stdout
    assert ": OK (" in r.stdout, r.stdout
    return r.stdout


def launch(d, part_config, *script):
    """python3 *script under dgl-launch in d: 2 machines x 1 trainer on
    loopback, d/ip_config.txt theirs."""
    base = free_port_block(910)
    (d / "ip_config.txt").write_text(f"127.0.0.1 {base}\n127.0.0.1 {base + 10}\n")
    cmd = [binary("launcher/launch/dgl-launch"), "--local", "--no-copy", "--workspace", str(d),
           "--ip-config", "ip_config.txt", "--part-config", part_config, "--num-trainers", "1",
           "--extra-envs", f"PYTHONPATH={BUILD / 'python'}", "--", sys.executable, *script]
    r = subprocess.run(cmd, cwd=d, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-4000:]


def same_files(a, b, name, num_parts):
    """The two outputs hold the same config and the same partition files,
    byte for byte."""
    assert filecmp.cmp(a / f"{name}.json", b / f"{name}.json", shallow=False)
    for p in range(num_parts):
        for f in FILES:
            assert filecmp.cmp(a / f"part{p}" / f, b / f"part{p}" / f, shallow=False), f"part{p}/{f} differs"


def small_graph(with_data=True, seed=0):
    """A directed random graph with self loops and duplicate edges (so the
    partitioner keeps the input order of in-edges), and node and edge data
    of every kind partition_graph handles."""
    gen = torch.Generator().manual_seed(seed)
    n, m = 300, 1500
    src = torch.randint(0, n, (m,), generator=gen)
    dst = torch.randint(0, n, (m,), generator=gen)
    src[:5], dst[:5] = torch.arange(5), torch.arange(5)  # self loops
    src[5:10], dst[5:10] = src[10:15], dst[10:15]        # duplicates
    g = dgld.graph((src, dst), num_nodes=n)
    # Quarters are exact in a CSV, so dgl-partition reads the same floats.
    g.ndata["feat"] = torch.randint(-8, 8, (n, 5), generator=gen).float() / 4
    g.ndata["label"] = torch.randint(0, 4, (n,), generator=gen)
    perm = torch.randperm(n, generator=gen)
    for name, ids in (("train_mask", perm[:60]), ("val_mask", perm[60:100]), ("test_mask", perm[100:200])):
        mask = torch.zeros(n, dtype=torch.bool)
        mask[ids] = True
        g.ndata[name] = mask
    if with_data:
        g.ndata["year"] = torch.randint(1990, 2024, (n,), generator=gen, dtype=torch.int32)
        g.ndata["emb"] = torch.randn(n, 2, 3, generator=gen, dtype=torch.float64)
        g.ndata["flag"] = torch.rand(n, generator=gen) < 0.5
        g.edata["w"] = torch.rand(m, generator=gen)
        g.edata["pair"] = torch.randint(0, 100, (m, 2), generator=gen)
    return g


def check_partitions(config, g, orig_nids, orig_eids):
    """Every partition read back by load_partition is g's: ids map back to
    the input's, the local edges are the input's edges between the same
    nodes, the tensors hold the input's rows."""
    c = json.loads(Path(config).read_text())
    n, m = g.num_nodes(), g.num_edges()
    assert torch.equal(torch.sort(orig_nids).values, torch.arange(n))
    assert torch.equal(torch.sort(orig_eids).values, torch.arange(m))
    src, dst = g._coo()
    inner_edges = 0
    for p in range(c["num_parts"]):
        lg, nf, ef, gpb, name, ntypes, etypes = dist.load_partition(config, p)
        assert (name, ntypes, etypes) == (c["graph_name"], ["_N"], [("_N", "_E", "_N")])
        assert gpb.num_partitions() == c["num_parts"] and gpb.partid == p
        gid = lg.ndata[dgld.NID]
        inner = lg.ndata["inner_node"].bool()
        start, end = c["node_map"]["_N"][p]
        assert torch.equal(gid[inner], torch.arange(start, end))
        assert bool(inner[:end - start].all()) and not bool(inner[end - start:].any())
        assert torch.equal(lg.ndata["part_id"], gpb.nid2partid(gid))
        orig = orig_nids[gid[inner]]
        assert torch.equal(nf["_N/features"], g.ndata["feat"][orig].float())
        assert torch.equal(nf["_N/labels"], g.ndata["label"][orig])
        for mask in ("train_mask", "val_mask", "test_mask"):
            assert torch.equal(nf["_N/" + mask], g.ndata[mask][orig].to(torch.uint8))
        for key in g.ndata.keys():
            if key not in ("feat", "label", "train_mask", "val_mask", "test_mask"):
                want = g.ndata[key][orig]
                assert torch.equal(nf["_N/" + key], want.to(torch.uint8) if want.dtype == torch.bool else want), key
        # Local edge i is position i of the CSC: its ends, in global ids and
        # then original ids, are the input edge's it maps back to.
        ls, ld = lg.edges()
        eids = lg.edata[dgld.EID]
        oe = orig_eids[eids]
        assert torch.equal(orig_nids[gid[ls]], src[oe]) and torch.equal(orig_nids[gid[ld]], dst[oe])
        ie = lg.edata["inner_edge"].bool()
        estart, eend = c["edge_map"][ETYPE[:-1]][p]
        # Inner edges hold the partition's ids, each once: in CSC order, except
        # that one partition keeps the input's ids (as DGL's).
        assert torch.equal(torch.sort(eids[ie]).values, torch.arange(estart, eend))
        if c["num_parts"] == 1:
            assert torch.equal(orig_eids, torch.arange(m)) and torch.equal(orig_nids, torch.arange(n))
        else:
            assert torch.equal(eids[ie], torch.arange(estart, eend))
        assert bool((gpb.eid2partid(eids[ie]) == p).all())
        for key in g.edata.keys():  # edge tensors' rows are in edge id order
            assert torch.equal(ef[ETYPE + key][eids[ie] - estart], g.edata[key][oe[ie]]), key
        inner_edges += int(ie.sum())
    assert inner_edges == m


@pytest.mark.parametrize("num_parts", [1, 2])
@pytest.mark.parametrize("method", ["metis", "random"])
def test_a_graph_with_data_is_partitioned_verified_and_read_back(tmp_path, num_parts, method):
    g = small_graph()
    nids, eids = dist.partition_graph(g, "small", num_parts, tmp_path / "out", part_method=method,
                                      return_mapping=True, num_hops=2)
    config = tmp_path / "out" / "small.json"
    out = verify(config)
    assert f"({num_parts} partitions, 300 nodes, 1500 edges" in out
    c = json.loads(config.read_text())
    assert (c["part_method"], c["halo_hops"], c["num_parts"]) == (method, 2, num_parts)
    check_partitions(config, g, nids, eids)


def write_edge_list(g, d):
    """g as dgl-partition's edges:FILE input with its features, labels and masks."""
    src, dst = g._coo()
    (d / "edges.csv").write_text("".join(f"{u},{v}\n" for u, v in zip(src.tolist(), dst.tolist())))
    (d / "feat.csv").write_text("".join(",".join(repr(x) for x in row) + "\n" for row in g.ndata["feat"].tolist()))
    (d / "labels.txt").write_text("".join(f"{x}\n" for x in g.ndata["label"].tolist()))
    args = ["--input", f"edges:{d / 'edges.csv'}", "--num-nodes", g.num_nodes(), "--node-feats", d / "feat.csv",
            "--labels", d / "labels.txt"]
    for mask, flag in (("train_mask", "--train-ids"), ("val_mask", "--val-ids"), ("test_mask", "--test-ids")):
        (d / f"{mask}.txt").write_text("".join(f"{i}\n" for i in torch.nonzero(g.ndata[mask]).flatten().tolist()))
        args += [flag, d / f"{mask}.txt"]
    return args


@pytest.mark.parametrize("method,trainers", [("metis", 1), ("metis", 2), ("random", 1)])
def test_the_files_are_dgl_partitions_byte_for_byte(tmp_path, method, trainers):
    g = small_graph(with_data=False)
    dist.partition_graph(g, "small", 2, tmp_path / "py", part_method=method, seed=7,
                         balance_ntypes=g.ndata["train_mask"], balance_edges=True,
                         num_trainers_per_machine=trainers)
    tool(*write_edge_list(g, tmp_path), "--num-parts", 2, "--part-method", method, "--seed", 7, "--balance-train",
         "--balance-edges", "--num-trainers-per-machine", trainers, "--graph-name", "small",
         "--output", tmp_path / "cli")
    same_files(tmp_path / "py", tmp_path / "cli", "small", 2)


def test_balance_ntypes_balances_each_type(tmp_path):
    g = small_graph(with_data=False)
    types = g.ndata["label"] % 3
    dist.partition_graph(g, "small", 2, tmp_path / "out", balance_ntypes=types, return_mapping=False)
    verify(tmp_path / "out" / "small.json")
    nids, _ = dist.partition_graph(g, "small", 2, tmp_path / "again", balance_ntypes={"_N": types},
                                   return_mapping=True)
    same_files(tmp_path / "out", tmp_path / "again", "small", 2)  # DGL's dict form: the same
    c = json.loads((tmp_path / "out" / "small.json").read_text())
    for t in range(3):
        per_part = [int((types[nids[s:e]] == t).sum()) for s, e in c["node_map"]["_N"]]
        assert max(per_part) <= 1.1 * sum(per_part) / 2, (t, per_part)
    # Mask names (a dgld addition): the masks' combination is the type.
    dist.partition_graph(g, "small", 2, tmp_path / "named", balance_ntypes=["train_mask", "val_mask"])
    verify(tmp_path / "named" / "small.json")


@pytest.mark.skipif(not (CORA / "raw" / "edge.csv.gz").exists(),
                    reason=f"Cora is not at {CORA} (the shared datasets folder beside the repository)")
def test_cora_partitioned_in_python_is_dgl_partitions_and_trains_as_well(tmp_path):
    def lines(path):
        with gzip.open(path, "rt") as f:
            return [line.strip() for line in f if line.strip()]

    raw = CORA / "raw"
    edges = torch.tensor([[int(x) for x in line.split(",")] for line in lines(raw / "edge.csv.gz")])
    n = int(lines(raw / "num-node-list.csv.gz")[0])
    u, v = edges[:, 0], edges[:, 1]
    g = dgld.graph((torch.cat([u, v]), torch.cat([v, u])), num_nodes=n)  # OGB's reverse edges: E + i
    g.ndata["feat"] = torch.tensor([[float(x) for x in line.split(",")] for line in lines(raw / "node-feat.csv.gz")])
    g.ndata["label"] = torch.tensor([int(x) for x in lines(raw / "node-label.csv.gz")])
    for mask, split in (("train_mask", "train"), ("val_mask", "valid"), ("test_mask", "test")):
        m = torch.zeros(n, dtype=torch.bool)
        m[torch.tensor([int(x) for x in lines(CORA / "split" / "public" / f"{split}.csv.gz")])] = True
        g.ndata[mask] = m
    nids, eids = dist.partition_graph(g, "cora", 2, tmp_path / "py", balance_ntypes=g.ndata["train_mask"],
                                      return_mapping=True)
    tool("--input", f"ogb:{CORA}", "--num-parts", 2, "--balance-train", "--graph-name", "cora",
         "--output", tmp_path / "cli")
    out = verify(tmp_path / "py" / "cora.json")
    assert "(2 partitions, 2708 nodes, 10556 edges" in out
    same_files(tmp_path / "py", tmp_path / "cli", "cora", 2)
    check_partitions(tmp_path / "py" / "cora.json", g, nids, eids)

    # Both trained the same way: DGL's GraphSAGE example, 2 machines x 1 trainer.
    accuracy = {}
    for which in ("py", "cli"):
        part = f"{which}/cora.json"
        launch(tmp_path, part, str(REPO / "examples/python/train_dist.py"), "--graph_name", "cora",
               "--ip_config", "ip_config.txt", "--part_config", part, "--num_epochs", "10", "--batch_size", "20",
               "--num_hidden", "64", "--eval_every", "0", "--lr", "0.01", "--log_every", "0", "--seed", "1",
               "--metrics_out", f"metrics-{which}.json")
        accuracy[which] = json.loads((tmp_path / f"metrics-{which}.json").read_text())["test_acc"]
    assert accuracy["py"] > 0.7, accuracy
    assert abs(accuracy["py"] - accuracy["cli"]) <= 0.02, accuracy


READ_BACK = """
import sys, torch, dgld.distributed as dist
dist.initialize("ip_config.txt")
g = dist.DistGraph("small")
nodes, edges = torch.arange(g.num_nodes()), torch.arange(g.num_edges())
torch.save({k: g.ndata[k][nodes] for k in ("year", "emb", "flag")} | {"w": g.edata["w"][edges]},
           f"read{g.rank()}.pt")
dist.exit_client()
"""


def test_a_distgraph_serves_the_other_data_by_name(tmp_path):
    g = small_graph()
    nids, eids = dist.partition_graph(g, "small", 2, tmp_path / "out", return_mapping=True)
    (tmp_path / "read.py").write_text(READ_BACK)
    launch(tmp_path, "out/small.json", str(tmp_path / "read.py"))
    for rank in (0, 1):
        got = torch.load(tmp_path / f"read{rank}.pt")
        assert torch.equal(got["year"], g.ndata["year"][nids])
        assert torch.equal(got["emb"], g.ndata["emb"][nids])
        assert torch.equal(got["flag"], g.ndata["flag"][nids].to(torch.uint8))
        assert torch.equal(got["w"], g.edata["w"][eids])


# ---------------------------------------------------------------- errors

def listing(d):
    return sorted(str(p.relative_to(d)) for p in Path(d).rglob("*"))


def fails(tmp_path, exc, match, *args, **kwargs):
    """partition_graph(*args, **kwargs) raises `exc` matching `match` and
    leaves tmp_path as it was (no output, no hidden staging directory)."""
    before = listing(tmp_path)
    with pytest.raises(exc, match=match):
        dist.partition_graph(*args, **kwargs)
    assert listing(tmp_path) == before


def test_balancing_masks_the_graph_lacks_names_them(tmp_path):
    g = small_graph(with_data=False)
    del g.ndata["train_mask"], g.ndata["val_mask"]
    out = tmp_path / "out"
    fails(tmp_path, dgld.DGLError, r"lacks: 'train_mask'.*its node data: 'feat', 'label', 'test_mask'",
          g, "g", 2, out, balance_ntypes="train_mask")
    fails(tmp_path, dgld.DGLError, r"lacks: 'train_mask', 'val_mask'", g, "g", 2, out,
          balance_ntypes=["train_mask", "val_mask", "test_mask"])
    fails(tmp_path, dgld.DGLError, r"balance_ntypes must have one value per node \(300\), got shape \(299,\)",
          g, "g", 2, out, balance_ntypes=torch.zeros(299, dtype=torch.int64))


def test_bad_graphs_and_arguments_are_clear_errors_leaving_nothing(tmp_path):
    g = small_graph()
    out = tmp_path / "out"
    bad = small_graph()
    bad.ndata._columns["year"] = torch.zeros(301, dtype=torch.int32)  # behind the frame's back
    fails(tmp_path, InvalidArgument, r"node data 'year' has 301 rows, the graph has 300 nodes",
          bad, "g", 2, out)
    fails(tmp_path, InvalidArgument, "the graph has no nodes",
          dgld.graph((torch.tensor([], dtype=torch.int64), torch.tensor([], dtype=torch.int64))), "g", 1, out)
    fails(tmp_path, InvalidArgument, r"num_parts must be an integer >= 1, got 0", g, "g", 0, out)
    fails(tmp_path, InvalidArgument, "larger than the node count 300", g, "g", 301, out)
    fails(tmp_path, InvalidArgument, "part_method must be 'metis' or 'random'", g, "g", 2, out,
          part_method="parmetis")
    fails(tmp_path, InvalidArgument, "objtype 'vol'", g, "g", 2, out, objtype="vol")
    half = small_graph()
    half.ndata["h"] = torch.zeros(300, dtype=torch.float16)
    fails(tmp_path, InvalidArgument, r"node data 'h' has dtype torch.float16", half, "g", 2, out)
    reserved = small_graph()
    reserved.ndata["trainer_id"] = torch.zeros(300, dtype=torch.int64)
    fails(tmp_path, InvalidArgument, r"node data 'trainer_id': the name is the partitioner's own", reserved,
          "g", 2, out)
    twice = small_graph()
    twice.ndata["features"] = twice.ndata["feat"]
    fails(tmp_path, InvalidArgument, "'feat' and 'features' both name", twice, "g", 2, out)
    fails(tmp_path, InvalidArgument, "must be a dgld graph", "not a graph", "g", 2, out)

    a_file = tmp_path / "a_file"
    a_file.write_text("keep me")
    fails(tmp_path, InvalidArgument, "is a file, not a directory", g, "g", 2, a_file)
    assert a_file.read_text() == "keep me"
    # As DGL's: into an existing folder, replacing only what it writes; the
    # folder's other files stay (overwrite=True, dgld's, changes nothing).
    full = tmp_path / "full"
    full.mkdir()
    (full / "data.txt").write_text("keep me")
    dist.partition_graph(g, "g", 2, full)
    assert sorted(os.listdir(full)) == ["data.txt", "g.json", "part0", "part1"]
    first = (full / "g.json").read_text()
    dist.partition_graph(g, "g", 2, full, overwrite=True)
    dist.partition_graph(g, "other", 1, full)
    assert sorted(os.listdir(full)) == ["data.txt", "g.json", "other.json", "part0", "part1"]
    assert (full / "data.txt").read_text() == "keep me" and (full / "g.json").read_text() == first


def test_load_partition_errors(tmp_path):
    g = small_graph()
    dist.partition_graph(g, "g", 2, tmp_path / "out")
    with pytest.raises(InvalidArgument, match="partition 2 does not exist"):
        dist.load_partition(tmp_path / "out" / "g.json", 2)
    with pytest.raises(NotFound):
        dist.load_partition(tmp_path / "nowhere.json", 0)
    # Load without features: empty dicts, as DGL's load_feats=False.
    lg, nf, ef, *_ = dist.load_partition(tmp_path / "out" / "g.json", 0, load_feats=False)
    assert nf == {} and ef == {} and lg.num_nodes() > 0
