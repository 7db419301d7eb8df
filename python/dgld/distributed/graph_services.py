"""DGL's graph services on a DistGraph (dgl.distributed.graph_services):
sample_neighbors, the one-hop sampler a guide-style collate_fn calls."""

import torch

from .._errors import InvalidArgument
from ..base import EID, as_ids
from ..graph import HomoGraph

__all__ = ["sample_neighbors"]


def sample_neighbors(g, nodes, fanout, edge_dir="in", prob=None, exclude_edges=None, replace=False,
                     output_device=None, etype_sorted=True, _rng_seed=None):
    """Samples `fanout` in-neighbours (edge_dir='out': out-neighbours) of
    every seed in `nodes` (-1: all), as DGL's distributed sample_neighbors:
    seeds grouped by owner, one request per machine, local seeds sampled in
    process. `prob` names an edge tensor of weights. The random stream comes
    from torch's global generator. Returns the frontier: a dgld.DGLGraph over
    all of g's nodes holding the sampled edges (edata[dgl.EID]: their global
    ids), as DGL's does."""
    if edge_dir not in ("in", "out"):
        raise InvalidArgument(f"edge_dir must be 'in' or 'out', got {edge_dir!r}")
    if exclude_edges is not None:
        raise InvalidArgument("sample_neighbors: exclude_edges is not supported by dgld yet")
    client = g._client
    seeds = as_ids(nodes, "sample_neighbors", g.num_nodes(), check_range=False)  # the servers name a bad id
    seed = _rng_seed if _rng_seed is not None else int(torch.randint(0, 2**62, (1,)).item())
    prob_name = ""
    if prob is not None:
        prob_name = client.etype + "/" + prob if "/" not in prob else prob
    src, dst, eid = client.sample_neighbors(seeds, int(fanout), bool(replace), edge_dir == "out", prob_name, seed)
    # DGL's frontier: a graph over every node of g (global ids), the sampled
    # edges' global ids in edata[dgl.EID]; dgld.to_block(frontier, seeds)
    # makes it a block.
    n = g.num_nodes()
    frontier = HomoGraph._from_coo(src, dst, n, n)
    frontier.edata[EID] = eid
    return frontier
