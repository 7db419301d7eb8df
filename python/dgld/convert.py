"""Making graphs: dgld.graph, dgld.heterograph, dgld.create_block,
dgld.to_block (DGL's dgl.graph, dgl.heterograph, dgl.create_block,
dgl.to_block), random graphs and graphs of SciPy matrices
(dgld.rand_graph, rand_bipartite, from_scipy, bipartite_from_scipy, as
DGL's), and the wrapping of the loaders' native blocks
(torch.classes.dgld.Block) as DGLBlock objects."""

import numpy as np
import torch

from ._errors import DGLError
from ._graph_data import _check_device, _count, _idtype_of, _uv
from .base import EID, NID, as_ids
from .graph import HomoBlock, HomoGraph
from .typed_graph import TypedGraph, block_relations, heterograph_relations, typed_graph

__all__ = ["graph", "heterograph", "create_block", "to_block", "rand_graph", "rand_bipartite", "from_scipy",
           "bipartite_from_scipy", "block_from_native", "pair_graph"]


def graph(data, num_nodes=None, idtype=None, device=None, row_sorted=False, col_sorted=False, **kwargs):
    """A graph from its edges (DGL's dgl.graph): data is (src ids, dst ids)
    or ('coo' | 'csr' | 'csc', arrays); num_nodes defaults to the largest id
    + 1. Edge i is (src[i], dst[i])."""
    if isinstance(data, dict):
        raise DGLError("dgld.graph takes one edge type: pass (src, dst); make typed graphs with dgld.heterograph")
    _check_device(device)
    src, dst = _uv(data, "dgld.graph")
    n = _count(torch.cat([src, dst]), num_nodes, "num_nodes")
    return HomoGraph._from_coo(src, dst, n, n, _idtype_of(idtype))


def heterograph(data_dict, num_nodes_dict=None, idtype=None, device=None):
    """A typed graph (DGL's dgl.heterograph): data_dict maps each canonical
    edge type (src_type, edge_type, dst_type) to its edges (src ids, dst
    ids); num_nodes_dict gives per-type counts (default: the largest id + 1)."""
    _check_device(device)
    rels, counts = heterograph_relations(data_dict, num_nodes_dict, "dgld.heterograph")
    return typed_graph(rels, counts, counts, False, _idtype_of(idtype))


def create_block(data, num_src_nodes=None, num_dst_nodes=None, idtype=None, device=None, **kwargs):
    """A block from its edges (DGL's dgl.create_block): src ids index the
    block's source nodes, dst ids its destination nodes. A dict of several
    edge types (or with per-type counts) makes a typed block
    (typed_graph.py)."""
    if isinstance(data, dict):
        if len(data) != 1 or isinstance(num_src_nodes, dict) or isinstance(num_dst_nodes, dict):
            _check_device(device)
            rels, ns, nd = block_relations(data, num_src_nodes, num_dst_nodes, "dgld.create_block")
            return typed_graph(rels, ns, nd, True, _idtype_of(idtype))
        data = next(iter(data.values()))
    if isinstance(num_src_nodes, dict) or isinstance(num_dst_nodes, dict):
        raise DGLError("dgld.create_block takes node counts as integers (one node type)")
    _check_device(device)
    src, dst = _uv(data, "dgld.create_block")
    ns = _count(src, num_src_nodes, "num_src_nodes")
    nd = _count(dst, num_dst_nodes, "num_dst_nodes")
    return HomoBlock._from_coo(src, dst, ns, nd, _idtype_of(idtype))


def _ordered_unique(x):
    """The distinct values of x in order of first appearance, and each
    element's index among them."""
    if x.numel() == 0:
        return x, x
    uniq, inverse = torch.unique(x, return_inverse=True)
    # The first position of each distinct value: the head of its run in a
    # stable sort of the inverse.
    sorted_inv, perm = torch.sort(inverse, stable=True)
    heads = torch.ones_like(sorted_inv, dtype=torch.bool)
    heads[1:] = sorted_inv[1:] != sorted_inv[:-1]
    first = perm[heads]
    order = torch.argsort(first)
    rank = torch.empty_like(order)
    rank[order] = torch.arange(order.numel(), dtype=torch.int64)
    return uniq[order], rank[inverse]


def _positions(values, keys, what, name, need):
    """For each of `values`, its index in `keys` (distinct); DGLError naming
    the first value that is not there (or appears twice in keys)."""
    sorted_keys, perm = torch.sort(keys)
    if sorted_keys.numel() > 1 and bool((sorted_keys[1:] == sorted_keys[:-1]).any()):
        i = int(torch.nonzero(sorted_keys[1:] == sorted_keys[:-1])[0])
        raise DGLError(f"{what}: node {int(sorted_keys[i])} appears twice in `{name}`")
    if values.numel() == 0:
        return values
    pos = torch.searchsorted(sorted_keys, values).clamp(max=max(0, sorted_keys.numel() - 1))
    found = sorted_keys[pos] == values if sorted_keys.numel() else torch.zeros_like(values, dtype=torch.bool)
    if not bool(found.all()):
        raise DGLError(f"{what}: node {int(values[~found][0])} does not exist in `{name}`. {need}")
    return perm[pos]


def to_block(g, dst_nodes=None, include_dst_in_src=True, src_nodes=None):
    """The block of g's edges into dst_nodes (DGL's dgl.to_block): its
    destination nodes are dst_nodes (default: every node with an in-edge),
    its source nodes dst_nodes first (include_dst_in_src) and then the other
    sources in order of first appearance over g's edges (in edge-id order).
    Every edge of g is kept, in its order. g's node and edge data are copied
    to the block's rows; srcdata/dstdata[dgl.NID] then hold the nodes' ids
    in g and edata[dgl.EID] the edges' ids in g (for a frontier of
    sample_neighbors, whose nodes are the DistGraph's, the node ids are
    global; its global edge ids are frontier.edata[dgl.EID], read before
    to_block, as DGL's scripts do)."""
    if isinstance(g, TypedGraph) and not g.is_block:
        if src_nodes is not None:
            raise DGLError("to_block: src_nodes is not supported for a typed graph")
        return _typed_to_block(g, dst_nodes, include_dst_in_src)
    if isinstance(dst_nodes, dict):
        if len(dst_nodes) != 1:
            raise DGLError("to_block: the graph has one node type; pass its dst nodes")
        dst_nodes = next(iter(dst_nodes.values()))
    if not isinstance(g, HomoGraph) or g.is_block:
        raise DGLError("to_block takes a graph or a typed graph (e.g. a frontier), not a block")
    src, dst = g._coo()
    n = g.num_nodes()
    if dst_nodes is None:
        dst_nodes = torch.unique(dst)
    else:
        dst_nodes = as_ids(dst_nodes, "to_block dst_nodes", n)
    local_dst = _positions(dst, dst_nodes, "to_block", "dst_nodes",
                           "Argument `dst_nodes` must contain all the edge destination nodes.")
    if src_nodes is not None:
        src_nodes = as_ids(src_nodes, "to_block src_nodes", n)
        if include_dst_in_src and not torch.equal(src_nodes[:dst_nodes.numel()], dst_nodes):
            raise DGLError("to_block: src_nodes must start with dst_nodes when include_dst_in_src is True")
        local_src = _positions(src, src_nodes, "to_block", "src_nodes",
                               "Argument `src_nodes` must contain all the edge source nodes.")
    elif include_dst_in_src:
        src_nodes, inverse = _ordered_unique(torch.cat([dst_nodes, src]))
        local_src = inverse[dst_nodes.numel():]
    else:
        src_nodes, local_src = _ordered_unique(src)
    block = HomoBlock._from_coo(local_src, local_dst, src_nodes.numel(), dst_nodes.numel(), g.idtype)
    # g's node and edge data come along, then the ids into g (DGL's order).
    for k, v in g.ndata.items():
        block.srcdata[k] = v[src_nodes]
        block.dstdata[k] = v[dst_nodes]
    for k, v in g.edata.items():
        block.edata[k] = v
    block.srcdata[NID] = src_nodes
    block.dstdata[NID] = dst_nodes
    block.edata[EID] = torch.arange(src.numel(), dtype=torch.int64)
    return block


def _typed_to_block(g, dst_nodes, include_dst_in_src):
    """to_block of a typed graph (a typed frontier), as DGL's: per node
    type, the destination nodes are dst_nodes[ntype] (default: every node of
    the type with an in-edge; none for a type dst_nodes leaves out) and the
    source nodes those first (include_dst_in_src), then the other sources of
    that type in order of first appearance over the relations (in
    canonical_etypes order) and their edges; every edge kept, in order."""
    cets = g.canonical_etypes
    if dst_nodes is None:
        dst = {t: torch.unique(torch.cat([g.edges(etype=c)[1] for c in cets if c[2] == t] or
                                         [torch.empty(0, dtype=torch.int64)])) for t in g.ntypes}
    elif isinstance(dst_nodes, dict):
        unknown = [t for t in dst_nodes if t not in g.ntypes]
        if unknown:
            raise DGLError(f"to_block: dst_nodes names node type {unknown[0]!r}, which the graph lacks "
                           f"(types: {', '.join(g.ntypes)})")
        dst = {t: as_ids(dst_nodes[t], f"to_block dst_nodes[{t!r}]", g.num_nodes(t)) if t in dst_nodes
               else torch.empty(0, dtype=torch.int64) for t in g.ntypes}
    else:
        raise DGLError("to_block: the dst nodes of a typed graph are a dict {ntype: ids}")
    edges = {c: tuple(x.to(torch.int64) for x in g.edges(etype=c)) for c in cets}
    src = {}
    for t in g.ntypes:
        pieces = ([dst[t]] if include_dst_in_src else []) + [edges[c][0] for c in cets if c[0] == t]
        src[t], _ = _ordered_unique(torch.cat(pieces) if pieces else torch.empty(0, dtype=torch.int64))
    rels = {}
    for c, (u, v) in edges.items():
        local_dst = _positions(v, dst[c[2]], "to_block", f"dst_nodes[{c[2]!r}]",
                               "Argument `dst_nodes` must contain all the edge destination nodes.")
        rels[c] = (_positions(u, src[c[0]], "to_block", "the source nodes", ""), local_dst)
    block = typed_graph(rels, {t: src[t].numel() for t in g.ntypes}, {t: dst[t].numel() for t in g.ntypes}, True,
                        g.idtype, sort_etypes=False)
    for t in g.ntypes:
        for k, v in g.nodes[t].data.items():
            block.srcnodes[t].data[k] = v[src[t]]
            block.dstnodes[t].data[k] = v[dst[t]]
        block.srcnodes[t].data[NID] = src[t]
        block.dstnodes[t].data[NID] = dst[t]
    for c in cets:
        for k, v in g.edges[c].data.items():
            block.edges[c].data[k] = v
        block.edges[c].data[EID] = torch.arange(edges[c][0].numel(), dtype=torch.int64)
    return block


def block_from_native(native):
    """A loader's torch.classes.dgld.Block as a DGLBlock over the same CSR,
    its frames holding what the loader attached (ids under dgl.NID /
    dgl.EID, the fetched features and labels)."""
    block = HomoBlock._from_native(native)
    for frame, data in ((block._srcframe, native.srcdata), (block._dstframe, native.dstdata),
                        (block._eframe, native.edata)):
        for k, v in data.items():
            if v.numel() or frame.num_rows == 0:
                frame[k] = v
    return block


def pair_graph(src, dst, node_ids):
    """The positive or negative pair graph of an edge batch: edges between
    rows of the batch's seed nodes, ndata[dgl.NID] their global ids."""
    g = HomoGraph._from_coo(src, dst, node_ids.numel(), node_ids.numel())
    g.ndata[NID] = node_ids
    return g


# ---------------------------------------------------------------------------
# Random graphs and SciPy matrices (DGL's dgl.rand_graph, dgl.rand_bipartite,
# dgl.from_scipy, dgl.bipartite_from_scipy).


def _distinct_draws(population, count, what):
    """`count` distinct integers drawn uniformly from [0, population) with
    torch's default generator (torch.manual_seed makes them repeatable),
    in the order drawn: every ordered choice without replacement is equally
    likely. A permutation of the population when it is small or `count`
    a large part of it; otherwise draws with rejection of repeats, which
    needs memory for `count` ids only (population may be n * n of a large
    graph)."""
    population, count = int(population), int(count)
    if count < 0:
        raise DGLError(f"{what}: the number of edges must be >= 0, got {count}")
    if count > population:
        raise DGLError(f"{what}: cannot choose {count} distinct edges from {population} possible node pairs")
    if population >= 2 ** 63:
        raise DGLError(f"{what}: {population} possible node pairs exceed 64-bit ids")
    if population <= (1 << 22) or count * 4 >= population:
        return torch.randperm(population, dtype=torch.int64)[:count]
    drawn = torch.empty(0, dtype=torch.int64)
    while drawn.numel() < count:
        need = count - drawn.numel()
        extra = torch.randint(0, population, (need + need // 8 + 16,), dtype=torch.int64)
        # Earlier draws come first, so they keep their places.
        drawn, _ = _ordered_unique(torch.cat([drawn, extra]))
    return drawn[:count]


def _check_count(n, what, name):
    if int(n) < 0:
        raise DGLError(f"{what}: {name} must be >= 0, got {n}")
    return int(n)


def rand_graph(num_nodes, num_edges, idtype=torch.int64, device=torch.device("cpu")):
    """A graph of num_nodes nodes and num_edges edges chosen uniformly
    without replacement among all num_nodes^2 ordered node pairs (self-loops
    possible, no parallel edges), as DGL's dgl.rand_graph. The draws use
    torch's generator: torch.manual_seed makes them repeatable (DGL uses
    its own generator, seeded by dgl.seed)."""
    n = _check_count(num_nodes, "rand_graph", "num_nodes")
    _check_device(device)
    idtype = _idtype_of(idtype)
    pairs = _distinct_draws(n * n, num_edges, "rand_graph")
    src, dst = pairs // max(n, 1), pairs % max(n, 1)
    return HomoGraph._from_coo(src, dst, n, n, idtype)


def rand_bipartite(utype, etype, vtype, num_src_nodes, num_dst_nodes, num_edges, idtype=torch.int64,
                   device=torch.device("cpu")):
    """A typed graph with one relation (utype, etype, vtype) of num_edges
    edges chosen uniformly without replacement among all num_src_nodes x
    num_dst_nodes pairs, as DGL's dgl.rand_bipartite (torch's generator, as
    rand_graph)."""
    ns = _check_count(num_src_nodes, "rand_bipartite", "num_src_nodes")
    nd = _check_count(num_dst_nodes, "rand_bipartite", "num_dst_nodes")
    _check_device(device)
    pairs = _distinct_draws(ns * nd, num_edges, "rand_bipartite")
    src, dst = pairs // max(nd, 1), pairs % max(nd, 1)
    return heterograph({(utype, etype, vtype): (src, dst)}, {utype: ns, vtype: nd}, idtype=idtype)


def _scipy_edges(sp_mat, what):
    """(src, dst, values) of a SciPy sparse matrix's stored entries, in
    storage order: row by row for CSR, column by column for CSC, the
    entries' order for COO (others are converted with tocoo(), as DGL
    does). Stored zeros and repeated entries are edges too."""
    fmt = getattr(sp_mat, "format", None)
    if fmt is None or not hasattr(sp_mat, "shape"):
        raise DGLError(f"{what} takes a SciPy sparse matrix, got {type(sp_mat).__name__}")
    if fmt in ("csr", "csc"):
        indptr = torch.as_tensor(np.asarray(sp_mat.indptr, dtype=np.int64))
        inner = torch.as_tensor(np.asarray(sp_mat.indices, dtype=np.int64))
        outer = torch.repeat_interleave(torch.arange(indptr.numel() - 1, dtype=torch.int64),
                                        indptr[1:] - indptr[:-1])
        src, dst = (outer, inner) if fmt == "csr" else (inner, outer)
        values = sp_mat.data
    else:
        coo = sp_mat.tocoo()
        src = torch.as_tensor(np.asarray(coo.row, dtype=np.int64))
        dst = torch.as_tensor(np.asarray(coo.col, dtype=np.int64))
        values = coo.data
    return src, dst, values


def from_scipy(sp_mat, eweight_name=None, idtype=None, device=None):
    """A graph of a square SciPy sparse matrix's N x N adjacency: one edge
    i -> j per stored entry (i, j), in storage order (_scipy_edges), N
    nodes; with eweight_name, edata[eweight_name] holds the entries'
    values (DGL's dgl.from_scipy)."""
    rows, cols = sp_mat.shape
    if rows != cols:
        raise DGLError("Expect the number of rows to be the same as the number of columns for sp_mat, "
                       f"got {rows} and {cols}.")
    _check_device(device)
    src, dst, values = _scipy_edges(sp_mat, "from_scipy")
    g = HomoGraph._from_coo(src, dst, rows, rows, _idtype_of(idtype))
    if eweight_name is not None:
        g.edata[eweight_name] = torch.as_tensor(np.asarray(values))
    return g


def bipartite_from_scipy(sp_mat, utype, etype, vtype, eweight_name=None, idtype=None, device=None):
    """A typed graph of one relation (utype, etype, vtype) from an N x M
    SciPy sparse matrix: N utype nodes, M vtype nodes, an edge per stored
    entry (DGL's dgl.bipartite_from_scipy)."""
    _check_device(device)
    rows, cols = sp_mat.shape
    src, dst, values = _scipy_edges(sp_mat, "bipartite_from_scipy")
    g = heterograph({(utype, etype, vtype): (src, dst)}, {utype: rows, vtype: cols}, idtype=idtype)
    if eweight_name is not None:
        g.edges[(utype, etype, vtype)].data[eweight_name] = torch.as_tensor(np.asarray(values))
    return g
