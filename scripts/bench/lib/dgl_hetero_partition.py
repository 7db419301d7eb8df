"""A heterogeneous graph in OGB's ogbn-mag raw layout (as
scripts/cora_hetero.py writes Cora as paper/word) partitioned by DGL itself
into one partition in DGL's own format, for runs of DGL's R-GCN script on
DGL beside dgld's (scripts/bench/rgcn_dgl_style.sh --distdgl). Run with DGL
on the path:

    PYTHONPATH=<dgl>/python python3 dgl_hetero_partition.py MAG_DIR OUT_DIR NAME

The labelled type's node data: feat, labels, train_mask, val_mask, test_mask
(the names DGL's entity_classify_dist.py reads)."""

import csv
import sys
from pathlib import Path

import dgl
import numpy as np
import torch


def rows(path):
    path = Path(path)
    if not path.exists():
        path = path.with_suffix(path.suffix + ".gz")
        import gzip
        f = gzip.open(path, "rt")
    else:
        f = open(path)
    with f:
        return [r for r in csv.reader(f) if r]


def main(mag, out, name):
    raw = Path(mag) / "raw"
    header = rows(raw / "num-node-dict.csv")
    counts = {t: int(n) for t, n in zip(header[0], header[1])}
    data = {}
    for rel in sorted((raw / "relations").iterdir()):
        s, r, d = rel.name.split("___")
        e = np.array(rows(rel / "edge.csv"), dtype=np.int64).reshape(-1, 2)
        data[(s, r, d)] = (torch.tensor(e[:, 0]), torch.tensor(e[:, 1]))
    g = dgl.heterograph(data, counts)
    target = next(p.name for p in (raw / "node-label").iterdir())
    n = counts[target]
    g.nodes[target].data["feat"] = torch.tensor(np.array(rows(raw / "node-feat" / target / "node-feat.csv"),
                                                         dtype=np.float32))
    g.nodes[target].data["labels"] = torch.tensor(np.array(rows(raw / "node-label" / target / "node-label.csv"),
                                                           dtype=np.int64).reshape(-1))
    split = next((Path(mag) / "split").iterdir())
    split = split / target if (split / target).is_dir() else split
    for key, file in (("train_mask", "train"), ("val_mask", "valid"), ("test_mask", "test")):
        ids = np.array(rows(split / f"{file}.csv"), dtype=np.int64).reshape(-1)
        mask = torch.zeros(n, dtype=torch.bool)
        mask[ids] = True
        g.nodes[target].data[key] = mask
    dgl.distributed.partition_graph(g, name, 1, out, part_method="metis")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
