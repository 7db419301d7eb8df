"""Graph transforms of DGL's that training scripts call (dgl.add_self_loop,
dgl.remove_self_loop, dgl.reverse, dgl.remove_edges, dgl.edge_subgraph,
dgl.node_subgraph, dgl.in_subgraph, dgl.compact_graphs), on dgld's graph
objects. Each returns a new graph; the input is left as it was."""

import torch

from ._errors import DGLError
from .base import EID, NID, as_ids
from .convert import _ordered_unique
from .graph import HomoGraph
from .typed_graph import TypedGraph, typed_graph

__all__ = ["add_self_loop", "remove_self_loop", "reverse", "remove_edges", "edge_subgraph", "node_subgraph",
           "in_subgraph", "compact_graphs"]


def _plain(g, what):
    if not isinstance(g, HomoGraph):
        raise DGLError(f"{what} takes a homogeneous dgld graph, got {type(g).__name__}")
    if g.is_block:
        raise DGLError(f"{what} takes a graph, not a block")


def _with_edges(g, src, dst, keep, num_nodes=None, node_rows=None, extra_edges=0):
    """A graph over (src, dst); edge frame rows `keep` of g's (then
    `extra_edges` rows of zeros); node frame rows node_rows (all when None)."""
    n = g.num_nodes() if num_nodes is None else num_nodes
    out = HomoGraph._from_coo(src, dst, n, n, g.idtype)
    for k, v in g.ndata.items():
        out.ndata[k] = v if node_rows is None else v[node_rows]
    for k, v in g.edata.items():
        rows = v if keep is None else v[keep]
        if extra_edges:
            rows = torch.cat([rows, rows.new_zeros((extra_edges,) + tuple(rows.shape[1:]))])
        out.edata[k] = rows
    return out


def add_self_loop(g, edge_feat_names=None, fill_data=1.0, etype=None):
    """g with an edge v -> v added for every node, after its own edges
    (their edge data zero, as in DGL when fill_data is not given per name)."""
    _plain(g, "add_self_loop")
    src, dst = g._coo()
    loops = torch.arange(g.num_nodes(), dtype=torch.int64)
    out = _with_edges(g, torch.cat([src, loops]), torch.cat([dst, loops]), None, extra_edges=loops.numel())
    if isinstance(fill_data, (int, float)) and fill_data != 0:
        for k in (edge_feat_names or list(out.edata)):
            if k in out.edata and out.edata[k].is_floating_point():
                col = out.edata[k].clone()
                col[src.numel():] = fill_data
                out.edata[k] = col
    return out


def remove_self_loop(g, etype=None):
    _plain(g, "remove_self_loop")
    src, dst = g._coo()
    keep = torch.nonzero(src != dst, as_tuple=False).reshape(-1)
    return _with_edges(g, src[keep], dst[keep], keep)


def reverse(g, copy_ndata=True, copy_edata=False, **kwargs):
    _plain(g, "reverse")
    src, dst = g._coo()
    out = _with_edges(g, dst, src, None)
    if not copy_ndata:
        for k in list(out.ndata):
            del out.ndata[k]
    if not copy_edata:
        for k in list(out.edata):
            del out.edata[k]
    return out


def remove_edges(g, eids, etype=None, store_ids=False):
    """g without edges `eids` (the others keep their order and data)."""
    _plain(g, "remove_edges")
    eids = as_ids(eids, "remove_edges", g.num_edges())
    keep_mask = torch.ones(g.num_edges(), dtype=torch.bool)
    keep_mask[eids] = False
    keep = torch.nonzero(keep_mask, as_tuple=False).reshape(-1)
    src, dst = g._coo()
    out = _with_edges(g, src[keep], dst[keep], keep)
    if store_ids:
        out.edata[EID] = keep
    return out


def edge_subgraph(g, edges, relabel_nodes=True, store_ids=True, **kwargs):
    """The graph of edges `edges`: with relabel_nodes only their end nodes
    (ndata[dgl.NID] their ids in g, in increasing order), else all of g's."""
    _plain(g, "edge_subgraph")
    eids = as_ids(edges, "edge_subgraph", g.num_edges())
    src, dst = g._coo()
    s, d = src[eids], dst[eids]
    if relabel_nodes:
        nodes, inverse = torch.unique(torch.cat([s, d]), return_inverse=True)
        out = _with_edges(g, inverse[:s.numel()], inverse[s.numel():], eids, nodes.numel(), nodes)
        if store_ids:
            out.ndata[NID] = nodes
    else:
        out = _with_edges(g, s, d, eids)
    if store_ids:
        out.edata[EID] = eids
    return out


def node_subgraph(g, nodes, relabel_nodes=True, store_ids=True, **kwargs):
    """The graph induced by `nodes`: the edges between them, nodes numbered
    in the order given (ndata[dgl.NID] their ids in g)."""
    _plain(g, "node_subgraph")
    nodes = as_ids(nodes, "node_subgraph", g.num_nodes())
    index = torch.full((g.num_nodes(),), -1, dtype=torch.int64)
    index[nodes] = torch.arange(nodes.numel(), dtype=torch.int64)
    src, dst = g._coo()
    keep = torch.nonzero((index[src] >= 0) & (index[dst] >= 0), as_tuple=False).reshape(-1)
    out = _with_edges(g, index[src[keep]], index[dst[keep]], keep, nodes.numel(), nodes)
    if store_ids:
        out.ndata[NID] = nodes
        out.edata[EID] = keep
    return out


def in_subgraph(g, nodes, relabel_nodes=False, store_ids=True, **kwargs):
    """The in-edges of `nodes` over all of g's nodes (edata[dgl.EID] their
    ids in g)."""
    _plain(g, "in_subgraph")
    eids = g.in_edges(nodes, form="eid").to(torch.int64)
    return edge_subgraph(g, eids, relabel_nodes=relabel_nodes, store_ids=store_ids)


def compact_graphs(graphs, always_preserve=None, copy_ndata=True, copy_edata=True):
    """The graphs (sharing one node set) with every node that no graph's
    edge touches removed, all renumbered alike: always_preserve first, then
    the other nodes in order of first appearance over the graphs' edges
    (src then dst of each graph in turn); ndata[dgl.NID] holds the old ids."""
    if isinstance(graphs, TypedGraph) and not graphs.is_block:
        return _compact_typed(graphs, always_preserve, copy_ndata, copy_edata)
    single = isinstance(graphs, HomoGraph)
    graphs = [graphs] if single else list(graphs)
    if not graphs:
        return []
    n = graphs[0].num_nodes()
    for g in graphs:
        _plain(g, "compact_graphs")
        if g.num_nodes() != n:
            raise DGLError(f"compact_graphs: the graphs must share one node set, got {n} and {g.num_nodes()} nodes")
    parts = []
    if always_preserve is not None:
        parts.append(as_ids(always_preserve, "compact_graphs always_preserve", n))
    for g in graphs:
        src, dst = g._coo()
        parts += [src, dst]
    nodes, _ = _ordered_unique(torch.cat(parts) if parts else torch.empty(0, dtype=torch.int64))
    index = torch.full((n,), -1, dtype=torch.int64)
    index[nodes] = torch.arange(nodes.numel(), dtype=torch.int64)
    out = []
    for g in graphs:
        src, dst = g._coo()
        c = _with_edges(g, index[src], index[dst], None, nodes.numel(), nodes)
        if not copy_ndata:
            for k in list(c.ndata):
                del c.ndata[k]
        if not copy_edata:
            for k in list(c.edata):
                del c.edata[k]
        parent = g.ndata[NID][nodes] if (NID in g.ndata) else nodes
        c.ndata[NID] = parent
        out.append(c)
    return out[0] if single else out


def _compact_typed(g, always_preserve, copy_ndata, copy_edata):
    """compact_graphs of one typed graph, as DGL's: per node type, the nodes
    always_preserve[ntype] names first, then those the relations' edges
    touch in order of first appearance (relations in canonical_etypes order,
    sources then destinations); nodes[ntype].data[dgl.NID] their old ids."""
    keep = dict(always_preserve or {})
    if not isinstance(keep, dict):
        raise DGLError("compact_graphs: always_preserve of a typed graph is a dict {ntype: ids}")
    edges = {c: tuple(x.to(torch.int64) for x in g.edges(etype=c)) for c in g.canonical_etypes}
    nodes, index = {}, {}
    for t in g.ntypes:
        parts = [as_ids(keep[t], f"compact_graphs always_preserve[{t!r}]", g.num_nodes(t))] if t in keep else []
        for c, (u, v) in edges.items():
            parts += ([u] if c[0] == t else []) + ([v] if c[2] == t else [])
        nodes[t], _ = _ordered_unique(torch.cat(parts) if parts else torch.empty(0, dtype=torch.int64))
        index[t] = torch.full((g.num_nodes(t),), -1, dtype=torch.int64)
        index[t][nodes[t]] = torch.arange(nodes[t].numel(), dtype=torch.int64)
    counts = {t: nodes[t].numel() for t in g.ntypes}
    rels = {c: (index[c[0]][u], index[c[2]][v]) for c, (u, v) in edges.items()}
    out = typed_graph(rels, counts, counts, False, g.idtype, sort_etypes=False)
    for t in g.ntypes:
        if copy_ndata:
            for k, col in g.nodes[t].data.items():
                out.nodes[t].data[k] = col[nodes[t]]
        out.nodes[t].data[NID] = nodes[t]
    if copy_edata:
        for c in g.canonical_etypes:
            for k, col in g.edges[c].data.items():
                out.edges[c].data[k] = col
    return out
