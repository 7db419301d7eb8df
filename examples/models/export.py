"""Builds a model (trainer-host's built-in sage, gcn or gat from dgld.models,
or the example sage_res beside this file), scripts it with torch.jit.script
and saves it with torch.jit.save, for trainer-host --model-file (README.md):

    PYTHONPATH=build/python /usr/bin/python3 examples/models/export.py \\
        --model sage --in-feats 8 --n-classes 4 --out sage.pt

The file is written as FILE.tmp and renamed, so FILE is never partial.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # sage_res.py beside this file

MODELS = ("sage", "gcn", "gat", "sage_res")
DEFAULT_LAYERS = {"sage": 2, "gcn": 2, "gat": 2, "sage_res": 3}


def positive_int(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {v}")
    return v


def non_negative_int(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {v}")
    return v


def dropout_rate(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1), got {text!r}")
    if not 0.0 <= v < 1.0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be in [0, 1), got {text}")
    return v


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Export an example GNN as a TorchScript module for trainer-host "
                                            "--model-file.")
    p.add_argument("--model", required=True, choices=MODELS, help="the architecture")
    p.add_argument("--in-feats", type=positive_int, required=True, help="width of the graph's input features")
    p.add_argument("--n-classes", type=positive_int, required=True, help="number of classes (logits out)")
    p.add_argument("--n-hidden", type=positive_int, default=16, help="hidden width (per head for gat; default 16)")
    p.add_argument("--num-layers", type=positive_int, default=None,
                   help="number of layers, one per sampled hop (default 2; 3 for sage_res)")
    p.add_argument("--num-heads", type=positive_int, default=2, help="attention heads per layer (gat only; default 2)")
    p.add_argument("--dropout", type=dropout_rate, default=0.5, help="dropout between layers, in [0, 1) (default 0.5)")
    p.add_argument("--seed", type=non_negative_int, default=0, help="torch.manual_seed before building (default 0)")
    p.add_argument("--out", required=True, help="the .pt file to write")
    args = p.parse_args(argv)
    if args.num_layers is None:
        args.num_layers = DEFAULT_LAYERS[args.model]
    out_dir = os.path.dirname(os.path.abspath(args.out))
    if os.path.isdir(args.out):
        p.error(f"--out {args.out} is a directory; give a file name")
    if not os.path.isdir(out_dir):
        p.error(f"--out {args.out}: directory {out_dir} does not exist")
    return args


def build(args):
    import torch

    torch.manual_seed(args.seed)
    from dgld.models import GAT, GCN, SAGE  # trainer-host's built-in models
    if args.model == "sage":
        return SAGE(args.in_feats, args.n_hidden, args.n_classes, args.num_layers, args.dropout)
    if args.model == "gcn":
        return GCN(args.in_feats, args.n_hidden, args.n_classes, args.num_layers, args.dropout)
    if args.model == "gat":
        return GAT(args.in_feats, args.n_hidden, args.n_classes, args.num_layers, args.num_heads, args.dropout)
    from sage_res import SAGERes
    return SAGERes(args.in_feats, args.n_hidden, args.n_classes, args.num_layers, args.dropout)


def describe(args):
    s = (f"{args.model}(in_feats={args.in_feats}, n_hidden={args.n_hidden}, n_classes={args.n_classes}, "
         f"num_layers={args.num_layers}")
    if args.model == "gat":
        s += f", num_heads={args.num_heads}"
    return s + f", dropout={args.dropout}, seed={args.seed})"


def main(argv=None):
    args = parse_args(argv)
    try:
        import torch
        import dgld.nn  # noqa: F401 - registers torch.classes.dgld.Block before the models are scripted
    except ImportError as e:
        sys.exit(f"export.py: cannot import torch and dgld ({e}); run with PYTHONPATH=<build dir>/python "
                 "(e.g. PYTHONPATH=build/python) and a Python with torch")

    model = build(args)
    scripted = torch.jit.script(model)
    num_params = sum(p.numel() for p in scripted.parameters())
    tmp = args.out + ".tmp"
    try:
        torch.jit.save(scripted, tmp)
        os.replace(tmp, args.out)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    print(f"wrote {args.out}: {describe(args)}, {num_params} parameters")


if __name__ == "__main__":
    main()
