#!/usr/bin/env python3
"""Writes the Cora citation graph (OGB's raw layout, ../shared/datasets/cora)
as a heterogeneous graph in ogbn-mag's raw layout (docs/heterogeneous.md),
for dgl-partition --input ogb:OUT:

    node types   paper (2708: Cora's papers, their 1433 word features, labels,
                 the public split), word (1433, no features)
    relations    paper:cites:paper   every citation in both directions (Cora's
                                     ids put a citation's ends in id order, so a
                                     one-way relation splits train from test)
                 paper:has:word      a paper to each word it contains
                 word:rev-has:paper  the reverse of has

Usage: scripts/cora_hetero.py --cora ../shared/datasets/cora --out DIR
Only the standard library; every file is written under DIR.tmp first and
the directory renamed into place at the end, so a failed run leaves nothing.
"""

import argparse
import gzip
import os
import shutil
import sys


def read_rows(path):
    """The lines of a (gzipped) CSV file, split at commas."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return [line.rstrip("\n").split(",") for line in f if line.strip()]


def find(base, name):
    for candidate in (os.path.join(base, name + ".gz"), os.path.join(base, name)):
        if os.path.exists(candidate):
            return candidate
    sys.exit(f"cora_hetero.py: {os.path.join(base, name)}[.gz] is missing (expected Cora in OGB's raw layout)")


def ints(path, row, what):
    try:
        return [int(v) for v in row]
    except ValueError:
        sys.exit(f"cora_hetero.py: {path}: {what} {row!r} is not a list of integers")


def write(path, lines):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.writelines(line + "\n" for line in lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cora", required=True, help="Cora in OGB's raw layout (raw/, split/public/)")
    p.add_argument("--out", required=True, help="the directory to write (must not exist)")
    args = p.parse_args()
    if os.path.exists(args.out):
        sys.exit(f"cora_hetero.py: {args.out} exists; give a new directory")
    raw = os.path.join(args.cora, "raw")
    feat_path = find(raw, "node-feat.csv")
    feats = read_rows(feat_path)
    n = len(feats)
    width = len(feats[0]) if feats else 0
    words = []  # per paper: the ids of its words (features that are non-zero)
    for i, row in enumerate(feats):
        if len(row) != width:
            sys.exit(f"cora_hetero.py: {feat_path}: line {i + 1} has {len(row)} values, line 1 has {width}")
        try:
            words.append([w for w, v in enumerate(row) if float(v) != 0.0])
        except ValueError:
            sys.exit(f"cora_hetero.py: {feat_path}: line {i + 1} holds a value that is not a number")
    edge_path = find(raw, "edge.csv")
    cites = set()
    for i, row in enumerate(read_rows(edge_path)):
        e = ints(edge_path, row, f"line {i + 1}")
        if len(e) != 2 or not all(0 <= v < n for v in e):
            sys.exit(f"cora_hetero.py: {edge_path}: line {i + 1}: expected 'src,dst' with ids below {n}, got {row!r}")
        if e[0] != e[1]:
            cites.add((e[0], e[1]))
            cites.add((e[1], e[0]))
    label_path = find(raw, "node-label.csv")
    labels = read_rows(label_path)
    if len(labels) != n:
        sys.exit(f"cora_hetero.py: {label_path} has {len(labels)} lines, {feat_path} {n}")

    tmp = args.out.rstrip("/") + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        write(os.path.join(tmp, "raw", "num-node-dict.csv"), ["paper,word", f"{n},{width}"])
        rel = os.path.join(tmp, "raw", "relations")
        cite_lines = [f"{s},{d}" for s, d in sorted(cites)]
        has = [(paper, w) for paper, ws in enumerate(words) for w in ws]
        for name, lines in (("paper___cites___paper", cite_lines),
                            ("paper___has___word", [f"{s},{d}" for s, d in has]),
                            ("word___rev-has___paper", [f"{d},{s}" for s, d in has])):
            write(os.path.join(rel, name, "edge.csv"), lines)
            write(os.path.join(rel, name, "num-edge-list.csv"), [str(len(lines))])
        write(os.path.join(tmp, "raw", "node-feat", "paper", "node-feat.csv"), [",".join(r) for r in feats])
        write(os.path.join(tmp, "raw", "node-label", "paper", "node-label.csv"), [",".join(r) for r in labels])
        for part in ("train", "valid", "test"):
            path = find(os.path.join(args.cora, "split", "public"), f"{part}.csv")
            ids = [ints(path, r, f"line {i + 1}")[0] for i, r in enumerate(read_rows(path))]
            write(os.path.join(tmp, "split", "public", "paper", f"{part}.csv"), [str(v) for v in ids])
        os.replace(tmp, args.out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    print(f"cora_hetero.py: wrote {args.out}: {n} papers, {width} words, {len(cite_lines)} cites, "
          f"{len(has)} has edges (and as many rev-has)")


if __name__ == "__main__":
    main()
