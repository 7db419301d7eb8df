"""Cora (OGB's raw layout, public split) partitioned by DGL itself into one
partition in DGL's own format, for runs of DistDGL in standalone mode beside
dgld's (scripts/bench/zoo.sh --distdgl). Run with DGL on the path:

    PYTHONPATH=<dgl>/python python3 dgl_cora_partition.py CORA_DIR OUT_DIR

Writes OUT_DIR/cora.json; the node data are named as dgl-partition names
them (features, labels, train_mask, val_mask, test_mask)."""

import csv
import gzip
import sys
from pathlib import Path

import dgl
import numpy as np
import torch


def rows(path):
    with gzip.open(path, "rt") as f:
        return [r for r in csv.reader(f) if r]


def main(cora, out):
    raw = Path(cora) / "raw"
    edges = np.array(rows(raw / "edge.csv.gz"), dtype=np.int64)
    feats = torch.tensor(np.array(rows(raw / "node-feat.csv.gz"), dtype=np.float32))
    labels = torch.tensor(np.array(rows(raw / "node-label.csv.gz"), dtype=np.int64).reshape(-1))
    n = feats.shape[0]
    # Both directions, as dgl-partition's ogb: input reads an undirected OGB graph.
    src = np.concatenate([edges[:, 0], edges[:, 1]])
    dst = np.concatenate([edges[:, 1], edges[:, 0]])
    g = dgl.graph((torch.tensor(src), torch.tensor(dst)), num_nodes=n)
    g = dgl.to_simple(g)
    g.ndata["features"], g.ndata["labels"] = feats, labels
    split = Path(cora) / "split" / "public"
    for name, file in (("train_mask", "train"), ("val_mask", "valid"), ("test_mask", "test")):
        ids = np.array(rows(split / f"{file}.csv.gz"), dtype=np.int64).reshape(-1)
        mask = torch.zeros(n, dtype=torch.bool)
        mask[ids] = True
        g.ndata[name] = mask
    dgl.distributed.partition_graph(g, "cora", 1, out, part_method="metis")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
