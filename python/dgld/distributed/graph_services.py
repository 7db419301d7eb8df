"""DGL's graph services on a DistGraph (dgl.distributed.graph_services):
sample_neighbors (the one-hop sampler a guide-style collate_fn calls),
sample_etype_neighbors (a fanout per edge type), in_subgraph and
find_edges. Each runs as DGL's does: seeds (edges) grouped by owner, one
request per machine, this machine's share answered in process (C++, the
servers' kernels); the result is a graph over every node of g with the
global ids of its edges in edata[dgl.EID]."""

import torch

from .._errors import InvalidArgument
from ..base import EID, as_ids
from ..convert import heterograph
from ..graph import HomoGraph
from .dist_context import note_graphbolt

__all__ = ["sample_neighbors", "sample_etype_neighbors", "in_subgraph", "find_edges"]


def _homo_seeds(g, nodes, what):
    """Seeds as homogeneous node ids: a tensor (list) of them, or a dict
    {ntype: per-type ids} (DGL's form for typed graphs)."""
    if isinstance(nodes, dict):
        gpb = g.get_partition_book()
        parts = []
        for ntype, ids in nodes.items():
            if ntype not in g.ntypes:
                raise InvalidArgument(f"{what}: the graph has no node type {ntype!r} (it has {', '.join(g.ntypes)})")
            ids = as_ids(ids, what, g.num_nodes(ntype))
            parts.append(ids if g.is_homogeneous() else gpb.map_to_homo_nid(ids, ntype))
        return torch.cat(parts) if parts else torch.empty(0, dtype=torch.int64)
    return as_ids(nodes, what, g.num_nodes(), check_range=False)  # the servers name a bad id


def _seed(seed):
    """The sampler's random seed: the caller's, else one drawn from torch's
    global generator (so torch.manual_seed makes a run repeatable)."""
    return seed if seed is not None else int(torch.randint(0, 2**62, (1,)).item())


def _frontier(g, src, dst, eid):
    """DGL's frontier: a graph over every node of g (global ids), the edges'
    global ids in edata[dgl.EID]; dgld.to_block(frontier, seeds) makes it a
    block."""
    n = g.num_nodes()
    frontier = HomoGraph._from_coo(src, dst, n, n)
    frontier.edata[EID] = eid
    return frontier


def _typed_frontier(g, src, dst, eid):
    """The frontier of a typed graph as DGL returns it: a heterograph with
    every edge type of g (per-type node ids), each type's edges in the order
    sampled, edata[dgl.EID] their per-type edge ids."""
    gpb = g.get_partition_book()
    etype_ids, type_eid = gpb.map_to_per_etype(eid)
    _, src = gpb.map_to_per_ntype(src)
    _, dst = gpb.map_to_per_ntype(dst)
    data, ids = {}, {}
    for t, etype in enumerate(g.canonical_etypes):
        keep = etype_ids == t
        data[etype] = (src[keep], dst[keep])
        ids[etype] = type_eid[keep]
    hg = heterograph(data, {ntype: g.num_nodes(ntype) for ntype in g.ntypes})
    for etype, e in ids.items():
        hg.edges[etype].data[EID] = e
    return hg


def _prob_name(g, prob):
    if prob is None:
        return ""
    return prob if "/" in prob else g._client.etype + "/" + prob


def _check_edge_dir(edge_dir):
    if edge_dir not in ("in", "out"):
        raise InvalidArgument(f"edge_dir must be 'in' or 'out', got {edge_dir!r}")


def sample_neighbors(g, nodes, fanout, edge_dir="in", prob=None, exclude_edges=None, replace=False,
                     output_device=None, etype_sorted=True, use_graphbolt=False, _rng_seed=None):
    """Samples `fanout` in-neighbours (edge_dir='out': out-neighbours) of
    every seed in `nodes` (-1: all), as DGL's distributed sample_neighbors:
    seeds grouped by owner, one request per machine, local seeds sampled in
    process. `prob` names an edge tensor of weights. The random stream comes
    from torch's global generator. Returns the frontier: a dgld.DGLGraph over
    all of g's nodes holding the sampled edges (edata[dgl.EID]: their global
    ids), as DGL's does; on a typed graph (nodes: {ntype: per-type ids}) a
    heterograph of every edge type with per-type ids, as DGL's. DGL 2.x's
    use_graphbolt is accepted: dgld's own sampling serves it."""
    _check_edge_dir(edge_dir)
    if use_graphbolt:
        note_graphbolt("sample_neighbors")
    if exclude_edges is not None:
        raise InvalidArgument("sample_neighbors: exclude_edges is not supported by dgld yet")
    seeds = _homo_seeds(g, nodes, "sample_neighbors")
    src, dst, eid = g._client.sample_neighbors(seeds, int(fanout), bool(replace), edge_dir == "out",
                                               _prob_name(g, prob), _seed(_rng_seed))
    return _frontier(g, src, dst, eid) if g.is_homogeneous() else _typed_frontier(g, src, dst, eid)


def _etype_fanouts(g, fanout):
    """DGL's fanout of sample_etype_neighbors: one int for every edge type,
    or a dict naming each edge type (by any of its names) once."""
    if isinstance(fanout, dict):
        per_type = [None] * len(g.canonical_etypes)
        for etype, v in fanout.items():
            per_type[g.get_etype_id(etype)] = int(v)
        missing = [":".join(g.canonical_etypes[t]) for t, v in enumerate(per_type) if v is None]
        if missing:
            raise InvalidArgument(f"sample_etype_neighbors: the fanout dict has no value for edge type(s) "
                                  f"{', '.join(missing)}; it must name every edge type of the graph")
        return per_type
    return [int(fanout)] * len(g.canonical_etypes)


def sample_etype_neighbors(g, nodes, fanout, edge_dir="in", prob=None, replace=False, etype_sorted=True,
                           use_graphbolt=False, _rng_seed=None):
    """DGL's sample_etype_neighbors: `fanout` neighbours of every seed for
    each edge type separately (an int for every type, or a dict by edge
    type; -1: all of that type). nodes: homogeneous ids, or a dict
    {ntype: per-type ids}. prob names an edge tensor of weights (on a typed
    graph: not yet supported). On a homogeneous graph the
    result is sample_neighbors'; on a typed graph a heterograph of every
    edge type with per-type node ids and edata[dgl.EID] per-type edge ids,
    as DGL returns it. etype_sorted is accepted (dgld's partitions always
    keep each node's edges sorted by type), and DGL 2.x's use_graphbolt."""
    _check_edge_dir(edge_dir)
    if use_graphbolt:
        note_graphbolt("sample_etype_neighbors")
    fanouts = _etype_fanouts(g, fanout)
    seeds = _homo_seeds(g, nodes, "sample_etype_neighbors")
    if g.is_homogeneous():
        src, dst, eid = g._client.sample_neighbors(seeds, fanouts[0], bool(replace), edge_dir == "out",
                                                   _prob_name(g, prob), _seed(_rng_seed))
        return _frontier(g, src, dst, eid)
    if prob is not None:
        raise InvalidArgument("sample_etype_neighbors: prob= on a typed graph is not supported by dgld yet (the "
                              "servers weigh edges by one float32 tensor over every edge type)")
    src, dst, eid = g._client.sample_neighbors(seeds, -1, bool(replace), edge_dir == "out", "",
                                               _seed(_rng_seed), fanouts)
    return _typed_frontier(g, src, dst, eid)


def in_subgraph(g, nodes):
    """Every in-edge of `nodes` (DGL's distributed in_subgraph): a graph
    over all of g's nodes with those edges, edata[dgl.EID] their global
    ids. nodes: ids, or a dict of one node type's ids (DGL supports one
    node type and one edge type here)."""
    if isinstance(nodes, dict):
        if len(nodes) != 1:
            raise InvalidArgument("in_subgraph on a DistGraph takes the ids of one node type")
        nodes = next(iter(nodes.values()))
    if not g.is_homogeneous():
        raise InvalidArgument("in_subgraph on a DistGraph supports graphs of one node type and one edge type "
                              "(as DGL's); sample with sample_etype_neighbors(g, nodes, -1) on a typed graph")
    seeds = as_ids(nodes, "in_subgraph", g.num_nodes(), check_range=False)
    # Taking every in-edge of each seed is the sampler with fanout -1: no
    # random draw is made, and the servers' code path is the one tested.
    src, dst, eid = g._client.sample_neighbors(seeds, -1, False, False, "", 0)
    return _frontier(g, src, dst, eid)


def find_edges(g, edge_ids):
    """(src, dst) of the edges with these global ids (DGL's
    dgl.distributed.find_edges): homogeneous node ids."""
    ids = as_ids(edge_ids, "find_edges", g.num_edges(), check_range=False)
    return g._client.find_edges(ids)
