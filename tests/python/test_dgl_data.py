"""dgld.data's citation datasets (DGL's CitationGraphDataset /
CoraGraphDataset, ...) read from small copies the tests write in DGL's
download format (the Planetoid pickles) and in OGB's raw layout, against
what DGL's own loader computes from the same files (networkx and SciPy
replaying DGL's steps); where the copy is looked for and the error
without one; the unpickler's refusal of anything but data; the Cora copy
of ../shared/datasets/cora when the machine has it. No job needed."""

import argparse
import gzip
import hashlib
import os
import pickle
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
import torch

import dgld
from dgld import DGLError
from dgld.data import (CitationGraphDataset, CiteseerGraphDataset, CoraGraphDataset, DatasetNotFound,
                       PubmedGraphDataset)

sp = pytest.importorskip("scipy.sparse")

REPO = Path(__file__).resolve().parents[2]
SHARED_CORA = REPO.parent / "shared" / "datasets" / "cora"
CORA_URL = "https://data.dgl.ai/dataset/cora_v2.zip"

N, DIM, CLASSES, TRAIN = 520, 6, 3, 9


def planetoid(seed, test_ids):
    """The Planetoid objects of a random graph of N nodes: (objects by part,
    test.index ids in file order)."""
    rng = np.random.default_rng(seed)
    feats = (rng.random((N, DIM)) < 0.4).astype(np.float32)
    feats[5] = 0  # a row of zeros stays zero after normalising
    labels = rng.integers(0, CLASSES, N)
    onehot = np.eye(CLASSES, dtype=np.int32)[labels]
    test_sorted = np.sort(test_ids)
    # Planetoid stores the test rows in sorted-id order, after the others.
    other = N - len(range(test_sorted.min(), test_sorted.max() + 1))
    objs = {
        "x": sp.csr_matrix(feats[:TRAIN]), "y": onehot[:TRAIN],
        "allx": sp.csr_matrix(feats[:other]), "ally": onehot[:other],
        "tx": sp.csr_matrix(feats[test_sorted]), "ty": onehot[test_sorted],
    }
    graph = defaultdict(list)
    keys = rng.permutation(N)  # keys not in id order
    for n in keys:
        graph[int(n)] = []
    for _ in range(3 * N):
        u, v = (int(a) for a in rng.integers(0, N, 2))
        if u != v:
            graph[u].append(v)
            if rng.random() < 0.3:
                graph[v].append(u)  # cited both ways: one undirected edge
    graph[int(keys[0])].append(int(keys[0]))  # a self-loop
    graph[int(keys[1])].extend([int(keys[2]), int(keys[2])])  # listed twice
    objs["graph"] = graph
    return objs, list(test_ids)


def write_planetoid(folder, prefix, objs, test_ids):
    folder.mkdir(parents=True, exist_ok=True)
    for i, (part, obj) in enumerate(objs.items()):
        # protocol 0 and 2 with Python 2's module names (copy_reg,
        # __builtin__), as in the Planetoid files written by Python 2
        with open(folder / f"ind.{prefix}.{part}", "wb") as f:
            pickle.dump(obj, f, protocol=0 if i % 2 else 2, fix_imports=True)
    (folder / f"ind.{prefix}.test.index").write_text("".join(f"{i}\n" for i in test_ids))


def dgl_reference(objs, test_ids, reverse_edge, citeseer=False):
    """What DGL 1.1.3's CitationGraphDataset.process() makes of the objects:
    its steps replayed with SciPy and networkx (None for the edges when
    networkx is missing)."""
    x, y, tx, ty, allx, ally = (objs[p] for p in ("x", "y", "tx", "ty", "allx", "ally"))
    test_idx_range = np.sort(test_ids)
    if citeseer:
        full = range(min(test_ids), max(test_ids) + 1)
        tx_ext = sp.lil_matrix((len(full), x.shape[1]))
        tx_ext[test_idx_range - min(test_idx_range), :] = tx
        tx = tx_ext
        ty_ext = np.zeros((len(full), y.shape[1]))
        ty_ext[test_idx_range - min(test_idx_range), :] = ty
        ty = ty_ext
    features = sp.vstack((allx, tx)).tolil()
    features[test_ids, :] = features[test_idx_range, :]
    rowsum = np.asarray(features.sum(1))
    zero = np.equal(rowsum, 0.0).flatten()
    rowsum[zero] = np.nan
    r_inv = np.power(rowsum, -1).flatten()
    r_inv[zero] = 0.0
    feat = np.asarray(sp.diags(r_inv).dot(features).todense())
    onehot = np.vstack((ally, ty))
    onehot[test_ids, :] = onehot[test_idx_range, :]
    labels = np.argmax(onehot, 1)
    n = labels.shape[0]
    masks = {}
    for key, ids in (("train_mask", range(len(y))), ("val_mask", range(len(y), len(y) + 500)),
                     ("test_mask", test_idx_range.tolist())):
        m = np.zeros(n, dtype=bool)
        m[list(ids)] = True
        masks[key] = m
    try:
        import networkx as nx
    except ImportError:
        return feat, labels, masks, onehot.shape[1], None
    if reverse_edge:
        g = nx.DiGraph(nx.from_dict_of_lists(objs["graph"]))
        g = nx.convert_node_labels_to_integers(g, ordering="sorted")  # dgl.from_networkx
        g = nx.convert_node_labels_to_integers(g, ordering="sorted")  # and its networkx2tensor
        edges = list(g.edges)
    else:
        edges = list(nx.Graph(nx.from_dict_of_lists(objs["graph"])).edges())
    return feat, labels, masks, onehot.shape[1], ([u for u, _ in edges], [v for _, v in edges])


def url_hash(url):
    return hashlib.sha1(url.encode("utf-8")).hexdigest()[:8]


def check_against_reference(ds, ref, objs, reverse_edge):
    feat, labels, masks, num_classes, edges = ref
    g = ds[0]
    assert isinstance(g, dgld.DGLGraph) and len(ds) == 1 and g.idtype == torch.int64
    assert g.num_nodes() == labels.shape[0] and ds.num_classes == num_classes == ds.num_labels
    assert g.ndata["feat"].dtype == torch.float32 and torch.equal(g.ndata["feat"], torch.tensor(feat,
                                                                                               dtype=torch.float32))
    assert g.ndata["label"].dtype == torch.int64 and g.ndata["label"].tolist() == labels.tolist()
    for key, m in masks.items():
        assert g.ndata[key].dtype == torch.bool and g.ndata[key].tolist() == m.tolist(), key
    src, dst = (t.tolist() for t in g.edges())
    if edges is not None:
        assert (src, dst) == edges  # DGL's edges in DGL's edge order
    pairs = {(u, v) for u, nbrs in objs["graph"].items() for v in nbrs}
    undirected = {(min(u, v), max(u, v)) for u, v in pairs}
    if reverse_edge:
        assert sorted(zip(src, dst)) == sorted({(u, v) for e in undirected for u, v in (e, e[::-1])})
    else:
        assert sorted((min(u, v), max(u, v)) for u, v in zip(src, dst)) == sorted(undirected)


@pytest.mark.parametrize("reverse_edge", [True, False])
def test_cora_in_dgls_download_format(tmp_path, monkeypatch, reverse_edge):
    objs, test_ids = planetoid(1, np.random.default_rng(2).permutation(np.arange(510, 520)))
    folder = tmp_path / f"cora_v2_{url_hash(CORA_URL)}"  # where DGL 1.x unzips its download
    write_planetoid(folder, "cora_v2", objs, test_ids)
    monkeypatch.setenv("DGL_DOWNLOAD_DIR", str(tmp_path))
    monkeypatch.delenv("DGL_REPO", raising=False)
    ds = CitationGraphDataset("cora", verbose=False, reverse_edge=reverse_edge)
    assert ds.raw_path == str(folder) and ds.name == "cora_v2" and ds.reverse_edge == reverse_edge
    check_against_reference(ds, dgl_reference(objs, test_ids, reverse_edge), objs, reverse_edge)
    # CoraGraphDataset is the same dataset; raw_dir given directly; a
    # transform applies at each access
    seen = []
    ds2 = CoraGraphDataset(raw_dir=str(tmp_path), verbose=False, reverse_edge=reverse_edge,
                           transform=lambda g: seen.append(g) or g)
    assert torch.equal(ds2[0].edges()[0], ds[0].edges()[0]) and len(seen) == 1
    with pytest.raises(IndexError):
        ds[1]


def test_citeseer_gaps_and_folder_names(tmp_path, capsys):
    # Citeseer's test ids have gaps; DGL pads its tx / ty with zero rows.
    test_ids = [515, 510, 519, 511, 512, 514, 516, 518]  # 513 and 517 missing
    objs, test_ids = planetoid(3, np.array(test_ids))
    write_planetoid(tmp_path / "citeseer", "citeseer", objs, test_ids)  # DGL 0.x folder name
    ds = CiteseerGraphDataset(raw_dir=str(tmp_path))
    check_against_reference(ds, dgl_reference(objs, test_ids, True, citeseer=True), objs, True)
    out = capsys.readouterr().out  # verbose by default, as DGL
    assert "NumNodes: 520" in out and "NumTestSamples: 8" in out
    # Planetoid's own prefix (ind.cora.*) in a folder named cora
    objs, test_ids = planetoid(4, np.arange(519, 509, -1))
    write_planetoid(tmp_path / "other" / "cora", "cora", objs, test_ids)
    ds = CoraGraphDataset(raw_dir=str(tmp_path / "other"), verbose=False)
    check_against_reference(ds, dgl_reference(objs, test_ids, True), objs, True)


def test_not_found_names_the_paths(tmp_path, monkeypatch):
    monkeypatch.setenv("DGL_DOWNLOAD_DIR", str(tmp_path / "nothing"))
    monkeypatch.delenv("DGL_REPO", raising=False)
    with pytest.raises(DatasetNotFound) as e:
        CoraGraphDataset(verbose=False)
    msg = str(e.value)
    assert str(tmp_path / "nothing" / f"cora_v2_{url_hash(CORA_URL)}") in msg
    assert "downloads nothing" in msg and "ind.cora_v2." in msg and CORA_URL in msg
    assert isinstance(e.value, DGLError) and isinstance(e.value, FileNotFoundError)
    assert not (tmp_path / "nothing").exists()  # nothing created
    with pytest.raises(DatasetNotFound, match="pubmed"):
        PubmedGraphDataset(raw_dir=str(tmp_path), verbose=False)
    with pytest.raises(DGLError, match="'cora', 'citeseer' or 'pubmed'"):
        CitationGraphDataset("reddit", raw_dir=str(tmp_path))
    with pytest.raises(DGLError, match="reorder"):
        CoraGraphDataset(raw_dir=str(tmp_path), reorder=True)


class Exploit:
    def __reduce__(self):
        return (os.system, ("touch " + str(EXPLOIT_MARK),))


EXPLOIT_MARK = Path("/nonexistent")


def test_unpickler_refuses_code(tmp_path):
    global EXPLOIT_MARK
    EXPLOIT_MARK = tmp_path / "ran"
    objs, test_ids = planetoid(5, np.arange(510, 520))
    write_planetoid(tmp_path / "cora", "cora", objs, test_ids)
    with open(tmp_path / "cora" / "ind.cora.graph", "wb") as f:
        pickle.dump({0: [Exploit()]}, f, protocol=2)
    with pytest.raises(DGLError, match="not allowed"):
        CoraGraphDataset(raw_dir=str(tmp_path), verbose=False)
    assert not EXPLOIT_MARK.exists()


def write_ogb(folder, n, edges, feats, labels, split):
    raw = folder / "raw"
    raw.mkdir(parents=True)

    def put(path, rows):
        with gzip.open(path, "wt") as f:
            f.write("".join(",".join(str(v) for v in np.atleast_1d(r)) + "\n" for r in rows))
    put(raw / "num-node-list.csv.gz", [n])
    put(raw / "num-edge-list.csv.gz", [len(edges)])
    put(raw / "edge.csv.gz", edges)
    put(raw / "node-feat.csv.gz", feats)
    put(raw / "node-label.csv.gz", labels)
    for name, ids in split.items():
        (folder / "split" / "public").mkdir(parents=True, exist_ok=True)
        put(folder / "split" / "public" / f"{name}.csv.gz", ids)


def test_ogb_raw_layout(tmp_path):
    edges = [(0, 3), (1, 2), (2, 4), (0, 1)]
    feats = [[1, 0, 1], [0, 0, 0], [1, 1, 1], [0, 1, 0], [2, 0, 0]]
    write_ogb(tmp_path / "cora", 5, edges, feats, [2, 0, 1, 1, 0], {"train": [0, 1], "valid": [2], "test": [3, 4]})
    ds = CoraGraphDataset(raw_dir=str(tmp_path), verbose=False)
    g = ds[0]
    assert ds.raw_path == str(tmp_path / "cora") and ds.num_classes == 3 and g.num_nodes() == 5
    src, dst = (t.tolist() for t in g.edges())
    # both ways, each once, sorted by (source, destination)
    both = sorted({(u, v) for a, b in edges for u, v in ((a, b), (b, a))})
    assert list(zip(src, dst)) == both
    expect = torch.tensor([[0.5, 0, 0.5], [0, 0, 0], [1 / 3, 1 / 3, 1 / 3], [0, 1, 0], [1, 0, 0]])
    assert torch.allclose(g.ndata["feat"], expect) and g.ndata["feat"].dtype == torch.float32
    assert g.ndata["label"].tolist() == [2, 0, 1, 1, 0]
    assert g.ndata["train_mask"].tolist() == [True, True, False, False, False]
    assert g.ndata["val_mask"].tolist() == [False, False, True, False, False]
    assert g.ndata["test_mask"].tolist() == [False, False, False, True, True]
    single = CoraGraphDataset(raw_dir=str(tmp_path), verbose=False, reverse_edge=False)[0]
    assert sorted(zip(*[t.tolist() for t in single.edges()])) == sorted(edges)


def test_load_data_and_unsupported_names(tmp_path, monkeypatch):
    objs, test_ids = planetoid(6, np.arange(510, 520))
    write_planetoid(tmp_path / "cora_v2", "cora_v2", objs, test_ids)
    monkeypatch.setenv("DGL_DOWNLOAD_DIR", str(tmp_path))
    ds = dgld.data.load_data(argparse.Namespace(dataset="cora"))
    assert isinstance(ds, CoraGraphDataset) and ds[0].num_nodes() == N
    with pytest.raises(DGLError, match="downloads nothing"):
        dgld.data.load_data(argparse.Namespace(dataset="reddit"))
    for cls in (dgld.data.WN18Dataset, dgld.data.FB15kDataset, dgld.data.FB15k237Dataset):
        with pytest.raises(DGLError, match="not implemented by dgld"):
            cls()


def test_user_subclass_of_dgldataset(tmp_path):
    calls = []

    class Mine(dgld.data.DGLDataset):
        def process(self):
            calls.append("process")

        def save(self):
            calls.append("save")

        def __getitem__(self, i):
            return i

        def __len__(self):
            return 3

    ds = Mine("mine", raw_dir=str(tmp_path), hash_key=(1, 2))
    assert calls == ["process", "save"] and len(ds) == 3 and ds.raw_path == str(tmp_path / "mine")
    assert ds.save_path == str(tmp_path / "mine") and len(ds.hash) == 8 and "mine" in repr(ds)


@pytest.mark.skipif(not (SHARED_CORA / "raw" / "edge.csv.gz").exists(),
                    reason=f"no Cora copy in OGB's raw layout at {SHARED_CORA} (only some machines have one)")
def test_real_cora_from_the_shared_copy(monkeypatch):
    monkeypatch.setenv("DGL_DOWNLOAD_DIR", str(SHARED_CORA.parent))
    ds = dgld.data.CitationGraphDataset("cora", verbose=False)
    g = ds[0]
    # DGL's figures for Cora (its CoraGraphDataset docstring)
    assert (g.num_nodes(), g.num_edges(), g.ndata["feat"].shape[1], ds.num_classes) == (2708, 10556, 1433, 7)
    assert [int(g.ndata[k].sum()) for k in ("train_mask", "val_mask", "test_mask")] == [140, 500, 1000]
    assert g.ndata["train_mask"][:140].all() and g.ndata["val_mask"][140:640].all()
    assert torch.allclose(g.ndata["feat"].sum(1), torch.ones(2708))
    src, dst = g.edges()
    assert not bool((src == dst).any()) and torch.equal(torch.sort(src * 2708 + dst).values,
                                                        torch.sort(dst * 2708 + src).values)
