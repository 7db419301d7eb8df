"""DGL's citation datasets (dgl.data.CitationGraphDataset and
CoraGraphDataset, CiteseerGraphDataset, PubmedGraphDataset) from a local
copy: dgld downloads nothing.

dataset[0] is a dgld graph with DGL's node data: feat (float32, each row
divided by its sum), label (int64), train_mask / val_mask / test_mask
(bool, the GCN paper's public split); num_classes as DGL.

Where the copy is looked for, under raw_dir (argument, else
DGL_DOWNLOAD_DIR, else ~/.dgl), in this order: DGL's own folder
<dgl name>_<url hash> (cora's DGL name is cora_v2, so e.g.
~/.dgl/cora_v2_d697a464 when DGL_REPO is unset), <dgl name>, the short
name (cora, citeseer, pubmed), and raw_dir itself. A folder is used if it
holds either

- DGL's download (what DGL unzips from data.dgl.ai/dataset/<dgl
  name>.zip, the Planetoid files): ind.<prefix>.{x,y,tx,ty,allx,ally,graph}
  (Python pickles: SciPy sparse matrices, NumPy arrays, the adjacency
  lists as a dict) and ind.<prefix>.test.index (one id a line), prefix the
  DGL name or the short name. Read as DGL's process() reads them, so the
  graph has DGL's nodes, edges and edge ids. The pickles are read by an
  unpickler that accepts only NumPy arrays, SciPy sparse matrices and
  Python containers, nothing that runs code;
- or OGB's raw layout: raw/edge.csv.gz (each undirected edge once),
  raw/node-feat.csv.gz, raw/node-label.csv.gz, raw/num-node-list.csv.gz and
  split/<name>/{train,valid,test}.csv.gz (split/public when there are
  several). The edges are made both ways (each once, as DGL's), sorted by
  (source, destination): the same graph as DGL's, but DGL's edge ids
  follow the order of the adjacency lists, which this layout does not
  keep, so edge ids differ from DGL's.

Nothing is cached (DGL caches in its own binary graph format, which dgld
does not write); reorder=True (dgl.reorder_graph) is not supported."""

import gzip
import os
import pickle

import numpy as np
import torch

from .._errors import DGLError
from .dgl_dataset import DatasetNotFound, DGLBuiltinDataset
from .utils import _get_dgl_url

__all__ = ["CitationGraphDataset", "CoraGraphDataset", "CiteseerGraphDataset", "PubmedGraphDataset", "load_cora",
           "load_citeseer", "load_pubmed"]

# The short name -> DGL's dataset name (DGL's Cora is its "cora_v2", the
# GCN paper's Planetoid files) and the file DGL downloads.
_DGL_NAMES = {"cora": "cora_v2", "citeseer": "citeseer", "pubmed": "pubmed"}
_PARTS = ("x", "y", "tx", "ty", "allx", "ally", "graph")


# ---------------------------------------------------------------------------
# Reading DGL's (Planetoid's) files


class _PlanetoidUnpickler(pickle.Unpickler):
    """Unpickles the Planetoid files (written by Python 2, or re-written by
    Python 3) allowing only the classes they hold: NumPy arrays, SciPy
    sparse matrices, dicts and lists, and the helpers pickle rebuilds them
    with (copyreg._reconstructor, _codecs.encode)."""

    _BUILTINS = {"object", "list", "dict", "set", "frozenset", "tuple", "int", "float", "complex", "bool", "str",
                 "bytes", "bytearray", "slice", "range", "long", "unicode", "xrange"}
    _NUMPY = {("numpy", "ndarray"), ("numpy", "dtype"), ("numpy.core.multiarray", "_reconstruct"),
              ("numpy.core.multiarray", "scalar"), ("numpy.core.numeric", "_frombuffer"),
              ("numpy._core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "scalar"),
              ("numpy._core.numeric", "_frombuffer")}

    def find_class(self, module, name):
        allowed = ((module in ("builtins", "__builtin__") and name in self._BUILTINS)
                   or (module, name) in self._NUMPY
                   or (module in ("copy_reg", "copyreg") and name == "_reconstructor")
                   or (module == "_codecs" and name == "encode")  # bytes in Python 3's protocol 2
                   or (module == "collections" and name in ("defaultdict", "OrderedDict"))
                   or (module.split(".")[:2] == ["scipy", "sparse"] and name.endswith(("_matrix", "_array"))))
        if not allowed:
            raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a Planetoid dataset file")
        return super().find_class(module, name)


def _load_pickle(path):
    with open(path, "rb") as f:
        return _PlanetoidUnpickler(f, encoding="latin1").load()


def _dense(m):
    return np.asarray(m.todense()) if hasattr(m, "todense") else np.asarray(m)


def _row_normalise(feats):
    """Each row divided by its sum (rows summing to 0 stay 0), in the
    features' float dtype, as DGL's _preprocess_features."""
    if not np.issubdtype(feats.dtype, np.floating):
        feats = feats.astype(np.float64)
    rowsum = feats.sum(1)
    inv = np.zeros_like(rowsum)
    nonzero = rowsum != 0
    inv[nonzero] = np.power(rowsum[nonzero], -1)
    return feats * inv[:, None]


def _nx_add_edge(adj, u, v):
    adj.setdefault(u, {})
    adj.setdefault(v, {})
    adj[u][v] = None
    adj[v][u] = None


def _planetoid_edges(adjlists, reverse_edge):
    """The (src, dst) lists of DGL's graph of the adjacency lists, in DGL's
    edge order, and its node count. DGL makes an undirected networkx graph
    of the lists (nodes in key order, then neighbours not among the keys;
    each node's neighbours in order of first mention) and then
    - reverse_edge: both directions of each edge, node by node in that
      order, neighbours in order, node labels replaced by their rank in
      sorted order;
    - otherwise: a copy of that graph (whose neighbour orders are rebuilt
      edge by edge) listing each edge once, from the first of its ends
      reached, with the labels as ids.
    Replayed here with dicts in the same insertion orders."""
    adj = {n: {} for n in adjlists}
    for n, nbrs in adjlists.items():
        for m in nbrs:
            _nx_add_edge(adj, n, m)
    if reverse_edge:
        rank = {n: i for i, n in enumerate(sorted(adj))}
        src = [rank[u] for u in adj for _ in adj[u]]
        dst = [rank[v] for u in adj for v in adj[u]]
        return src, dst, len(adj)
    copy = {n: {} for n in adj}
    for u in adj:
        for v in adj[u]:
            _nx_add_edge(copy, u, v)
    src, dst, seen = [], [], set()
    for u in copy:
        for v in copy[u]:
            if v not in seen:
                src.append(u)
                dst.append(v)
        seen.add(u)
    return src, dst, (max(max(src), max(dst)) + 1 if src else 0)


def _read_planetoid(folder, prefix, short, reverse_edge):
    """(src, dst, num_nodes, feats, onehot, train ids, val ids, test ids) as
    DGL's CitationGraphDataset.process() computes them."""
    objs = {}
    for part in _PARTS:
        path = os.path.join(folder, f"ind.{prefix}.{part}")
        try:
            objs[part] = _load_pickle(path)
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, ImportError) as e:
            raise DGLError(f"{path}: not a Planetoid dataset file DGL can read ({e})") from None
    with open(os.path.join(folder, f"ind.{prefix}.test.index")) as f:
        test_idx_reorder = np.array([int(line) for line in f if line.strip()], dtype=np.int64)
    test_idx_range = np.sort(test_idx_reorder)
    x, y, tx, ty, allx, ally = (_dense(objs[p]) for p in _PARTS[:6])
    if short == "citeseer" and test_idx_range.size:
        # Citeseer's test ids have gaps (isolated nodes with no features):
        # DGL pads tx / ty with zero rows there (float64, as SciPy's
        # lil_matrix it uses).
        lo = int(test_idx_range.min())
        span = int(test_idx_range.max()) - lo + 1
        tx_full = np.zeros((span, x.shape[1]))
        tx_full[test_idx_range - lo] = tx
        ty_full = np.zeros((span, y.shape[1]))
        ty_full[test_idx_range - lo] = ty
        tx, ty = tx_full, ty_full
    feats = np.vstack([allx, tx])
    feats[test_idx_reorder] = feats[test_idx_range]
    onehot = np.vstack([ally, ty])
    onehot[test_idx_reorder] = onehot[test_idx_range]
    if len(y) + 500 > feats.shape[0]:
        raise DGLError(f"{folder}: {feats.shape[0]} nodes, but DGL's split needs {len(y)} training nodes and the "
                       "500 after them for validation")
    src, dst, n = _planetoid_edges(objs["graph"], reverse_edge)
    train = np.arange(len(y))
    val = np.arange(len(y), len(y) + 500)
    return src, dst, n, feats, onehot, train, val, test_idx_range


# ---------------------------------------------------------------------------
# Reading OGB's raw layout


def _read_csv_gz(path, dtype):
    with gzip.open(path, "rt") as f:
        text = f.read().strip()
    if not text:
        return np.zeros(0, dtype=dtype)
    values = np.fromstring(text.replace("\n", ","), sep=",", dtype=np.float64)
    return values.astype(dtype) if dtype != np.float64 else values


def _ogb_split_dir(folder):
    root = os.path.join(folder, "split")
    names = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d))) if os.path.isdir(root) else []
    if "public" in names:
        return os.path.join(root, "public")
    if len(names) == 1:
        return os.path.join(root, names[0])
    raise DGLError(f"{root}: expected one split folder (or split/public) with train/valid/test.csv.gz, found "
                   f"{names or 'none'}")


def _read_ogb(folder, reverse_edge):
    raw = os.path.join(folder, "raw")
    n = int(_read_csv_gz(os.path.join(raw, "num-node-list.csv.gz"), np.int64)[0])
    edges = _read_csv_gz(os.path.join(raw, "edge.csv.gz"), np.int64).reshape(-1, 2)
    feats = _read_csv_gz(os.path.join(raw, "node-feat.csv.gz"), np.float32)
    if feats.size % max(n, 1):
        raise DGLError(f"{raw}/node-feat.csv.gz: {feats.size} values for {n} nodes")
    feats = feats.reshape(n, -1)
    labels = _read_csv_gz(os.path.join(raw, "node-label.csv.gz"), np.float64)
    if labels.size != n:
        raise DGLError(f"{raw}/node-label.csv.gz: {labels.size} labels for {n} nodes")
    labels = np.where(np.isnan(labels), -1, labels).astype(np.int64)
    if edges.size and (edges.min() < 0 or edges.max() >= n):
        raise DGLError(f"{raw}/edge.csv.gz names a node outside 0..{n - 1}")
    split = _ogb_split_dir(folder)
    ids = [_read_csv_gz(os.path.join(split, f"{part}.csv.gz"), np.int64) for part in ("train", "valid", "test")]
    u, v = edges[:, 0], edges[:, 1]
    if reverse_edge:
        keys = np.unique(np.concatenate([u * n + v, v * n + u]))
    else:
        keys = np.unique(np.minimum(u, v) * n + np.maximum(u, v))
    return keys // max(n, 1), keys % max(n, 1), n, feats, labels, ids


# ---------------------------------------------------------------------------
# The datasets


class CitationGraphDataset(DGLBuiltinDataset):
    """The citation graphs Cora, Citeseer and Pubmed (DGL's
    CitationGraphDataset): see the module doc for where the local copy is
    looked for and in which formats.

    Parameters are DGL's: name ('cora', 'citeseer' or 'pubmed'), raw_dir,
    force_reload (no effect: nothing is cached), verbose (print the counts),
    reverse_edge (both directions of each citation, default True),
    transform (applied to the graph at each access), reorder (not
    supported)."""

    _urls = {"cora_v2": "dataset/cora_v2.zip", "citeseer": "dataset/citeseer.zip", "pubmed": "dataset/pubmed.zip"}

    def __init__(self, name, raw_dir=None, force_reload=False, verbose=True, reverse_edge=True, transform=None,
                 reorder=False):
        short = str(name).lower()
        if short not in _DGL_NAMES:
            raise DGLError(f"CitationGraphDataset: name must be 'cora', 'citeseer' or 'pubmed', got {name!r}")
        if reorder:
            raise DGLError("CitationGraphDataset(reorder=True): dgl.reorder_graph is not supported by dgld")
        self._short = short
        self._reverse_edge = reverse_edge
        self._reorder = reorder
        self._source = None
        dgl_name = _DGL_NAMES[short]
        super().__init__(dgl_name, url=_get_dgl_url(self._urls[dgl_name]), raw_dir=raw_dir,
                         force_reload=force_reload, verbose=verbose, transform=transform)

    # Where the files are.

    def _candidates(self):
        dirs = [os.path.join(self.raw_dir, self.name + self._url_suffix()), os.path.join(self.raw_dir, self.name),
                os.path.join(self.raw_dir, self._short), self.raw_dir]
        return list(dict.fromkeys(dirs))

    def _locate(self):
        """(kind, folder, prefix) of the first folder holding a copy: kind
        'dgl' (Planetoid files named ind.<prefix>.*) or 'ogb'; None if
        there is none."""
        if self._source is None:
            for d in self._candidates():
                for prefix in dict.fromkeys([self.name, self._short]):
                    needed = [f"ind.{prefix}.{p}" for p in _PARTS + ("test.index",)]
                    if all(os.path.isfile(os.path.join(d, f)) for f in needed):
                        self._source = ("dgl", d, prefix)
                        return self._source
                if os.path.isfile(os.path.join(d, "raw", "edge.csv.gz")):
                    self._source = ("ogb", d, None)
                    return self._source
        return self._source

    @property
    def raw_path(self):
        """The folder the dataset was read from; DGL's own folder
        (raw_dir/<dgl name>_<url hash>) when there is no copy."""
        found = self._locate()
        return found[1] if found else os.path.join(self.raw_dir, self.name + self._url_suffix())

    def _download(self):
        if self._locate() is None:
            self.download()

    def download(self):
        searched = ", ".join(self._candidates())
        what = (f"CitationGraphDataset({self._short!r})" if type(self) is CitationGraphDataset
                else f"{type(self).__name__}()")
        also = f" (or ind.{self._short}.*)" if self._short != self.name else ""
        raise DatasetNotFound(
            f"{what}: no local copy of the dataset; looked in {searched} for DGL's files "
            f"ind.{self.name}.{{x,y,tx,ty,allx,ally,graph,test.index}}{also} (the contents of {self.url}) or OGB's "
            "raw layout (raw/edge.csv.gz, ...). dgld downloads nothing: put a copy there, or point raw_dir or "
            "DGL_DOWNLOAD_DIR at the folder that holds it")

    # Building the graph.

    def process(self):
        from ..convert import graph
        kind, folder, prefix = self._locate()
        if kind == "dgl":
            src, dst, n, feats, onehot, train, val, test = _read_planetoid(folder, prefix, self._short,
                                                                           self._reverse_edge)
            labels = np.argmax(onehot, 1) if onehot.size else np.zeros(onehot.shape[0], dtype=np.int64)
            num_classes = onehot.shape[1]
        else:
            src, dst, n, feats, labels, (train, val, test) = _read_ogb(folder, self._reverse_edge)
            num_classes = int(labels.max()) + 1 if labels.size else 0
        if n != labels.shape[0]:
            raise DGLError(f"{folder}: the graph has {n} nodes but there are {labels.shape[0]} labels")
        g = graph((torch.as_tensor(np.asarray(src, dtype=np.int64)), torch.as_tensor(np.asarray(dst, dtype=np.int64))),
                  num_nodes=n)
        for key, ids in (("train_mask", train), ("val_mask", val), ("test_mask", test)):
            mask = torch.zeros(n, dtype=torch.bool)
            mask[torch.as_tensor(np.asarray(ids, dtype=np.int64))] = True
            g.ndata[key] = mask
        g.ndata["label"] = torch.as_tensor(np.asarray(labels, dtype=np.int64))
        g.ndata["feat"] = torch.as_tensor(_row_normalise(feats), dtype=torch.float32)
        self._g = g
        self._num_classes = num_classes
        if self.verbose:
            print("Finished data loading and preprocessing.")
            print(f"  NumNodes: {g.num_nodes()}")
            print(f"  NumEdges: {g.num_edges()}")
            print(f"  NumFeats: {g.ndata['feat'].shape[1]}")
            print(f"  NumClasses: {self.num_classes}")
            for what, key in (("Training", "train_mask"), ("Validation", "val_mask"), ("Test", "test_mask")):
                print(f"  Num{what}Samples: {int(g.ndata[key].sum())}")

    # DGL's accessors.

    def __getitem__(self, idx):
        if idx != 0:
            raise IndexError("This dataset has only one graph")
        return self._g if self._transform is None else self._transform(self._g)

    def __len__(self):
        return 1

    @property
    def save_name(self):
        return self.name + "_dgl_graph"

    @property
    def graph_path(self):
        return os.path.join(self.save_path, self.save_name + ".bin")

    @property
    def info_path(self):
        return os.path.join(self.save_path, self.save_name + ".pkl")

    @property
    def num_classes(self):
        return self._num_classes

    @property
    def num_labels(self):
        """DGL's deprecated name of num_classes."""
        return self.num_classes

    @property
    def reverse_edge(self):
        return self._reverse_edge


class CoraGraphDataset(CitationGraphDataset):
    """Cora (DGL's CoraGraphDataset): 2708 nodes, 10556 edges, 1433
    features, 7 classes, 140 / 500 / 1000 training / validation / test
    nodes."""

    def __init__(self, raw_dir=None, force_reload=False, verbose=True, reverse_edge=True, transform=None,
                 reorder=False):
        super().__init__("cora", raw_dir, force_reload, verbose, reverse_edge, transform, reorder)


class CiteseerGraphDataset(CitationGraphDataset):
    """Citeseer (DGL's CiteseerGraphDataset): 3327 nodes, 9228 edges, 3703
    features, 6 classes, 120 / 500 / 1000 training / validation / test
    nodes."""

    def __init__(self, raw_dir=None, force_reload=False, verbose=True, reverse_edge=True, transform=None,
                 reorder=False):
        super().__init__("citeseer", raw_dir, force_reload, verbose, reverse_edge, transform, reorder)


class PubmedGraphDataset(CitationGraphDataset):
    """Pubmed (DGL's PubmedGraphDataset): 19717 nodes, 88651 edges, 500
    features, 3 classes, 60 / 500 / 1000 training / validation / test
    nodes."""

    def __init__(self, raw_dir=None, force_reload=False, verbose=True, reverse_edge=True, transform=None,
                 reorder=False):
        super().__init__("pubmed", raw_dir, force_reload, verbose, reverse_edge, transform, reorder)


def load_cora(raw_dir=None, force_reload=False, verbose=True, reverse_edge=True, transform=None):
    return CoraGraphDataset(raw_dir, force_reload, verbose, reverse_edge, transform)


def load_citeseer(raw_dir=None, force_reload=False, verbose=True, reverse_edge=True, transform=None):
    return CiteseerGraphDataset(raw_dir, force_reload, verbose, reverse_edge, transform)


def load_pubmed(raw_dir=None, force_reload=False, verbose=True, reverse_edge=True, transform=None):
    return PubmedGraphDataset(raw_dir, force_reload, verbose, reverse_edge, transform)
