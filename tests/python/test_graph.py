"""DGL's graph objects in dgld (python/dgld/graph.py, convert.py, frame.py):
structure queries, frames and their checks, local_scope, to_block, the
native-block wrapping, and DGL-shaped errors. No job needed."""

import pickle

import pytest
import torch

import dgld
import dgld.function as fn
from dgld import DGLError


def small_graph():
    # 0->1, 2->1, 1->2, 3->2, 0->2, 2->0 ; node 3 has no in-edge.
    return dgld.graph((torch.tensor([0, 2, 1, 3, 0, 2]), torch.tensor([1, 1, 2, 2, 2, 0])), num_nodes=4)


def test_structure_queries():
    g = small_graph()
    assert g.num_nodes() == 4 and g.number_of_nodes() == 4 and len(g) == 4
    assert g.num_edges() == 6 and g.number_of_edges() == 6
    assert g.num_src_nodes() == g.num_dst_nodes() == 4
    assert not g.is_block and g.device == torch.device("cpu") and g.idtype == torch.int64
    u, v = g.edges()
    assert u.tolist() == [0, 2, 1, 3, 0, 2] and v.tolist() == [1, 1, 2, 2, 2, 0]
    assert g.edges(form="eid").tolist() == list(range(6))
    s, d, e = g.edges(form="all", order="srcdst")
    assert list(zip(s.tolist(), d.tolist())) == sorted(zip(u.tolist(), v.tolist()))
    assert torch.equal(u[e], s) and torch.equal(v[e], d)
    assert g.in_degrees().tolist() == [1, 2, 3, 0]
    assert g.out_degrees().tolist() == [2, 1, 2, 1]
    assert g.in_degrees(2) == 3 and g.out_degrees(torch.tensor([0, 3])).tolist() == [2, 1]
    assert g.nodes().tolist() == [0, 1, 2, 3]
    assert sorted(g.in_edges(2, form="eid").tolist()) == [2, 3, 4]
    assert sorted(g.out_edges(0, form="eid").tolist()) == [0, 4]
    assert g.find_edges(torch.tensor([3]))[0].tolist() == [3]
    assert g.has_edges_between(torch.tensor([0, 1]), torch.tensor([1, 0])).tolist() == [True, False]
    assert g.edge_ids(3, 2) == 3
    assert g.to("cpu") is g
    assert g.int().idtype == torch.int32 and g.int().edges()[0].dtype == torch.int32
    assert g.ntypes == ["_N"] and g.etypes == ["_E"] and g.canonical_etypes == [("_N", "_E", "_N")]


def test_graph_formats_and_bad_input():
    g = dgld.graph(("csr", (torch.tensor([0, 2, 3, 3]), torch.tensor([1, 2, 0]), torch.tensor([]))))
    assert g.edges()[0].tolist() == [0, 0, 1] and g.edges()[1].tolist() == [1, 2, 0]
    assert dgld.graph(([], []), num_nodes=5).num_nodes() == 5
    # DGL's edge list: a list of (src, dst) pairs; [] is the empty graph.
    assert [t.tolist() for t in dgld.graph([(0, 1), (2, 3)]).edges()] == [[0, 2], [1, 3]]
    assert [t.tolist() for t in dgld.graph([[0, 1], [2, 3]]).edges()] == [[0, 2], [1, 3]]
    assert dgld.graph([]).num_nodes() == 0 and dgld.graph([]).num_edges() == 0
    with pytest.raises(DGLError, match="3 src ids but 2 dst ids"):
        dgld.graph(([0, 1, 2], [0, 1]))
    with pytest.raises(DGLError, match="num_nodes is 2 but the edges name node 4"):
        dgld.graph(([0, 4], [1, 1]), num_nodes=2)
    with pytest.raises(DGLError, match="CPU"):
        dgld.graph(([0], [1]), device="cuda:0")
    with pytest.raises(DGLError, match="out of range"):
        small_graph().in_degrees(7)


def test_frames_check_rows_and_name_the_key():
    g = small_graph()
    g.ndata["h"] = torch.ones(4, 3)
    g.edata["w"] = torch.ones(6)
    assert set(g.ndata) == {"h"} and g.srcdata["h"] is g.dstdata["h"]
    with pytest.raises(DGLError, match=r"node data\['x'\]: expected data to have 4 rows, got 5"):
        g.ndata["x"] = torch.ones(5, 3)
    with pytest.raises(DGLError, match=r"edge data\['w2'\]: expected data to have 6 rows, got 2"):
        g.edata["w2"] = torch.ones(2)
    with pytest.raises(KeyError, match="no field 'nope'.*'h'"):
        g.ndata["nope"]
    # g.nodes[ids].data / g.edges[ids].data: rows of the frame
    g.nodes[torch.tensor([1, 3])].data["h"] = torch.full((2, 3), 5.0)
    assert g.ndata["h"][:, 0].tolist() == [1, 5, 1, 5]
    assert g.edges[torch.tensor([0, 5])].data["w"].tolist() == [1, 1]
    g.nodes[[0]].data["new"] = torch.tensor([[2.0]])
    assert g.ndata["new"].reshape(-1).tolist() == [2, 0, 0, 0]
    assert g.nodes["_N"].data is g.ndata
    with pytest.raises(DGLError, match="not a type"):
        g.nodes["paper"]


def test_local_scope_undoes_frame_writes_only():
    g = small_graph()
    h = torch.zeros(4, 2)
    g.ndata["h"] = h
    with g.local_scope():
        g.ndata["h"] = torch.ones(4, 2)
        g.ndata["tmp"] = torch.ones(4)
        g.edata["e"] = torch.ones(6)
        g.ndata["h"][0] += 0  # reading inside is fine
    assert g.ndata["h"] is h and "tmp" not in g.ndata and "e" not in g.edata
    with g.local_scope():
        g.ndata["h"].add_(1.0)  # in place: stays, as in DGL
    assert float(h.sum()) == 8.0


def test_to_block_orders_and_ids():
    # A frontier over 10 nodes (as sample_neighbors makes one) whose edges end at seeds 7 and 2.
    src = torch.tensor([5, 3, 9, 3, 7])
    dst = torch.tensor([7, 7, 2, 2, 2])
    frontier = dgld.graph((src, dst), num_nodes=10)
    frontier.edata[dgld.EID] = torch.tensor([50, 51, 52, 53, 54])
    frontier.edata["w"] = torch.arange(5.0)
    block = dgld.to_block(frontier, torch.tensor([7, 2]))
    assert block.is_block and block.num_dst_nodes() == 2 and block.num_src_nodes() == 5
    # dst nodes first, then the other sources in order of first appearance
    assert block.srcdata[dgld.NID].tolist() == [7, 2, 5, 3, 9]
    assert block.dstdata[dgld.NID].tolist() == [7, 2]
    # every edge kept in its order; EID = the edge's id in the frontier, its data copied
    assert block.edata[dgld.EID].tolist() == [0, 1, 2, 3, 4]
    assert block.edata["w"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    bs, bd = block.edges()
    nid = block.srcdata[dgld.NID]
    assert torch.equal(nid[bs], src) and torch.equal(block.dstdata[dgld.NID][bd], dst)
    assert block.in_degrees().tolist() == [2, 3]
    assert block.num_nodes() == 7
    assert block.ndata is block.srcdata  # DGL: a block's ndata is its srcdata
    no_dst = dgld.to_block(frontier, torch.tensor([7, 2]), include_dst_in_src=False)
    assert no_dst.srcdata[dgld.NID].tolist() == [5, 3, 9, 7]
    assert dgld.to_block(frontier).dstdata[dgld.NID].tolist() == [2, 7]  # default: sorted
    with pytest.raises(DGLError, match="node 2 does not exist in `dst_nodes`"):
        dgld.to_block(frontier, torch.tensor([7]))
    with pytest.raises(DGLError, match="out of range"):
        dgld.to_block(frontier, torch.tensor([7, 2, 12]))
    with pytest.raises(DGLError, match="appears twice"):
        dgld.to_block(frontier, torch.tensor([7, 2, 7]))
    # node data of the graph comes along
    sub = dgld.graph((torch.tensor([0, 1]), torch.tensor([1, 1])), num_nodes=2)
    sub.ndata["x"] = torch.tensor([[40.0], [41.0]])
    b2 = dgld.to_block(sub)
    assert b2.dstdata[dgld.NID].tolist() == [1] and b2.srcdata[dgld.NID].tolist() == [1, 0]
    assert b2.srcdata["x"].reshape(-1).tolist() == [41.0, 40.0] and b2.dstdata["x"].reshape(-1).tolist() == [41.0]


def test_transforms():
    g = small_graph()
    g.ndata["h"] = torch.arange(4.0)
    g.edata["w"] = torch.arange(6.0)
    loops = dgld.add_self_loop(g)
    assert loops.num_edges() == 10 and loops.edges()[0][6:].tolist() == [0, 1, 2, 3]
    assert dgld.remove_self_loop(loops).num_edges() == 6
    r = dgld.remove_edges(g, torch.tensor([1, 4]))
    assert r.edges()[0].tolist() == [0, 1, 3, 2] and r.edata["w"].tolist() == [0.0, 2.0, 3.0, 5.0]
    assert g.num_edges() == 6  # the input is left alone
    rev = dgld.reverse(g)
    assert torch.equal(rev.edges()[0], g.edges()[1])
    es = dgld.edge_subgraph(g, torch.tensor([3, 5]))
    assert es.ndata[dgld.NID].tolist() == [0, 2, 3] and es.edata[dgld.EID].tolist() == [3, 5]
    ns = dgld.node_subgraph(g, torch.tensor([2, 0]))
    assert ns.num_nodes() == 2 and sorted(ns.edata[dgld.EID].tolist()) == [4, 5]
    # compact_graphs: pos and neg pair graphs over a big node set, renumbered alike
    pos = dgld.graph((torch.tensor([9, 4]), torch.tensor([4, 7])), num_nodes=100)
    neg = dgld.graph((torch.tensor([9, 9]), torch.tensor([55, 7])), num_nodes=100)
    pos, neg = dgld.compact_graphs([pos, neg])
    assert pos.ndata[dgld.NID].tolist() == [9, 4, 7, 55] and neg.num_nodes() == 4
    assert pos.edges()[0].tolist() == [0, 1] and neg.edges()[1].tolist() == [3, 2]
    # the unsupervised scripts' frontier.edge_ids(..., return_uv=True): every edge between the pairs
    u, v, e = g.edge_ids(torch.tensor([0, 3, 1]), torch.tensor([2, 2, 0]), return_uv=True)
    assert sorted(e.tolist()) == [3, 4]


def test_edge_softmax():
    g = small_graph()
    logits = torch.randn(6, 2, dtype=torch.float64, requires_grad=True)
    a = dgld.nn.functional.edge_softmax(g, logits)
    _, dst = g.edges()
    for v in range(4):
        m = dst == v
        if m.any():
            assert torch.allclose(a[m], torch.softmax(logits[m], 0))
    assert torch.autograd.gradcheck(lambda x: dgld.nn.functional.edge_softmax(g, x), (logits,))


def test_create_block_and_block_frames():
    b = dgld.create_block((torch.tensor([0, 1, 2, 2]), torch.tensor([0, 0, 1, 1])), num_src_nodes=4,
                          num_dst_nodes=2)
    assert b.num_src_nodes() == 4 and b.num_dst_nodes() == 2 and b.num_edges() == 4
    b.srcdata["h"] = torch.arange(4.0).unsqueeze(1)
    b.update_all(fn.copy_u("h", "m"), fn.sum("m", "s"))
    assert b.dstdata["s"].reshape(-1).tolist() == [1.0, 4.0]
    with pytest.raises(DGLError, match="expected data to have 2 rows"):
        b.dstdata["x"] = torch.ones(4)
    assert b.srcnodes().tolist() == [0, 1, 2, 3] and b.dstnodes().tolist() == [0, 1]


def test_udfs_and_degree_bucketing():
    g = small_graph()
    g.ndata["h"] = torch.tensor([[1.0], [10.0], [100.0], [1000.0]])
    g.edata["w"] = torch.arange(6.0).unsqueeze(1)
    seen = []

    def message(edges):
        return {"m": edges.src["h"] * edges.data["w"] + edges.dst["h"]}

    def reduce(nodes):
        seen.append((nodes.nodes().tolist(), tuple(nodes.mailbox["m"].shape)))
        return {"out": nodes.mailbox["m"].max(1)[0] + nodes.data["h"]}

    g.update_all(message, reduce, lambda nodes: {"out": nodes.data["out"] * 2})
    # messages: e0 0->1: 0+10, e1 2->1: 100+10, e2 1->2: 20+100, e3 3->2: 3000+100, e4 0->2: 4+100, e5 2->0: 500+1
    want = torch.tensor([[2 * (501 + 1)], [2 * (110 + 10)], [2 * (3100 + 100)], [0.0]])
    assert torch.equal(g.ndata["out"], want)
    assert sorted(seen) == [([0], (1, 1, 1)), ([1], (1, 2, 1)), ([2], (1, 3, 1))]
    # mailbox rows follow edge ids
    g.update_all(message, lambda nodes: {"first": nodes.mailbox["m"][:, 0]})
    assert g.ndata["first"].reshape(-1).tolist() == [501.0, 10.0, 120.0, 0.0]
    # a built-in reducer after a UDF message, and a UDF reducer after a built-in message
    g.update_all(message, fn.sum("m", "s"))
    assert g.ndata["s"].reshape(-1).tolist() == [501.0, 120.0, 3324.0, 0.0]
    g.update_all(fn.u_mul_e("h", "w", "m"), lambda nodes: {"s2": nodes.mailbox["m"].sum(1)})
    assert g.ndata["s2"].reshape(-1).tolist() == [500.0, 100.0, 3024.0, 0.0]
    g.apply_edges(lambda edges: {"d": edges.dst["h"] - edges.src["h"]})
    assert g.edata["d"].reshape(-1).tolist() == [9.0, -90.0, 90.0, -900.0, 99.0, -99.0]
    g.apply_nodes(lambda nodes: {"h2": nodes.data["h"] + 1}, v=torch.tensor([3]))
    assert g.ndata["h2"].reshape(-1).tolist() == [0.0, 0.0, 0.0, 1001.0]


def test_send_and_recv_pull_and_partial_apply_edges():
    g = small_graph()
    g.ndata["h"] = torch.tensor([[1.0], [10.0], [100.0], [1000.0]])
    g.ndata["s"] = torch.full((4, 1), -1.0)
    g.send_and_recv(torch.tensor([0, 3]), fn.copy_u("h", "m"), fn.sum("m", "s"))
    # edge 0: 0->1 (1), edge 3: 3->2 (1000); nodes 0 and 3 keep -1
    assert g.ndata["s"].reshape(-1).tolist() == [-1.0, 1.0, 1000.0, -1.0]
    g.pull(torch.tensor([2, 3]), fn.copy_u("h", "m"), fn.max("m", "s"))
    assert g.ndata["s"].reshape(-1).tolist() == [-1.0, 1.0, 1000.0, 0.0]
    g.send_and_recv((torch.tensor([2]), torch.tensor([0])), fn.copy_u("h", "m"), fn.sum("m", "s"))
    assert g.ndata["s"].reshape(-1).tolist() == [100.0, 1.0, 1000.0, 0.0]
    g.apply_edges(fn.u_add_v("h", "h", "e"), edges=torch.tensor([1, 5]))
    assert g.edata["e"].reshape(-1).tolist() == [0.0, 110.0, 0.0, 0.0, 0.0, 101.0]


def test_message_passing_errors_are_dgl_shaped():
    g = small_graph()
    g.ndata["h"] = torch.ones(4, 3)
    g.edata["w"] = torch.ones(6, 2)
    with pytest.raises(KeyError, match="no field 'missing'"):
        g.update_all(fn.copy_u("missing", "m"), fn.sum("m", "out"))
    with pytest.raises(DGLError, match="Invalid message .* and reduce .* function pairs"):
        g.update_all(fn.copy_u("h", "m"), fn.sum("x", "out"))
    with pytest.raises(DGLError, match="broadcast|shape"):
        g.update_all(fn.u_mul_e("h", "w", "m"), fn.sum("m", "out"))
    with pytest.raises(AttributeError):
        fn.u_pow_v("h", "h", "m")
    with pytest.raises(ValueError, match="unknown reducer 'prod'"):
        fn.ReduceFunction("prod", "m", "o")
    with pytest.raises(DGLError, match="one row per edge"):
        g.apply_edges(lambda edges: {"bad": torch.ones(2)})
    with pytest.raises(DGLError, match="not a built-in reduce"):
        g.update_all(fn.copy_u("h", "m"), fn.copy_u("h", "m"))
    with pytest.raises(DGLError, match="floating-point"):
        g.ndata["i"] = torch.ones(4, dtype=torch.int64)
        g.update_all(fn.copy_u("i", "m"), fn.sum("m", "o"))


def test_graph_pickles_without_its_native_block():
    g = small_graph()
    g.ndata["h"] = torch.randn(4, 2)
    g.update_all(fn.copy_u("h", "m"), fn.mean("m", "a"))
    g2 = pickle.loads(pickle.dumps(g))
    assert torch.equal(g2.edges()[0], g.edges()[0]) and torch.equal(g2.ndata["a"], g.ndata["a"])
    g2.update_all(fn.copy_u("h", "m"), fn.mean("m", "b"))
    assert torch.allclose(g2.ndata["b"], g.ndata["a"])


def test_native_block_wrapping_keeps_ids_and_data():
    native = dgld._C.make_block(torch.tensor([0, 2, 3]), torch.tensor([0, 2, 1]), 3,
                                torch.tensor([10, 11, 12]), torch.tensor([10, 11]))
    b = dgld.convert.block_from_native(native)
    assert b.is_block and b.num_src_nodes() == 3 and b.num_dst_nodes() == 2 and b.num_edges() == 3
    assert b.srcdata[dgld.NID].tolist() == [10, 11, 12] and b.dstdata[dgld.NID].tolist() == [10, 11]
    assert b.edges()[0].tolist() == [0, 2, 1] and b.edges()[1].tolist() == [0, 0, 1]
    assert b._csr() is native
