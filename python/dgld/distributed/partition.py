"""DGL's dgl.distributed.partition_graph and load_partition on dgld.

partition_graph runs dgl-partition's own partitioner (C++, through
dgld._C) over a dgld.graph held in memory and writes what `dgl-partition`
writes: <out_path>/<graph_name>.json and part<i>/{graph,node_feat,
edge_feat}.dgld (docs/partition-format.md). The graph's node data maps to
the partitions' tensors as follows (docs/python.md):

    'feat' or 'features'          -> _N/features   (float32 [N, F])
    'label' or 'labels'           -> _N/labels     (int64 [N])
    'train_mask', 'val_mask', 'test_mask' -> _N/<name> (uint8 0/1 [N])
    any other name                -> _N/<name>     as it is
    edge data <name>              -> _N:_E:_N/<name> as it is

load_partition reads one partition back as DGL's does: the local graph
(inner and halo nodes), the node and edge tensors by their full names, a
GraphPartitionBook, the graph's name and types.
"""

import json
import operator
import os

import torch

from .. import _C
from .._errors import InvalidArgument, NotFound
from ..base import EID, ETYPE, NID, NTYPE
from ..graph import HomoGraph
from ..heterograph import DGLGraph
from ..typed_graph import TypedGraph
from .dist_context import note_graphbolt
from .graph_partition_book import GraphPartitionBook

__all__ = ["partition_graph", "load_partition", "load_partition_book", "load_partition_feats", "RESERVED_FIELD_DTYPE"]

# The dtypes of the fields load_partition puts in a partition's graph (DGL's;
# NID and EID are one name, "_ID", and NTYPE and ETYPE one, "_TYPE").
RESERVED_FIELD_DTYPE = {"inner_node": torch.uint8, "inner_edge": torch.uint8, NID: torch.int64, EID: torch.int64,
                        NTYPE: torch.int32, ETYPE: torch.int32}
_GRAPH_FORMATS = ("coo", "csr", "csc")
_GRAPHBOLT_OPTIONS = frozenset(("store_eids", "store_inner_node", "store_inner_edge", "n_jobs"))

# DGL's names of the data the partitioner keeps in its own arrays.
_FEATURES = ("feat", "features")
_LABELS = ("label", "labels")
_MASKS = ("train_mask", "val_mask", "test_mask")
# Node / edge data DGL's partition_graph leaves out (the ids of a subgraph).
_SKIP_NODES = (NID, "inner_node")
_SKIP_EDGES = (EID, "inner_edge")
_MAX_BALANCE_TYPES = 64
_STORABLE = (torch.bool, torch.uint8, torch.int32, torch.int64, torch.float32, torch.float64)


def _fail(msg):
    raise InvalidArgument(f"partition_graph: {msg}")


def _int_arg(name, value, low):
    try:
        v = None if isinstance(value, bool) else operator.index(value)
    except TypeError:
        v = None
    if v is None or v < low:
        _fail(f"{name} must be an integer >= {low}, got {value!r}")
    return v


def _column(g, name, n):
    """Node data `name` as a CPU tensor with n rows (checked: a frame
    changed behind its back may hold another count)."""
    t = g.ndata[name]
    if not isinstance(t, torch.Tensor):
        _fail(f"node data {name!r} is a {type(t).__name__}, not a tensor")
    if t.dim() == 0 or t.shape[0] != n:
        _fail(f"node data {name!r} has {t.shape[0] if t.dim() else 'no'} rows, the graph has {n} nodes")
    return t.detach().cpu()


def _standard(g, n, names):
    """The one node data of `names` the graph has (None), as a tensor; two
    of them are an error."""
    present = [k for k in names if k in g.ndata]
    if len(present) > 1:
        _fail(f"node data {present[0]!r} and {present[1]!r} both name the partitions' {names[-1]}; keep one")
    return (present[0], _column(g, present[0], n)) if present else (None, None)


def _node_arrays(g, n):
    """(features, labels, masks dict, other node data [(name, tensor)])."""
    fname, features = _standard(g, n, _FEATURES)
    kept = []  # integer features keep their dtype (as in DGL): '_N/features' as it is
    if features is not None and not features.is_floating_point():
        if features.is_complex():
            _fail(f"node data {fname!r} has dtype {features.dtype}; features are real numbers")
        kept, features = [("features", features)], None
    if features is not None:
        if features.dim() == 1:
            features = features.reshape(n, 1)
        if features.dim() != 2:
            _fail(f"node data {fname!r} becomes the partitions' float32 [num_nodes, dim] features; it has shape "
                  f"{tuple(features.shape)} (store it under another name to keep it as it is)")
        features = features.to(torch.float32)
    lname, labels = _standard(g, n, _LABELS)
    if labels is not None:
        if labels.dim() == 2 and labels.shape[1] == 1:
            labels = labels.reshape(n)
        if labels.dim() != 1 or labels.is_floating_point() or labels.is_complex():
            _fail(f"node data {lname!r} becomes the partitions' int64 [num_nodes] labels; it has shape "
                  f"{tuple(labels.shape)} and dtype {labels.dtype} (store it under another name to keep it as it is)")
        labels = labels.to(torch.int64)
    masks = {}
    for name in _MASKS:
        if name in g.ndata:
            m = _column(g, name, n).reshape(n, -1)
            if m.shape[1] != 1 or bool(((m != 0) & (m != 1)).any()):
                _fail(f"node data {name!r} must be a 0/1 (or bool) mask with one value per node")
            masks[name] = m.reshape(n).to(torch.uint8)
    taken = {fname, lname, *_MASKS, *_SKIP_NODES}
    others = kept + [(k, _column(g, k, n)) for k in g.ndata.keys() if k not in taken]
    return features, labels, masks, others


def _edge_arrays(g, m):
    out = []
    for k in g.edata.keys():
        if k in _SKIP_EDGES:
            continue
        t = g.edata[k]
        if not isinstance(t, torch.Tensor) or t.dim() == 0 or t.shape[0] != m:
            _fail(f"edge data {k!r} must be a tensor with one row per edge ({m})")
        out.append((k, t.detach().cpu()))
    return out


def _check_storable(kind, data):
    for name, t in data:
        if t.dtype not in _STORABLE:
            _fail(f"{kind} data {name!r} has dtype {t.dtype}; partition files hold bool, uint8, int32, int64, "
                  "float32 and float64 (convert it first)")
        if t.dim() > 4:
            _fail(f"{kind} data {name!r} has {t.dim()} dimensions; partition files take at most 4")


def _balance_types(g, n, balance_ntypes):
    """DGL's balance_ntypes as one integer per node: a tensor, array or list
    of n values (DGL), a dict {ntype: that} (DGL's form for typed graphs,
    one entry here), or (dgld) the name of a node data mask, or a list of
    names whose combination is the type."""
    b = balance_ntypes
    if isinstance(b, dict):
        if len(b) != 1:
            _fail(f"balance_ntypes has {len(b)} node types; the graph has one ('_N')")
        b = next(iter(b.values()))
    if isinstance(b, str) or (isinstance(b, (list, tuple)) and b and all(isinstance(x, str) for x in b)):
        names = [b] if isinstance(b, str) else list(b)
        missing = [x for x in names if x not in g.ndata]
        if missing:
            have = ", ".join(repr(k) for k in g.ndata.keys()) or "none"
            _fail(f"balance_ntypes names node data the graph lacks: {', '.join(repr(x) for x in missing)} "
                  f"(its node data: {have})")
        types = torch.zeros(n, dtype=torch.int64)
        for bit, name in enumerate(names):
            m = _column(g, name, n).reshape(n, -1)
            if m.shape[1] != 1:
                _fail(f"balance_ntypes: node data {name!r} has more than one value per node")
            types |= (m.reshape(n) != 0).to(torch.int64) << bit
        return types
    t = (b if isinstance(b, torch.Tensor) else torch.as_tensor(b)).detach().cpu()
    if t.dim() == 2 and t.shape[1] == 1:
        t = t.reshape(-1)
    if t.dim() != 1 or t.numel() != n:
        _fail(f"balance_ntypes must have one value per node ({n}), got shape {tuple(t.shape)}")
    if t.is_floating_point() or t.is_complex():
        _fail(f"balance_ntypes must hold integer node types, got {t.dtype}")
    return t.to(torch.int64)


def _balance_args(g, n, balance_ntypes, train_mask):
    """(balance_train, balance type per node or None, number of types)."""
    if balance_ntypes is None:
        return False, None, 0
    types = _balance_types(g, n, balance_ntypes)
    values, inverse = torch.unique(types, return_inverse=True)
    if values.numel() > _MAX_BALANCE_TYPES:
        _fail(f"balance_ntypes has {values.numel()} distinct values; at most {_MAX_BALANCE_TYPES} are supported")
    # A train mask is dgl-partition's --balance-train (the same constraint
    # columns, so the same partitions as the tool).
    if train_mask is not None and bool(((types == 0) | (types == 1)).all()) and torch.equal(types, train_mask.long()):
        return True, None, 0
    return False, inverse.to(torch.int32), int(values.numel())


def _out_dir(out_path):
    path = os.fspath(out_path)
    if not path:
        _fail("out_path is empty")
    if os.path.exists(path) and not os.path.isdir(path):
        _fail(f"out_path {path!r} is a file, not a directory")
    return path


def _graph_formats(graph_formats):
    if graph_formats is None:
        return []
    fmts = [graph_formats] if isinstance(graph_formats, str) else list(graph_formats)
    bad = [f for f in fmts if f not in _GRAPH_FORMATS]
    if bad:
        _fail(f"graph_formats takes {', '.join(map(repr, _GRAPH_FORMATS))}; got {bad[0]!r}")
    return fmts


def _typed_input(g):
    """A typed graph as the partitioner's typed input (DGL's homogeneous
    view of it): node types in g.ntypes order, each type's nodes one range of
    ids; edges of each canonical type in turn, in edge id order; every node
    and edge data a named tensor of its type, kept under its own name."""
    ntypes, cets = list(g.ntypes), list(g.canonical_etypes)
    offset = [0]
    for t in ntypes:
        offset.append(offset[-1] + g.num_nodes(t))
    src, dst, etype = [], [], []
    for i, c in enumerate(cets):
        u, v = (x.to(torch.int64) for x in g.edges(etype=c))
        src.append(u + offset[ntypes.index(c[0])])
        dst.append(v + offset[ntypes.index(c[2])])
        etype.append(torch.full((u.numel(),), i, dtype=torch.int32))
    node_data = [(k, _data(g.nodes[t].data, k, g.num_nodes(t), f"node data {k!r} of {t!r}"), i)
                 for i, t in enumerate(ntypes) for k in g.nodes[t].data.keys() if k not in _SKIP_NODES]
    edge_data = [(k, _data(g.edges[c].data, k, g.num_edges(c), f"edge data {k!r} of {c}"), i)
                 for i, c in enumerate(cets) for k in g.edges[c].data.keys() if k not in _SKIP_EDGES]
    _check_storable("node", [(f"{ntypes[i]}/{k}", t) for k, t, i in node_data])
    _check_storable("edge", [(f"{':'.join(cets[i])}/{k}", t) for k, t, i in edge_data])
    return dict(num_nodes=offset[-1], src=torch.cat(src), dst=torch.cat(dst), features=None, labels=None,
                train_mask=None, val_mask=None, test_mask=None, balance_type=None, num_balance_types=0,
                node_tensors=node_data, edge_tensors=edge_data, ntypes=ntypes, ntype_offset=offset,
                etypes=cets, edge_type=torch.cat(etype))


def _data(frame, name, n, what):
    t = frame[name]
    if not isinstance(t, torch.Tensor) or t.dim() == 0 or t.shape[0] != n:
        _fail(f"{what} must be a tensor with one row per {'node' if 'node' in what else 'edge'} ({n})")
    return t.detach().cpu()


def _homogeneous_input(g, balance_ntypes):
    n, m = g.num_nodes(), g.num_edges()
    features, labels, masks, node_data = _node_arrays(g, n)
    edge_data = _edge_arrays(g, m)
    _check_storable("node", node_data)
    _check_storable("edge", edge_data)
    balance_train, balance_type, num_types = _balance_args(g, n, balance_ntypes, masks.get("train_mask"))
    src, dst = g._coo()
    return balance_train, dict(
        num_nodes=n, src=src, dst=dst, features=features, labels=labels, train_mask=masks.get("train_mask"),
        val_mask=masks.get("val_mask"), test_mask=masks.get("test_mask"), balance_type=balance_type,
        num_balance_types=num_types, node_tensors=[(k, t, -1) for k, t in node_data],
        edge_tensors=[(k, t, -1) for k, t in edge_data], ntypes=[], ntype_offset=[], etypes=[], edge_type=None)


def _typed_mapping(g, json_path, nids, eids):
    """(orig_nids, orig_eids) of a typed graph, as DGL returns them: per
    type, the original per-type id of each new per-type id. The partitions
    keep each node's per-type original id and each edge's input position
    (the edges of all types in turn, as _typed_input gives them)."""
    gpb = GraphPartitionBook.load(json_path, 0)
    ntype_of, _ = gpb.map_to_per_ntype(torch.arange(nids.numel()))
    counts = torch.tensor([g.num_edges(c) for c in g.canonical_etypes], dtype=torch.int64)
    first = torch.cumsum(counts, 0) - counts
    etype_of = torch.bucketize(eids, first + counts, right=True)
    return ({t: nids[ntype_of == i] for i, t in enumerate(g.ntypes)},
            {c: eids[etype_of == i] - first[i] for i, c in enumerate(g.canonical_etypes)})


def partition_graph(g, graph_name, num_parts, out_path, num_hops=1, part_method="metis", balance_ntypes=None,
                    balance_edges=False, return_mapping=False, num_trainers_per_machine=1, objtype="cut",
                    graph_formats=None, use_graphbolt=False, *, seed=0, overwrite=False, **kwargs):
    """Partitions g into num_parts partitions under out_path with
    dgl-partition's partitioner (DGL's dgl.distributed.partition_graph).
    g is a graph or a typed graph (dgld.heterograph; its node and edge data
    keep their names, "<ntype>/<name>", "<src:rel:dst>/<name>"). With
    return_mapping, returns (orig_nids, orig_eids): the original node and
    edge id of every new id (per type, as dicts, for a typed graph). As
    DGL's, it writes into out_path (made if absent) and replaces only what
    it writes (<graph_name>.json, part<i>), atomically; out_path's other
    files stay. graph_formats is recorded for load_partition, which creates
    those formats. DGL 2.x's GraphBolt options (store_eids,
    store_inner_node, store_inner_edge, n_jobs) are accepted: dgld's files
    always hold edge ids and inner flags. dgld additions: seed (METIS's and
    the random assignment's); overwrite, accepted and the same."""
    if not isinstance(g, DGLGraph) or g.is_block:
        _fail(f"g must be a dgld graph (dgld.graph(...) or dgld.heterograph(...)), got {type(g).__name__}")
    typed = isinstance(g, TypedGraph)
    if not typed and not isinstance(g, HomoGraph):
        _fail(f"g must be a dgld graph or typed graph, got {type(g).__name__}")
    if not isinstance(graph_name, str) or not graph_name or "/" in graph_name:
        _fail(f"graph_name must be a non-empty file name, got {graph_name!r}")
    num_parts = _int_arg("num_parts", num_parts, 1)
    num_hops = _int_arg("num_hops", num_hops, 1)
    num_trainers_per_machine = _int_arg("num_trainers_per_machine", num_trainers_per_machine, 1)
    if part_method not in ("metis", "random"):
        _fail(f"part_method must be 'metis' or 'random', got {part_method!r}")
    if objtype != "cut":
        _fail(f"objtype {objtype!r}: dgld's METIS call minimises the edge cut ('cut') only")
    # DGL 2.x's GraphBolt conversion options (dgl_partition_to_graphbolt's):
    # dgld's partitions always hold each edge's id and the inner flags.
    unknown = sorted(set(kwargs) - _GRAPHBOLT_OPTIONS)
    if unknown:
        raise TypeError(f"partition_graph() got an unexpected keyword argument {unknown[0]!r}")
    if use_graphbolt:
        note_graphbolt("partition_graph")
    if g.num_nodes() == 0:
        _fail("the graph has no nodes")
    if g.num_edges() == 0:
        _fail("the graph has no edges")
    path = _out_dir(out_path)
    formats = _graph_formats(graph_formats)
    if typed:
        if balance_ntypes is not None:
            _fail("balance_ntypes of a heterogeneous graph is not supported yet")
        balance_train, data = False, _typed_input(g)
    else:
        balance_train, data = _homogeneous_input(g, balance_ntypes)
    stats = _C._partition_graph(
        **data, graph_name=graph_name, num_parts=num_parts, out_path=path, num_hops=num_hops,
        part_method=part_method, balance_train=balance_train, balance_edges=bool(balance_edges),
        num_trainers_per_machine=num_trainers_per_machine, seed=int(seed), overwrite=bool(overwrite),
        graph_formats=formats)
    if return_mapping:
        nids, eids = _C._partition_orig_ids(stats["json_path"])
        return _typed_mapping(g, stats["json_path"], nids, eids) if typed else (nids, eids)
    return None


def _config(part_config):
    path = os.fspath(part_config)
    if not os.path.isfile(path):
        raise NotFound(f"load_partition: the partition config {path!r} does not exist")
    return path


class UnsupportedPartitionBook(InvalidArgument, TypeError):
    """A partition config whose node_map / edge_map list each id's
    partition (DGL's old per-id books) instead of ranges: a TypeError, as in
    DGL, which reads only range books too."""


def _per_id_maps(path):
    """The node_map / edge_map keys of the config at path whose values are
    per-id dicts, not lists of ranges."""
    try:
        with open(path) as f:
            root = json.load(f)
    except (OSError, ValueError):
        return []
    return [f"{k}[{t!r}]" for k in ("node_map", "edge_map") if isinstance(root.get(k), dict)
            for t, v in root[k].items() if isinstance(v, dict)]


def load_partition_book(part_config, part_id):
    """(GraphPartitionBook, graph_name, ntypes, etypes) of a partitioned
    graph, from its config alone (DGL's load_partition_book): ntypes
    {name: id}, etypes {canonical triple: id}."""
    path = _config(part_config)
    try:
        gpb = GraphPartitionBook.load(path, part_id)  # an error for a partition that does not exist
    except InvalidArgument as e:
        per_id = _per_id_maps(path)
        if per_id:
            raise UnsupportedPartitionBook(f"load_partition_book: {path}: {', '.join(per_id)} list each id's "
                                           "partition; only range partition books ([[start, end] per partition]) "
                                           "are supported, as in DGL") from e
        raise
    return (gpb, gpb.graph_name, {t: i for i, t in enumerate(gpb.ntypes)},
            {t: i for i, t in enumerate(gpb.canonical_etypes)})


def load_partition_feats(part_config, part_id, load_nodes=True, load_edges=True):
    """The node and edge tensors of partition part_id, keyed as in its files
    ('_N/features', '_N:_E:_N/<name>'): rows of its inner nodes (edges) in
    local order (DGL's load_partition_feats)."""
    d = _C._read_partition(_config(part_config), int(part_id), False, True)
    return (d["node_feats"] if load_nodes else None), (d["edge_feats"] if load_edges else None)


def load_partition(part_config, part_id, load_feats=True, use_graphbolt=False):
    """One partition as DGL's load_partition returns it: (graph, node_feats,
    edge_feats, gpb, graph_name, ntypes, etypes). The graph holds the
    partition's local nodes (inner nodes first, then halo nodes) and local
    edges (the inner edges in global id order, then the halo edges), with
    ndata[dgl.NID] the nodes' global ids, ndata['inner_node'] 1 for inner
    nodes, ndata['part_id'] each node's owner, edata[dgl.EID] the edges'
    global ids and edata['inner_edge']; on a typed graph also ndata[dgl.NTYPE]
    and edata[dgl.ETYPE], the type ids (dtypes: RESERVED_FIELD_DTYPE). The
    sparse formats partition_graph's graph_formats named are created."""
    if use_graphbolt:
        note_graphbolt("load_partition")
    gpb, graph_name, ntypes, etypes = load_partition_book(part_config, part_id)
    d = _C._read_partition(_config(part_config), int(part_id), True, bool(load_feats))
    indptr = d["indptr"]
    n = indptr.numel() - 1
    dst = torch.repeat_interleave(torch.arange(n, dtype=torch.int64), indptr[1:] - indptr[:-1])
    src, eids, inner_edge = d["indices"], d["eids"], d["inner_edge"]
    etype = d.get("etype")
    # As DGL's: the inner edges in global id order (local id = id - the
    # partition's first), then the halo edges. The in-edge CSC holds them in
    # that order already except on typed graphs and one partition keeping the
    # input's ids.
    ne = int(inner_edge.sum())
    if ne > 1 and not bool((eids[1:ne] > eids[:ne - 1]).all()):
        order = torch.cat([torch.argsort(eids[:ne]), torch.arange(ne, eids.numel())])
        src, dst, eids, inner_edge = src[order], dst[order], eids[order], inner_edge[order]
        etype = etype[order] if etype is not None else None
    g = HomoGraph._from_coo(src, dst, n, n)
    g.ndata[NID] = d["global_id"]
    g.ndata["inner_node"] = d["inner_node"]
    g.ndata["part_id"] = d["owner"].to(torch.int64)
    g.edata[EID] = eids
    g.edata["inner_edge"] = inner_edge
    if "ntype" in d:
        g.ndata[NTYPE] = d["ntype"].to(RESERVED_FIELD_DTYPE[NTYPE])
        g.edata[ETYPE] = etype
    g = g.formats(list(d["graph_formats"]) or ["coo"])
    node_feats = d["node_feats"] if load_feats else {}
    edge_feats = d["edge_feats"] if load_feats else {}
    return g, node_feats, edge_feats, gpb, graph_name, list(ntypes), list(etypes)


def _get_inner_node_mask(graph, ntype_id):
    """A local graph's inner nodes (of node type ntype_id on a typed graph)
    as a bool mask (DGL's)."""
    inner = graph.ndata["inner_node"] == 1
    return inner & (graph.ndata[NTYPE] == ntype_id) if NTYPE in graph.ndata else inner


def _get_inner_edge_mask(graph, etype_id):
    """A local graph's inner edges (of edge type etype_id on a typed graph)."""
    inner = graph.edata["inner_edge"] == 1
    return inner & (graph.edata[ETYPE] == etype_id) if ETYPE in graph.edata else inner
