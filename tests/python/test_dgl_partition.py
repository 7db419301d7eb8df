"""DGL's partition contract from Python (what DGL's tests/distributed/
test_partition.py checks, in the project's own words): typed graphs
partitioned by partition_graph and read back by load_partition with DGL's
fields and dtypes, per-type id mappings, per-type trainer ids, the sparse
formats asked for, RangePartitionBook made from ranges, DGL's own typed
config (no "dgld" section) and DGL's refusal of per-id books. No job needed."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

import dgld
from dgld import DGLError
from dgld.distributed import load_partition, load_partition_book, load_partition_feats, partition_graph
from dgld.distributed.graph_partition_book import (DEFAULT_ETYPE, DEFAULT_NTYPE, EdgePartitionPolicy,
                                                   HeteroDataName, NodePartitionPolicy, RangePartitionBook,
                                                   _etype_tuple_to_str)
from dgld.distributed.partition import RESERVED_FIELD_DTYPE, _get_inner_edge_mask, _get_inner_node_mask

COUNTS = {"a": 300, "b": 250, "c": 120}
RELATIONS = [("a", "x", "b"), ("b", "x", "a"), ("a", "y", "c"), ("b", "z", "c")]


def typed_graph(seed=3):
    rng = np.random.default_rng(seed)
    data = {}
    for s, r, d in RELATIONS:
        m = 4 * COUNTS[s]
        data[(s, r, d)] = (torch.from_numpy(rng.integers(0, COUNTS[s], m)),
                           torch.from_numpy(rng.integers(0, COUNTS[d], m)))
    g = dgld.heterograph(data, COUNTS)
    g.nodes["a"].data["labels"] = torch.arange(COUNTS["a"])
    g.nodes["a"].data["feats"] = torch.randn(COUNTS["a"], 5)
    g.nodes["c"].data["flag"] = torch.rand(COUNTS["c"]) < 0.5
    g.edges[("a", "x", "b")].data["w"] = torch.randn(g.num_edges(("a", "x", "b")), 2)
    return g


@pytest.mark.parametrize("method,trainers", [("metis", 2), ("random", 1)])
def test_a_typed_graph_is_partitioned_and_read_back_as_dgl_does(tmp_path, method, trainers):
    g = typed_graph()
    assert g.canonical_etypes == sorted(RELATIONS)  # DGL's order
    out = tmp_path / "parts"  # a pathlib.Path, as DGL's callers pass
    orig_nids, orig_eids = partition_graph(g, "tg", 2, out, part_method=method, return_mapping=True,
                                           num_trainers_per_machine=trainers, graph_formats=["coo", "csc"])
    assert sorted(orig_nids) == sorted(COUNTS) and sorted(orig_eids) == sorted(RELATIONS)
    for t, n in COUNTS.items():
        assert sorted(orig_nids[t].tolist()) == list(range(n))
    labels, weights = [], []
    seen_edges = {c: 0 for c in RELATIONS}
    for p in range(2):
        part, nfeats, efeats, gpb, name, ntypes, etypes = load_partition(out / "tg.json", p)
        assert name == "tg" and ntypes == g.ntypes and etypes == g.canonical_etypes
        for k, dtype in RESERVED_FIELD_DTYPE.items():  # DGL's names: NID is EID, NTYPE is ETYPE
            assert part.ndata[k].dtype == dtype if k != "inner_edge" else True, k
            assert part.edata[k].dtype == dtype if k != "inner_node" else True, k
        assert {"coo", "csc"} <= set(part.formats()["created"])
        # Every inner edge, mapped back to original per-type ids, is an edge
        # of the input graph with that id.
        src, dst, eid = part.edges(form="all")
        u_type, u = gpb.map_to_per_ntype(part.ndata[dgld.NID][src])
        v_type, v = gpb.map_to_per_ntype(part.ndata[dgld.NID][dst])
        e_type, e = gpb.map_to_per_etype(part.edata[dgld.EID][eid])
        assert torch.equal(e_type.to(torch.int32), part.edata[dgld.ETYPE][eid].to(torch.int32))
        for i, c in enumerate(g.canonical_etypes):
            inner = _get_inner_edge_mask(part, i)[eid]
            sel = (e_type == i) & inner
            assert bool((u_type[sel] == g.get_ntype_id(c[0])).all())
            assert bool((v_type[sel] == g.get_ntype_id(c[2])).all())
            ou, ov = orig_nids[c[0]][u[sel]], orig_nids[c[2]][v[sel]]
            oe = orig_eids[c][e[sel]]
            gu, gv = g.edges(etype=c)
            assert torch.equal(gu[oe], ou) and torch.equal(gv[oe], ov)
            seen_edges[c] += int(sel.sum())
        if trainers > 1:
            for t in g.ntypes:
                assert bool((nfeats[f"{t}/trainer_id"] // trainers == p).all())
            for c in g.canonical_etypes:
                assert bool((efeats[f"{_etype_tuple_to_str(c)}/trainer_id"] // trainers == p).all())
        # Typed data keep their names and dtypes, rows by this partition's per-type ids.
        a = g.get_ntype_id("a")
        inner_a = part.ndata[dgld.NID][_get_inner_node_mask(part, a)]
        _, a_ids = gpb.map_to_per_ntype(inner_a)
        local = gpb.nid2localnid(a_ids, p, "a")
        assert torch.equal(nfeats["a/labels"][local], orig_nids["a"][a_ids])
        assert torch.equal(nfeats["a/feats"][local], g.nodes["a"].data["feats"][orig_nids["a"][a_ids]])
        c_ids = gpb.map_to_per_ntype(part.ndata[dgld.NID][_get_inner_node_mask(part, g.get_ntype_id("c"))])[1]
        flags = g.nodes["c"].data["flag"][orig_nids["c"][c_ids]]
        assert torch.equal(nfeats["c/flag"][gpb.nid2localnid(c_ids, p, "c")].bool(), flags)
        labels.append(nfeats["a/labels"])
        weights.append(efeats["a:x:b/w"])
        lazy_nodes, lazy_edges = load_partition_feats(out / "tg.json", p)
        assert torch.equal(lazy_nodes["a/labels"], nfeats["a/labels"])
    for c in RELATIONS:
        assert seen_edges[c] == g.num_edges(c)
    back = torch.empty(COUNTS["a"], dtype=torch.int64)
    back[orig_nids["a"]] = torch.cat(labels)
    assert torch.equal(back, g.nodes["a"].data["labels"])
    w = torch.empty_like(g.edges[("a", "x", "b")].data["w"])
    w[orig_eids[("a", "x", "b")]] = torch.cat(weights)
    assert torch.equal(w, g.edges[("a", "x", "b")].data["w"])


def test_homogeneous_edges_carry_trainer_ids_and_formats_are_recorded(tmp_path):
    g = dgld.rand_graph(400, 3000)
    g.edata["w"] = torch.randn(3000)
    partition_graph(g, "h", 2, tmp_path, num_trainers_per_machine=2, graph_formats="csc")
    assert json.loads((tmp_path / "h.json").read_text())["dgld"]["graph_formats"] == ["csc"]
    for p in range(2):
        part, _, efeats, *_ = load_partition(tmp_path / "h.json", p)
        assert part.formats()["created"] == ["csc"] or "csc" in part.formats()["created"]
        assert bool((efeats["_N:_E:_N/trainer_id"] // 2 == p).all())
        assert efeats["_N:_E:_N/trainer_id"].shape == efeats["_N:_E:_N/w"].shape
    with pytest.raises(DGLError, match="graph_formats"):
        partition_graph(g, "h", 2, tmp_path / "bad", graph_formats=["dense"])
    # DGL 2.x's GraphBolt options are accepted (dgld's files always hold edge ids); others are a TypeError.
    partition_graph(g, "gb", 1, tmp_path / "gb", use_graphbolt=True, store_eids=True, store_inner_node=True)
    with pytest.raises(TypeError, match="unexpected keyword argument 'store_everything'"):
        partition_graph(g, "gb", 1, tmp_path / "gb2", store_everything=True)


def test_graph_formats_are_dgls():
    g = dgld.graph((torch.tensor([0, 1, 2]), torch.tensor([1, 2, 0])))
    assert g.formats() == {"created": ["coo"], "not created": ["csr", "csc"]}
    h = g.formats(["csr", "csc"])
    assert set(h.formats()["created"]) == {"coo", "csr", "csc"}
    assert g.formats()["created"] == ["coo"]  # a clone: g itself is unchanged
    with pytest.raises(DGLError, match="unknown sparse format"):
        g.formats("dense")


def test_range_partition_book_from_ranges():
    gpb = RangePartitionBook(1, 2, {DEFAULT_NTYPE: torch.tensor([[0, 40], [40, 100]])},
                             {DEFAULT_ETYPE: torch.tensor([[0, 300], [300, 500]])}, {DEFAULT_NTYPE: 0},
                             {DEFAULT_ETYPE: 0})
    assert gpb.is_homogeneous() and gpb.canonical_etypes == [DEFAULT_ETYPE] and gpb.etypes == ["_E"]
    assert gpb.nid2partid(torch.tensor([0, 39, 40, 99])).tolist() == [0, 0, 1, 1]
    assert gpb.nid2localnid(torch.tensor([40, 99]), 1).tolist() == [0, 59]
    assert EdgePartitionPolicy(gpb).get_part_size() == 200
    hetero = RangePartitionBook(
        0, 2, {"u": torch.tensor([[0, 10], [30, 45]]), "v": torch.tensor([[10, 30], [45, 50]])},
        {("u", "r", "v"): torch.tensor([[0, 7], [7, 9]])}, {"u": 0, "v": 1}, {("u", "r", "v"): 0})
    policy = NodePartitionPolicy(hetero, "v")
    assert policy.policy_str == "node~v" and policy.get_size() == 25 and policy.get_part_size() == 20
    assert policy.to_partid(torch.tensor([0, 19, 20, 24])).tolist() == [0, 0, 1, 1]
    assert hetero.local_ntype_offset == [0, 10, 30]
    e = EdgePartitionPolicy(hetero, ("u", "r", "v"))
    assert e.policy_str == "edge~u:r:v" and e.type_name == ("u", "r", "v")
    assert str(e.get_data_name("w")) == "edge~u:r:v~w"
    # DGL asserts canonical edge types: a relation name alone is refused.
    for make in (lambda: EdgePartitionPolicy(hetero, "r"), lambda: HeteroDataName(False, "r", "w"),
                 lambda: RangePartitionBook(0, 1, {"u": [[0, 1]]}, {"r": [[0, 1]]}, {"u": 0}, {"r": 0})):
        with pytest.raises(AssertionError, match="canonical"):
            make()
    with pytest.raises(DGLError, match="not a partition of 2"):
        RangePartitionBook(2, 2, {}, {}, {}, {})


def test_dgls_own_typed_config_is_read(tmp_path):
    # DGL's layout: one range list per type, keys in any order, no "dgld" object.
    config = {
        "graph_name": "g", "num_nodes": 50, "num_edges": 90, "part_method": "metis", "num_parts": 2,
        "halo_hops": 1, "ntypes": {"v": 1, "u": 0}, "etypes": {"v:s:u": 1, "u:r:v": 0},
        "node_map": {"v": [[10, 30], [45, 50]], "u": [[0, 10], [30, 45]]},
        "edge_map": {"v:s:u": [[40, 60], [80, 90]], "u:r:v": [[0, 40], [60, 80]]},
    }
    for p in range(2):
        config[f"part-{p}"] = {k: f"part{p}/{k}.dgl" for k in ("node_feats", "edge_feats", "part_graph")}
    path = tmp_path / "g.json"
    path.write_text(json.dumps(config))
    gpb, name, ntypes, etypes = load_partition_book(path, 1)
    assert name == "g" and ntypes == {"u": 0, "v": 1} and etypes == {("u", "r", "v"): 0, ("v", "s", "u"): 1}
    assert gpb.local_ntype_offset == [0, 15, 20] and gpb.local_etype_offset == [0, 20, 30]
    assert gpb._num_nodes("v") == 25 and gpb._num_edges(("v", "s", "u")) == 30


def test_a_per_id_partition_book_is_dgls_type_error(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"graph_name": "g", "num_nodes": 3, "num_edges": 3, "part_method": "metis",
                                "num_parts": 1, "node_map": {"_N": {"0": 0, "1": 0, "2": 0}},
                                "edge_map": {"_N:_E:_N": {"0": 0, "1": 0, "2": 0}},
                                "part-0": {"node_feats": "a", "edge_feats": "b", "part_graph": "c"}}))
    with pytest.raises(TypeError, match="range partition books"):
        load_partition_book(path, 0)


def test_the_dgl_alias_package_runs_dgls_calls_on_dgld(tmp_path):
    """tests/dgl_alias (what scripts/dgl_suite.sh puts first on the path):
    `import dgl` is dgld, dgl.X.Y is the module dgld.X.Y itself, and DGL's
    calls of its partition test run through it."""
    import os
    import subprocess
    import sys
    code = f"""
import dgl, dgld, torch
from dgl.distributed import partition_graph, load_partition
from dgl.distributed.graph_partition_book import RangePartitionBook
import dgl.distributed.graph_partition_book as gpb_mod
assert dgl.heterograph is dgld.heterograph and partition_graph is dgld.distributed.partition_graph
assert gpb_mod is __import__("dgld.distributed.graph_partition_book", fromlist=["x"])
g = dgl.heterograph({{("a", "r", "b"): (torch.tensor([0, 1, 2]), torch.tensor([1, 0, 1]))}}, {{"a": 3, "b": 2}})
nids, eids = partition_graph(g, "t", 1, {str(tmp_path)!r}, return_mapping=True)
part, *_ = load_partition({str(tmp_path / "t.json")!r}, 0)
print(sorted(nids), part.num_nodes(), int(part.edata[dgl.ETYPE].max()))
"""
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(root / "tests" / "dgl_alias"), str(Path(dgld.__file__).parents[1])])
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[0] == "['a', 'b'] 5 0"
