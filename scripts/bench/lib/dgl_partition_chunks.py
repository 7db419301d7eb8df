"""Partitions a homogeneous graph in DGL's chunked layout with DGL's own
partitioner, so that DistDGL can train on the graph dgld trains on.

dgld's partitions are in dgld's binary format, which DGL cannot read; the
chunked layout (`dgl-partition --to-chunks`, docs/formats.md) is one both
read. This loads it into a `dgl.graph` (node data as stored, the masks as
bool, which DGL's node_split expects) and calls DGL's
`dgl.distributed.partition_graph` with METIS.

Usage (with DGL importable, e.g. DGLBACKEND=pytorch PYTHONPATH=<dgl>/python):
  dgl_partition_chunks.py CHUNK_DIR OUT_DIR NUM_PARTS [GRAPH_NAME]
writes OUT_DIR/<GRAPH_NAME>.json (default: the chunks' graph_name).
"""
import json
import os
import sys
import time

import dgl
import numpy as np
import torch


def read_edges(chunk_dir, spec):
    """Every edge chunk, concatenated in edge-id order, as (src, dst)."""
    fmt = spec["format"]
    parts = []
    for name in spec["data"]:
        path = os.path.join(chunk_dir, name)
        if fmt["name"] == "csv":
            # Whitespace-separated (dgl-partition writes "src dst"); ","-separated otherwise.
            delimiter = fmt.get("delimiter", " ")
            parts.append(np.loadtxt(path, dtype=np.int64, ndmin=2,
                                    delimiter=None if delimiter.isspace() else delimiter))
        elif fmt["name"] == "numpy":
            parts.append(np.load(path).astype(np.int64, copy=False).reshape(-1, 2))
        else:
            sys.exit(f"dgl_partition_chunks.py: edge format {fmt['name']!r} is not supported")
    edges = np.concatenate(parts)
    return torch.from_numpy(edges[:, 0].copy()), torch.from_numpy(edges[:, 1].copy())


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    chunk_dir, out_dir, num_parts = sys.argv[1], sys.argv[2], int(sys.argv[3])
    meta = json.load(open(os.path.join(chunk_dir, "metadata.json")))
    name = sys.argv[4] if len(sys.argv) == 5 else meta["graph_name"]
    if len(meta["node_type"]) != 1 or len(meta["edge_type"]) != 1:
        sys.exit("dgl_partition_chunks.py: only homogeneous graphs (one node and one edge type)")
    ntype, etype = meta["node_type"][0], meta["edge_type"][0]

    start = time.time()
    num_nodes = int(sum(meta["num_nodes_per_chunk"][0]))
    src, dst = read_edges(chunk_dir, meta["edges"][etype])
    g = dgl.graph((src, dst), num_nodes=num_nodes)
    for key, spec in meta.get("node_data", {}).get(ntype, {}).items():
        data = torch.from_numpy(np.concatenate([np.load(os.path.join(chunk_dir, f)) for f in spec["data"]]))
        g.ndata[key] = data.bool() if key.endswith("_mask") else data
    print(f"loaded {g.num_nodes()} nodes, {g.num_edges()} edges in {time.time() - start:.1f} s", flush=True)

    start = time.time()
    dgl.distributed.partition_graph(g, name, num_parts, out_dir, part_method="metis")
    print(f"partitioned into {num_parts} with DGL's METIS in {time.time() - start:.1f} s", flush=True)


if __name__ == "__main__":
    main()
