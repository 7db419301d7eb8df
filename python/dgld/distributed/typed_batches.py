"""Heterogeneous mini-batches of dgld's distributed node loader (DGL's
DistNodeDataLoader on a typed DistGraph): a NeighborSampler's fanouts as
one fanout per edge type and layer, typed seeds as the homogeneous ids the
C++ loader samples, and each batch's homogeneous blocks as DGL's typed
blocks (typed_graph.py's TypedBlock).

A batch is (input_nodes, seeds, blocks) with input_nodes and seeds as
{ntype: per-type ids} over every node type (empty tensors for types the
batch lacks), as DGL gives them; block.srcdata[dgl.NID] / dstdata[dgl.NID]
hold per-type ids, block.edata[dgl.EID] per relation the edges' per-type
ids (g.find_edges(ids, etype) and g.edges[etype].data take them);
the feature rows fetched with the batch are blocks[0].srcdata[feature]
({ntype: rows} for the types that have the feature), the labels
blocks[-1].dstdata[label] ({seed type: labels}).

An edge batch's seeds are the ends of its positive and negative edges; its
pair graphs (typed_pair_graph) are typed as DGL's: every node type, the
seeds of each type, the edges by edge type."""

import torch

from .._errors import InvalidArgument
from ..base import EID, NID
from ..typed_graph import typed_graph

__all__ = ["etype_fanouts", "typed_seeds", "typed_edge_seeds", "typed_batch", "typed_pair_graph"]


def _fanout(v, layer):
    try:
        f = int(v)
    except (TypeError, ValueError):
        raise InvalidArgument(f"NeighborSampler: layer {layer}'s fanout {v!r} is not an integer") from None
    if f < -1:
        raise InvalidArgument(f"NeighborSampler: layer {layer}'s fanout {f} is invalid: use -1 (all) or a count >= 0")
    return f


def etype_fanouts(g, fanouts):
    """Per layer, one fanout per canonical edge type of g (type id order):
    from DGL's dict {etype: fanout}, which must name every edge type (by
    its name or canonical triple), or one int for every type."""
    cets = g.canonical_etypes
    out = []
    for layer, f in enumerate(fanouts):
        if not isinstance(f, dict):
            out.append([_fanout(f, layer)] * len(cets))
            continue
        row = [None] * len(cets)
        for key, v in f.items():
            row[g._etype_id(key)] = _fanout(v, layer)
        missing = [":".join(cets[r]) for r, v in enumerate(row) if v is None]
        if missing:
            raise InvalidArgument(f"NeighborSampler: layer {layer}'s fanout dict lacks edge type(s) "
                                  f"{', '.join(missing)}: a fanout dict names every edge type (as in DGL)")
        out.append(row)
    return out


def typed_seeds(g, nids):
    """{ntype: per-type ids} (or one type's ids when g has one node type)
    -> (homogeneous ids, the node types named)."""
    if not isinstance(nids, dict):
        if len(g.ntypes) != 1:
            raise InvalidArgument(f"the graph has several node types ({', '.join(g.ntypes)}): pass the seed "
                                  f"ids as a dict {{ntype: ids}}")
        nids = {g.ntypes[0]: nids}
    if not nids:
        raise InvalidArgument("no seed nodes: the dict of ids is empty")
    parts, named = [], []
    for ntype, ids in nids.items():
        parts.append(g.to_homogeneous_ids(ntype, ids))
        named.append(ntype)
    return torch.cat(parts), named


def typed_edge_seeds(g, eids):
    """{etype: per-type edge ids} (or one edge type's ids when g has one)
    -> the homogeneous edge ids."""
    if not isinstance(eids, dict):
        if len(g.canonical_etypes) != 1:
            raise InvalidArgument(f"the graph has several edge types ({', '.join(g.etypes)}): pass the edge ids as "
                                  "a dict {etype: ids}")
        eids = {g.canonical_etypes[0]: eids}
    if not eids:
        raise InvalidArgument("no training edges: the dict of ids is empty")
    return torch.cat([g.to_homogeneous_eids(etype, ids) for etype, ids in eids.items()])


def typed_pair_graph(g, seeds, u, v, edge_types):
    """DGL's pair graph of a typed edge batch: every node type of g, its
    nodes the batch's seeds of that type in the order of `seeds` (the last
    block's destination nodes), ndata[dgl.NID] their per-type ids; the edges
    rows u -> v of seeds, edge i of canonical type edge_types[i] (every edge
    type of g, empty ones included)."""
    ntypes, cets = g.ntypes, g.canonical_etypes
    s_type, s_id = g.to_type_wise_ids(seeds)
    rank, count = _rank_within_type(s_type, len(ntypes))
    rels = {}
    for r, cet in enumerate(cets):
        m = edge_types == r
        rels[cet] = (rank[u[m]], rank[v[m]])
    counts = {t: int(count[i]) for i, t in enumerate(ntypes)}
    pair = typed_graph(rels, counts, counts, False)
    for t, ids in _split_by_type(s_type, s_id, ntypes).items():
        pair.nodes[t].data[NID] = ids
    return pair


def _rank_within_type(types, num_types):
    """For node i of type types[i]: how many nodes of its type come before
    it; and the count of each type."""
    counts = torch.bincount(types, minlength=num_types)
    order = torch.argsort(types, stable=True)
    starts = torch.cumsum(counts, 0) - counts
    rank = torch.empty_like(types)
    rank[order] = torch.arange(types.numel(), dtype=types.dtype) - starts[types[order]]
    return rank, counts


def _split_by_type(types, ids, ntypes):
    return {t: ids[types == i] for i, t in enumerate(ntypes)}


def _typed_block(g, native):
    """A loader's homogeneous block with edge types as a typed block, and its
    source nodes' types and per-type ids (its destination nodes are the
    first of them, so theirs are the prefix)."""
    ntypes, cets = g.ntypes, g.canonical_etypes
    nd = native.num_dst_nodes()
    s_type, s_id = g.to_type_wise_ids(native.src_ids())
    d_type, d_id = s_type[:nd], s_id[:nd]
    s_rank, s_count = _rank_within_type(s_type, len(ntypes))
    d_rank, d_count = s_rank[:nd], torch.bincount(d_type, minlength=len(ntypes))
    u, v = native.edges()
    etypes = native.etypes()
    eids = native.edata.get(EID)
    if eids is not None and eids.numel() == etypes.numel():
        eids = g.to_type_wise_eids(eids)[1]
    rels, rel_eids = {}, {}
    for r, cet in enumerate(cets):
        m = etypes == r
        rels[cet] = (s_rank[u[m]], d_rank[v[m]])
        if eids is not None and eids.numel() == etypes.numel():
            rel_eids[cet] = eids[m]
    # The blocks keep the DistGraph's edge type order (its type ids).
    block = typed_graph(rels, {t: int(s_count[i]) for i, t in enumerate(ntypes)},
                        {t: int(d_count[i]) for i, t in enumerate(ntypes)}, True, sort_etypes=False)
    block.srcdata[NID] = _split_by_type(s_type, s_id, ntypes)
    block.dstdata[NID] = _split_by_type(d_type, d_id, ntypes)
    for cet, e in rel_eids.items():
        block[cet].edata[EID] = e
    return block, s_type, s_id


def typed_batch(g, natives, features, labels, feature, label):
    """A C++ batch of a typed graph as DGL gives it (see the module doc):
    input_nodes are the first block's source nodes, seeds the last block's
    destination nodes; features: [(type id, positions in input_nodes, rows)]
    or None."""
    ntypes = g.ntypes
    typed = [_typed_block(g, b) for b in natives]
    blocks = [b for b, _, _ in typed]
    _, in_type, in_id = typed[0]
    nd = natives[-1].num_dst_nodes()
    seed_type, seed_id = typed[-1][1][:nd], typed[-1][2][:nd]
    if features:
        blocks[0].srcdata[feature] = {ntypes[t]: rows for t, _, rows in features}
    if labels is not None and label:
        label_type = ntypes[int(seed_type[0])] if seed_type.numel() else ntypes[0]
        blocks[-1].dstdata[label] = {label_type: labels}
    return _split_by_type(in_type, in_id, ntypes), _split_by_type(seed_type, seed_id, ntypes), blocks
