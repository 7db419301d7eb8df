"""Typed graphs (dgld.heterograph, typed dgld.create_block) and
dgld.nn.HeteroGraphConv against a dense reference of DGL's formulas, in
double precision, forward and gradcheck."""

import pytest
import torch

import dgld
import dgld.function as fn
import dgld.nn.pytorch as dglnn
from dgld import DGLError

WRITES = ("author", "writes", "paper")
CITES = ("paper", "cites", "paper")
REV = ("paper", "rev", "author")
LIKES = ("author", "likes", "author")
AT = ("paper", "at", "venue")

EDGES = {WRITES: ([0, 1, 1], [0, 2, 3]),        # 2 authors -> 4 papers; paper 1 has no writer
         CITES: ([0, 1, 4, 3], [1, 2, 0, 0]),
         REV: ([0, 2], [0, 1]),
         LIKES: ([], []),                        # a relation without edges
         AT: ([], [])}                           # venue receives nothing
NUM_SRC = {"author": 2, "paper": 5, "venue": 1}
NUM_DST = {"author": 2, "paper": 4, "venue": 1}


def typed_block():
    return dgld.create_block(EDGES, num_src_nodes=NUM_SRC, num_dst_nodes=NUM_DST)


def dense(canonical, ns, nd):
    u, v = (torch.tensor(x, dtype=torch.int64) for x in EDGES[canonical])
    a = torch.zeros(nd, ns, dtype=torch.float64)
    a.index_put_((v, u), torch.ones(u.numel(), dtype=torch.float64), accumulate=True)
    return a


def sage_ref(mod, a, hs, hd):
    neigh = (a @ hs) / a.sum(1, keepdim=True).clamp(min=1.0)
    return hd @ mod.fc_self.weight.T + mod.fc_self.bias + neigh @ mod.fc_neigh.weight.T  # DGL's: fc_self's bias


def gcn_ref(mod, a, hs, hd):
    out_deg = a.sum(0).clamp(min=1.0)
    in_deg = a.sum(1).clamp(min=1.0)
    return in_deg.pow(-0.5)[:, None] * (a @ (hs * out_deg.pow(-0.5)[:, None])) @ mod.weight + mod.bias


def make_mod(kind):
    m = dglnn.SAGEConv(3, 2, "mean") if kind == "sage" else dglnn.GraphConv(3, 2)
    m = m.double()
    with torch.no_grad():
        (m.fc_self.bias if kind == "sage" else m.bias).uniform_(-1, 1)
    return m


class Refuses(torch.nn.Module):
    def forward(self, *args, **kwargs):
        raise AssertionError("called on a relation without edges")


# ------------------------------------------------------------ typed graphs

def test_typed_block_types_counts_and_relations():
    g = typed_block()
    assert g.is_block
    assert g.srctypes == ["author", "paper", "venue"] and g.dsttypes == ["author", "paper", "venue"]
    assert g.ntypes == ["author", "paper", "venue"]
    # DGL's order of the edge types: sorted canonical triples.
    assert g.canonical_etypes == sorted(EDGES) and g.etypes == [e for _, e, _ in sorted(EDGES)]
    assert g.num_src_nodes("paper") == 5 and g.num_dst_nodes("paper") == 4
    assert g.num_nodes("SRC/author") == 2 and g.num_nodes("DST/paper") == 4
    assert g.num_edges("cites") == 4 and g.num_edges() == 9 and g.num_edges(LIKES) == 0
    rel = g["writes"]
    assert rel is g[WRITES] and rel.is_block
    assert rel.num_src_nodes() == 2 and rel.num_dst_nodes() == 4
    u, v = g.edges(etype="writes")
    assert u.tolist() == [0, 1, 1] and v.tolist() == [0, 2, 3]
    assert g.edges(form="eid", etype=CITES).tolist() == [0, 1, 2, 3]
    # More dst than src nodes: message passing on the relation runs.
    rel.srcdata["x"] = torch.tensor([[1.0], [2.0]])
    rel.update_all(fn.copy_u("x", "m"), fn.sum("m", "y"))
    assert rel.dstdata["y"].reshape(-1).tolist() == [1.0, 0.0, 2.0, 2.0]
    assert g.dstnodes["paper"].data["y"] is rel.dstdata["y"]


def test_typed_frames_are_shared_and_keyed_by_type():
    g = typed_block()
    a, p = torch.randn(2, 3), torch.randn(5, 3)
    g.srcdata["h"] = {"author": a, "paper": p}
    assert set(g.srcdata["h"]) == {"author", "paper"} and g.srcdata["h"]["paper"] is p
    assert g.srcnodes["author"].data["h"] is a and g.ndata["h"]["author"] is a
    assert g["cites"].srcdata["h"] is p and g["writes"].srcdata["h"] is a and g["rev"].srcdata["h"] is p
    g.dstnodes["paper"].data["z"] = torch.ones(4, 1)
    assert g["writes"].dstdata["z"] is g.dstdata["z"]["paper"]
    with g.local_scope():
        g.srcdata["h"] = {"author": torch.zeros(2, 3)}
        g["cites"].edata["w"] = torch.ones(4)
        assert bool((g.srcdata["h"]["author"] == 0).all())
    assert g.srcdata["h"]["author"] is a and "w" not in g["cites"].edata
    assert "h" in g.srcdata and "h" not in g.dstdata
    with pytest.raises(DGLError, match="several node types"):
        g.srcdata["q"] = torch.ones(2, 1)
    with pytest.raises(DGLError, match="'nobody' does not exist"):
        g.srcdata["q"] = {"nobody": torch.ones(2, 1)}
    with pytest.raises(DGLError, match="expected data to have 5 rows"):
        g.srcdata["q"] = {"paper": torch.ones(4, 1)}
    with pytest.raises(KeyError):
        g.dstdata["missing"]


def test_heterograph_nonblock():
    g = dgld.heterograph({("user", "follows", "user"): ([0, 1], [1, 2]),
                          ("user", "plays", "game"): ([0, 2], [1, 0])}, num_nodes_dict={"game": 3})
    assert not g.is_block and g.ntypes == ["game", "user"]
    assert g.num_nodes("user") == 3 and g.num_nodes("game") == 3 and g.num_nodes() == 6
    assert not g["plays"].is_block and g["plays"].num_dst_nodes() == 3
    g.ndata["x"] = {"user": torch.arange(3.0).reshape(3, 1), "game": torch.zeros(3, 1)}
    assert g.nodes["user"].data["x"] is g.srcdata["x"]["user"] is g.dstdata["x"]["user"]
    assert g["follows"].ndata["x"] is g.nodes["user"].data["x"]
    assert g.nodes("game").tolist() == [0, 1, 2]
    g["plays"].update_all(fn.copy_u("x", "m"), fn.sum("m", "y"))
    assert g.nodes["game"].data["y"].reshape(-1).tolist() == [2.0, 0.0, 0.0]
    one_type = dgld.heterograph({("user", "follows", "user"): ([0], [1])})
    one_type.ndata["t"] = torch.ones(2, 1)                     # one node type: its frame directly
    assert one_type.ndata["t"].shape == (2, 1) and one_type["follows"].ndata["t"] is one_type.ndata["t"]


def test_typed_graph_errors():
    g = dgld.heterograph({("a", "r", "b"): ([0], [1]), ("b", "r", "a"): ([1], [0])})
    with pytest.raises(DGLError, match="ambiguous"):
        g["r"]
    assert g[("a", "r", "b")].num_edges() == 1
    with pytest.raises(DGLError, match="'s' does not exist"):
        g["s"]
    with pytest.raises(DGLError, match="does not exist"):
        g.num_nodes("c")
    with pytest.raises(DGLError, match="several edge types"):
        g.edges()
    with pytest.raises(DGLError, match="has 1 nodes but the edges name node 1"):
        dgld.heterograph({("a", "r", "b"): ([0], [1])}, num_nodes_dict={"b": 1})
    with pytest.raises(DGLError, match="has 2 nodes but the edges name node 3"):
        dgld.create_block({WRITES: ([0], [3]), CITES: ([0], [0])}, num_src_nodes={"author": 1, "paper": 1},
                          num_dst_nodes={"paper": 2})
    with pytest.raises(DGLError, match=">= 0"):
        dgld.heterograph({("a", "r", "b"): ([-1], [1])})
    with pytest.raises(DGLError, match="canonical edge types"):
        dgld.heterograph({"r": ([0], [1])})
    with pytest.raises(DGLError, match="ambiguous in a block"):
        typed_block().num_nodes("paper")


def test_relations_with_more_dst_than_src_nodes():
    # GATConv takes the dst nodes' attention from their own features (DGL's pair).
    rel = typed_block()["writes"]
    gat = dglnn.GATConv(3, 2, 1, allow_zero_in_degree=True)
    assert gat(rel, (torch.randn(2, 3), torch.randn(4, 3))).shape == (4, 1, 2)
    # GraphConv's self loop (a dgld addition) reads dst v as src v: refused.
    gcn = dglnn.GraphConv(3, 2, self_loop=True, allow_zero_in_degree=True)
    with pytest.raises(RuntimeError, match="at least as many src nodes as dst nodes"):
        gcn(rel, (torch.randn(2, 3), torch.randn(4, 3)))


# ------------------------------------------------------------ HeteroGraphConv

@pytest.mark.parametrize("kind", ["sage", "gcn"])
@pytest.mark.parametrize("agg", ["sum", "max", "min", "mean", "stack"])
def test_heterographconv_against_dense_reference(kind, agg):
    torch.manual_seed(0)
    g = typed_block()
    mods = {"writes": make_mod(kind), "cites": make_mod(kind), "rev": make_mod(kind), "likes": Refuses(),
            "at": Refuses()}
    conv = dglnn.HeteroGraphConv(mods, aggregate=agg)
    ref_of = sage_ref if kind == "sage" else gcn_ref
    xa = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    xp = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)

    def reference(xa, xp):
        src = {"author": xa, "paper": xp}
        per_dst = {}
        for canonical, name in ((WRITES, "writes"), (CITES, "cites"), (REV, "rev")):
            s, _, d = canonical
            a = dense(canonical, NUM_SRC[s], NUM_DST[d])
            per_dst.setdefault(d, []).append(ref_of(mods[name], a, src[s], src[d][:NUM_DST[d]]))
        combine = {"sum": lambda t: t.sum(0), "max": lambda t: t.max(0)[0], "min": lambda t: t.min(0)[0],
                   "mean": lambda t: t.mean(0)}
        if agg == "stack":
            return {d: torch.stack(v, 1) for d, v in per_dst.items()}
        return {d: combine[agg](torch.stack(v, 0)) for d, v in per_dst.items()}

    out = conv(g, {"author": xa, "paper": xp})
    want = reference(xa, xp)
    assert set(out) == {"author", "paper"}          # venue receives nothing: absent
    for d in want:
        assert out[d].shape == want[d].shape
        torch.testing.assert_close(out[d], want[d])
    assert out["paper"].shape[0] == 4 and (agg != "stack" or out["paper"].shape[1] == 2)
    # The same through an explicit (src, dst) pair of dicts.
    pair = conv(g, ({"author": xa, "paper": xp}, {"author": xa[:2], "paper": xp[:4]}))
    torch.testing.assert_close(pair["paper"], want["paper"])

    def flat(xa, xp):
        o = conv(g, {"author": xa, "paper": xp})
        return torch.cat([o["author"].reshape(-1), o["paper"].reshape(-1)])
    assert torch.autograd.gradcheck(flat, (xa, xp))


def test_heterographconv_on_a_heterograph_callable_aggregate_and_mod_args():
    torch.manual_seed(1)
    g = dgld.heterograph({("user", "follows", "user"): ([0, 1, 2], [1, 2, 0]),
                          ("user", "plays", "game"): ([0, 2, 2], [1, 0, 1])},
                         num_nodes_dict={"user": 3, "game": 2})
    mods = {("user", "follows", "user"): make_mod("sage"), "plays": make_mod("sage")}
    seen = []

    def agg(alist, dsttype):
        seen.append((dsttype, len(alist)))
        return sum(alist)
    conv = dglnn.HeteroGraphConv(mods, aggregate=agg)
    xu = torch.randn(3, 3, dtype=torch.float64)
    xg = torch.randn(2, 3, dtype=torch.float64)
    w = {"plays": torch.tensor([1.0, 2.0, 0.5], dtype=torch.float64)}
    out = conv(g, {"user": xu, "game": xg}, mod_kwargs={"plays": {"edge_weight": w["plays"]}})
    assert sorted(seen) == [("game", 1), ("user", 1)]
    a = dense_of(g, "follows", 3, 3)
    torch.testing.assert_close(out["user"], sage_ref(mods[("user", "follows", "user")], a, xu, xu))
    u, v = g.edges(etype="plays")
    aw = torch.zeros(2, 3, dtype=torch.float64)
    aw.index_put_((v, u), w["plays"], accumulate=True)
    deg = dense_of(g, "plays", 3, 2).sum(1, keepdim=True).clamp(min=1.0)
    want = xg @ mods["plays"].fc_self.weight.T + ((aw @ xu) / deg) @ mods["plays"].fc_neigh.weight.T \
        + mods["plays"].fc_self.bias
    torch.testing.assert_close(out["game"], want)
    with pytest.raises(DGLError, match="invalid aggregate"):
        dglnn.HeteroGraphConv(mods, aggregate="prod")
    with pytest.raises(DGLError, match="no module for edge type"):
        dglnn.HeteroGraphConv({"plays": make_mod("sage")})(g, {"user": xu, "game": xg})


def dense_of(g, etype, ns, nd):
    u, v = g.edges(etype=etype)
    a = torch.zeros(nd, ns, dtype=torch.float64)
    a.index_put_((v, u), torch.ones(u.numel(), dtype=torch.float64), accumulate=True)
    return a


def test_every_graph_is_a_dglgraph_and_every_block_a_dglblock():
    """As in DGL: dgld.DGLGraph is dgld.DGLHeteroGraph, the class of
    homogeneous graphs, heterographs and blocks alike; blocks, typed ones
    too, are DGLBlocks; a heterograph's relation graphs are graphs."""
    assert dgld.DGLGraph is dgld.DGLHeteroGraph and issubclass(dgld.DGLBlock, dgld.DGLGraph)
    homo = dgld.graph(([0, 1], [1, 2]))
    block = dgld.create_block(([0, 1], [0, 0]), num_src_nodes=2, num_dst_nodes=1)
    frontier_block = dgld.to_block(homo, torch.tensor([1, 2]))
    hetero = dgld.heterograph(EDGES, num_nodes_dict={"author": 2, "paper": 5, "venue": 1})
    typed = typed_block()
    for g in (homo, block, frontier_block, hetero, typed, hetero[WRITES], hetero[CITES], typed[WRITES]):
        assert isinstance(g, dgld.DGLGraph), type(g)
        assert isinstance(g, dgld.DGLBlock) == g.is_block, type(g)
    assert not isinstance(homo, dgld.DGLBlock) and not isinstance(hetero, dgld.DGLBlock)
    assert isinstance(block, dgld.DGLBlock) and isinstance(typed, dgld.DGLBlock)
    assert not isinstance(hetero[WRITES], dgld.DGLBlock) and isinstance(typed[WRITES], dgld.DGLBlock)
    with pytest.raises(DGLError, match="make graphs with dgld.graph"):
        dgld.DGLGraph(([0], [1]))
    # DGLGraph() is DGL's empty graph, grown in place as DGL's tests build theirs.
    g = dgld.DGLGraph()
    g.add_nodes(3, data={"x": torch.ones(3)})
    g.add_edges(0, 1)
    g.add_edges(torch.tensor([1, 4]), torch.tensor([2, 0]), data={"w": torch.tensor([5.0, 6.0])})
    assert g.num_nodes() == 5 and g.ndata["x"].tolist() == [1.0, 1.0, 1.0, 0.0, 0.0]
    assert [t.tolist() for t in g.edges()] == [[0, 1, 4], [1, 2, 0]] and g.edata["w"].tolist() == [0.0, 5.0, 6.0]
    assert g.in_degrees().tolist() == [1, 1, 1, 0, 0]
    # What needs one node and one edge type says so for a typed graph.
    with pytest.raises(DGLError, match="homogeneous"):
        dgld.reverse(hetero)
    assert dgld.to_block(hetero).is_block  # to_block takes typed graphs (below)


def test_typed_to_block_and_edata_are_dgls():
    # DGL's to_block of a typed frontier: per type, dst nodes first among the
    # sources, then the other sources in order of appearance over the
    # relations and their edges; data and ids carried per type.
    g = dgld.heterograph({("a", "r", "b"): (torch.tensor([0, 1, 2]), torch.tensor([1, 0, 1])),
                          ("b", "s", "a"): (torch.tensor([1]), torch.tensor([2]))}, {"a": 3, "b": 2})
    g.edges[("a", "r", "b")].data["w"] = torch.tensor([1.0, 2.0, 3.0])
    assert set(g.edata["w"]) == {("a", "r", "b")}
    b = dgld.to_block(g, {"b": torch.tensor([1, 0]), "a": torch.tensor([2])})
    assert b.is_block and b.canonical_etypes == g.canonical_etypes
    assert b.srcnodes["a"].data[dgld.NID].tolist() == [2, 0, 1] and b.dstnodes["b"].data[dgld.NID].tolist() == [1, 0]
    assert b.srcnodes["b"].data[dgld.NID].tolist() == [1, 0]
    u, v = b.edges(etype="r")
    assert b.srcnodes["a"].data[dgld.NID][u].tolist() == [0, 1, 2]
    assert b.dstnodes["b"].data[dgld.NID][v].tolist() == [1, 0, 1]
    assert b.edges["r"].data["w"].tolist() == [1.0, 2.0, 3.0]
    b.edata["x"] = {("a", "r", "b"): torch.zeros(3), ("b", "s", "a"): torch.ones(1)}
    assert b.edges["s"].data["x"].tolist() == [1.0]
    with pytest.raises(DGLError, match="must contain all the edge destination nodes"):
        dgld.to_block(g, {"b": torch.tensor([1, 0])})  # the s edge's dst a:2 is missing
    with pytest.raises(DGLError, match="edge type .* does not exist"):
        b.edata["y"] = {("a", "q", "b"): torch.zeros(3)}


def test_compact_graphs_of_a_typed_graph_is_dgls():
    # Per node type: the nodes the edges touch, in order of first appearance
    # (always_preserve first); NID their old ids, edge data carried.
    g = dgld.heterograph({("n1", "r1", "n2"): (torch.tensor([0, 2, 2]), torch.tensor([3, 0, 3]))},
                         {"n1": 4, "n2": 5})
    g.edges["r1"].data["w"] = torch.tensor([1.0, 2.0, 3.0])
    sg = dgld.compact_graphs(g, always_preserve={"n1": torch.tensor([3])})
    assert sg.nodes["n1"].data[dgld.NID].tolist() == [3, 0, 2] and sg.nodes["n2"].data[dgld.NID].tolist() == [3, 0]
    assert [t.tolist() for t in sg.edges(etype="r1")] == [[1, 2, 2], [0, 1, 0]]
    assert sg.edata["w"].tolist() == [1.0, 2.0, 3.0]
