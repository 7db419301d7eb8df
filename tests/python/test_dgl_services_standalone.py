"""DGL's graph services and DistGraph / DistTensor / optimiser calls that
DGL's own distributed tests make (graph_services.py, dist_graph.py,
dist_tensor.py, optim/, role.py), each checked against what the graph's own
edges say, on a one-partition graph in standalone mode (no servers):
- in_subgraph: every in-edge of the seeds; sample_etype_neighbors with one
  int fanout on a homogeneous graph is sample_neighbors' draw; find_edges;
  edge_subgraph; node_attr_schemes;
- DistTensor ownership: a handle that opened an existing name neither
  re-initialises nor deletes it; the creator's `del` deletes a
  non-persistent tensor, not a persistent one;
- SparseAdagrad's state under DGL's names, save() / load() in DGL's
  per-rank files restoring the rows and the hyper-parameters;
- node_split / edge_split with an explicit partition book and rank in a
  process that joined no job (role tables as DGL's tests fill them);
- dgld.heterograph_index / dgld.graph_index constructors."""

import os
import subprocess
import sys
import textwrap

from conftest import BUILD, binary

ENV = dict(os.environ, PYTHONPATH=str(BUILD / "python"), OMP_NUM_THREADS="1", DGL_DIST_MODE="standalone")
GRAPH = "sbm:nodes=2000,avg_degree=6,classes=4,feat_dim=4,seed=5"


def parts(out, n):
    subprocess.run([binary("partition/dgl-partition"), "--log-level", "warn", "--generate", GRAPH, "--num-parts",
                    str(n), "--graph-name", "g", "--output", str(out)], check=True, stdout=subprocess.DEVNULL)
    return out / "g.json"


def run(code, cwd, timeout=120):
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=ENV, text=True,
                       capture_output=True, timeout=timeout)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


PRELUDE = """
    import torch
    import dgld as dgl
    from dgld.distributed import DistGraph, DistTensor, in_subgraph, sample_etype_neighbors, sample_neighbors
    dgl.distributed.initialize("ip_config.txt")
    g = DistGraph("g", part_config={config!r})
    src, dst = g.find_edges(torch.arange(g.num_edges()))
"""


def test_graph_services_match_the_graphs_edges(tmp_path):
    config = str(parts(tmp_path / "p", 1))
    out = run(PRELUDE.format(config=config) + """
    seeds = torch.tensor([0, 7, 99, 1500, 1999])
    sub = in_subgraph(g, seeds)
    assert sub.num_nodes() == g.num_nodes()
    s, d = sub.edges()
    eid = sub.edata[dgl.EID]
    want = torch.nonzero(torch.isin(dst, seeds)).reshape(-1)
    assert sorted(eid.tolist()) == want.tolist() and eid.numel() > 0
    assert torch.equal(s, src[eid]) and torch.equal(d, dst[eid])

    # One fanout on a homogeneous graph: sample_neighbors' draw, edge for edge.
    a = sample_etype_neighbors(g, seeds, 2, _rng_seed=11)
    b = sample_neighbors(g, seeds, 2, _rng_seed=11)
    assert torch.equal(a.edata[dgl.EID], b.edata[dgl.EID])
    assert torch.equal(sample_etype_neighbors(g, seeds, -1, _rng_seed=3).edata[dgl.EID].sort()[0], want)
    assert torch.equal(sample_etype_neighbors(g, {"_N": seeds}, {"_E": -1}).edata[dgl.EID].sort()[0], want)

    u, v = dgl.distributed.find_edges(g, torch.tensor([5, 1, 3]))
    assert torch.equal(u, src[[5, 1, 3]]) and torch.equal(v, dst[[5, 1, 3]])

    eids = torch.tensor([4, 2, 9])
    sg = g.edge_subgraph(eids)
    assert sg.num_edges() == 3 and torch.equal(sg.edata[dgl.EID], eids)
    ends = torch.unique(torch.cat([src[eids], dst[eids]]))
    assert sg.num_nodes() == ends.numel() and set(sg.ndata[dgl.NID].tolist()) == set(ends.tolist())
    full = g.edge_subgraph(eids, relabel_nodes=False)
    assert full.num_nodes() == g.num_nodes() and torch.equal(full.edges()[0], src[eids])

    schemes = g.node_attr_schemes()
    assert schemes["features"].shape == (4,) and schemes["features"].dtype == torch.float32
    g.ndata["t"] = DistTensor((g.num_nodes(), 2), torch.int32, "t")
    assert g.node_attr_schemes()["t"] == (( 2,), torch.int32)
    print("ok")
    """, tmp_path)
    assert "ok" in out


def test_dist_tensor_owner_and_persistence(tmp_path):
    config = str(parts(tmp_path / "p", 1))
    out = run(PRELUDE.format(config=config) + """
    n = g.num_nodes()
    ones = lambda shape, dtype: torch.ones(shape, dtype=dtype)
    a = DistTensor((n, 2), torch.float32, "a", init_func=ones)
    assert a.kvstore_key in g._client.data_name_list()
    # Opening the existing name: no second initialisation (DGL's tests pass
    # a non-callable there), and dropping that handle keeps the tensor.
    b = DistTensor((n, 2), torch.float32, "a", init_func=object())
    assert float(b[torch.arange(n)].sum()) == 2 * n
    del b
    assert a.kvstore_key in g._client.data_name_list()
    key = a.kvstore_key
    del a
    assert key not in g._client.data_name_list()
    a = DistTensor((n, 3), torch.float32, "a")  # the name is free again, with another shape
    p = DistTensor((n, 2), torch.float32, "p", persistent=True)
    del p
    try:
        DistTensor((n, 3), torch.float32, "p")
    except dgl.DGLError:
        pass
    else:
        raise AssertionError("a persistent tensor outlived its handle and refuses another shape")
    print("ok")
    """, tmp_path)
    assert "ok" in out


def test_sparse_adagrad_state_save_and_load(tmp_path):
    config = str(parts(tmp_path / "p", 1))
    out = run(PRELUDE.format(config=config) + f"""
    from dgld.distributed import DistEmbedding
    from dgld.distributed.optim import SparseAdagrad
    n = g.num_nodes()
    emb = DistEmbedding(n, 1, "e1", init_func=lambda s, d: torch.zeros(s, dtype=d))
    opt = SparseAdagrad([emb], lr=0.1, eps=1e-8)
    ids = torch.arange(n)
    with torch.enable_grad():
        loss = (emb(ids) + 1).sum()
    loss.backward()
    opt.step()
    # DGL's arithmetic: state = g^2 = 1, w = -lr * g / (sqrt(1) + eps).
    assert torch.allclose(emb(ids), torch.full((n, 1), -0.1 / (1 + 1e-8)))
    assert torch.equal(opt._state["e1"][ids], torch.ones(n, 1))
    assert torch.equal(DistTensor((n, 1), torch.float32, "e1_sum")[ids], torch.ones(n, 1))
    rows = torch.rand(n, 1)
    opt._state["e1"][ids] = rows
    opt.save({str(tmp_path / "opt.pt")!r})
    other = SparseAdagrad([emb], lr=0.5, eps=1e-3)
    other._state["e1"][ids] = torch.zeros(n, 1)
    other.load({str(tmp_path / "opt.pt")!r})
    assert torch.equal(other._state["e1"][ids], rows)
    assert other._lr == 0.1 and other._eps == 1e-8
    print("ok")
    """, tmp_path)
    assert "ok" in out
    assert (tmp_path / "opt.pt_0").exists()


def test_split_with_a_book_and_rank_and_no_job(tmp_path):
    config = str(parts(tmp_path / "p", 2))
    out = run(f"""
    import torch
    import dgld as dgl
    from dgld.distributed import load_partition_book, node_split, edge_split, role
    gpb = load_partition_book({config!r}, 0)[0]
    mask = torch.zeros(gpb._num_nodes(), dtype=torch.bool)
    mask[::3] = True
    emask = torch.zeros(gpb._num_edges(), dtype=torch.bool)
    emask[::5] = True
    try:
        node_split(mask, gpb, rank=0)
    except dgl.DGLError as e:
        assert "PER_ROLE_RANK" in str(e), e
    else:
        raise AssertionError("no job and no role tables, yet the number of trainers was known")
    for trainers in (2, 4):
        role.PER_ROLE_RANK["default"] = {{i: i for i in range(trainers)}}
        got, egot = [], []
        for part in range(2):
            book = load_partition_book({config!r}, part)[0]
            owned = set(book.partid2nids(part).tolist())
            for r in range(part * trainers // 2, (part + 1) * trainers // 2):
                local = node_split(mask, book, rank=r, force_even=False)
                assert set(local.tolist()) <= owned
                got.append(local)
                egot.append(edge_split(emask, book, rank=r, force_even=True))
        assert torch.equal(torch.cat(got).sort()[0], torch.nonzero(mask).reshape(-1))
        assert torch.equal(torch.cat(egot).sort()[0], torch.nonzero(emask).reshape(-1))
    print("ok")
    """, tmp_path)
    assert "ok" in out


def test_graph_index_constructors(tmp_path):
    out = run("""
    import scipy.sparse, torch
    import dgld
    from dgld.graph_index import create_graph_index
    from dgld.heterograph_index import create_unitgraph_from_coo
    g = create_unitgraph_from_coo(1, 4, 4, torch.tensor([0, 1]), torch.tensor([2, 3]), ["coo"])
    assert g.num_nodes() == 4 and g.edges()[1].tolist() == [2, 3]
    b = create_unitgraph_from_coo(2, 3, 5, [0, 2], [4, 1], "csr")
    assert b.num_nodes("_U") == 3 and b.num_nodes("_V") == 5 and b.num_edges() == 2
    assert create_graph_index([(0, 1), (1, 2)], readonly=True).num_edges() == 2
    m = scipy.sparse.coo_matrix(([1, 1], ([0, 2], [1, 0])), shape=(3, 3))
    assert create_graph_index(m, readonly=True).num_nodes() == 3
    try:
        create_graph_index(None, readonly=True)
    except dgld.DGLError:
        pass
    else:
        raise AssertionError("an empty read-only graph index was made")
    print("ok")
    """, tmp_path)
    assert "ok" in out
