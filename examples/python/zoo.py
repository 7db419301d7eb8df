"""A 2-layer model of each dgld.nn module, trained as DGL's mini-batch
examples train them, under dgl-launch: NeighborSampler([10, 25]), Adam
with weight decay, dropout between the layers, full-neighbour test
accuracy at the end. The only dgld-specific lines are the imports.

    --model sage-mean | sage-gcn | sage-pool | sage-lstm | gcn | gat | gatv2 | gin

GAT and GATv2: --heads heads of hidden/heads features, then one head.
GIN: sum aggregation over a 2-layer MLP per layer. scripts/bench/zoo.sh
runs every model on Cora with 3 seeds and compares with DGL's figures.

    dgl-launch ... -- python3 examples/python/zoo.py --graph_name cora --ip_config ip_config.txt \\
        --part_config parts/cora.json --model gat --seed 0
"""

import argparse
import json
import os
import time

import torch as th
import torch.nn as nn
import torch.nn.functional as F

import dgld as dgl
import dgld.nn.pytorch as dglnn

MODELS = ["sage-mean", "sage-gcn", "sage-pool", "sage-lstm", "gcn", "gat", "gatv2", "gin"]


def mlp(d_in, d_hidden, d_out):
    return nn.Sequential(nn.Linear(d_in, d_hidden), nn.ReLU(), nn.Linear(d_hidden, d_out))


def make_layer(kind, d_in, d_out, last, heads):
    if kind.startswith("sage-"):
        return dglnn.SAGEConv(d_in, d_out, kind[5:])
    if kind == "gcn":
        return dglnn.GraphConv(d_in, d_out, allow_zero_in_degree=True)
    if kind in ("gat", "gatv2"):
        h = 1 if last else heads
        cls = dglnn.GATConv if kind == "gat" else dglnn.GATv2Conv
        return cls(d_in, d_out // h if not last else d_out, num_heads=h, allow_zero_in_degree=True)
    if kind == "gin":
        return dglnn.GINConv(mlp(d_in, d_out, d_out), "sum")
    raise ValueError(f"unknown model {kind!r} (one of {', '.join(MODELS)})")


class Net(nn.Module):
    def __init__(self, kind, d_in, hidden, n_classes, dropout, heads):
        super().__init__()
        self.layers = nn.ModuleList([make_layer(kind, d_in, hidden, False, heads),
                                     make_layer(kind, hidden, n_classes, True, heads)])
        self.dropout = nn.Dropout(dropout)

    def forward(self, blocks, x):
        h = x
        for i, (layer, block) in enumerate(zip(self.layers, blocks)):
            h = layer(block, h)
            if h.dim() == 3:  # attention heads: concatenated, the last layer's averaged
                h = h.flatten(1) if i == 0 else h.mean(1)
            if i == 0:
                h = self.dropout(F.relu(h))
        return h


def inputs(g, input_nodes, row_normalize):
    """The batch's input features, read from the graph as DGL's examples
    read them, each row scaled to sum 1 with --row_normalize (DGL's Cora
    dataset comes so)."""
    x = g.ndata["features"][input_nodes]
    return x / x.sum(1, keepdim=True).clamp(min=1e-12) if row_normalize else x


def accuracy(model, g, nids, batch_size, row_normalize, fanouts):
    """(correct, total) with the given fanouts (-1: every neighbour), over all trainers."""
    loader = dgl.dataloading.DistNodeDataLoader(g, nids, dgl.dataloading.NeighborSampler(fanouts),
                                                batch_size=batch_size)
    counts = th.zeros(2)
    model.eval()
    with th.no_grad():
        for input_nodes, seeds, blocks in loader:
            pred = model(blocks, inputs(g, input_nodes, row_normalize)).argmax(1)
            counts += th.tensor([float((pred == g.ndata["labels"][seeds]).sum()), float(len(seeds))])
    model.train()
    th.distributed.all_reduce(counts)
    return float(counts[0] / max(float(counts[1]), 1.0))


def main(args):
    dgl.distributed.initialize(args.ip_config)
    th.distributed.init_process_group(backend="gloo")
    g = dgl.distributed.DistGraph(args.graph_name, part_config=args.part_config)
    th.manual_seed(args.seed)
    pb = g.get_partition_book()
    train = dgl.distributed.node_split(g.ndata["train_mask"], pb, force_even=True)
    val = dgl.distributed.node_split(g.ndata["val_mask"], pb, force_even=True)
    test = dgl.distributed.node_split(g.ndata["test_mask"], pb, force_even=True)
    n_classes = int(g.ndata["labels"][th.arange(g.num_nodes())].max()) + 1
    model = Net(args.model, g.ndata["features"].shape[1], args.num_hidden, n_classes, args.dropout, args.heads)
    # As DGL's examples wrap it: every module uses all its parameters on blocks
    # (GATv2Conv's fc_dst included), so DDP needs no find_unused_parameters.
    model = th.nn.parallel.DistributedDataParallel(model)
    optimizer = th.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    sampler = dgl.dataloading.NeighborSampler([int(f) for f in args.fan_out.split(",")])
    loader = dgl.dataloading.DistNodeDataLoader(g, train, sampler, batch_size=args.batch_size, shuffle=True)
    tic = time.time()
    for epoch in range(args.num_epochs):
        with model.join():
            for input_nodes, seeds, blocks in loader:
                loss = F.cross_entropy(model(blocks, inputs(g, input_nodes, args.row_normalize)),
                                       g.ndata["labels"][seeds])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
    train_s = time.time() - tic
    eval_fanouts = [int(f) for f in args.eval_fan_out.split(",")]
    metrics = {"model": args.model, "seed": args.seed, "train_s": train_s, "last_loss": float(loss),
               "val_acc": accuracy(model.module, g, val, 1000, args.row_normalize, eval_fanouts),
               "test_acc": accuracy(model.module, g, test, 1000, args.row_normalize, eval_fanouts)}
    print(f"Part {g.rank()}: {args.model} seed {args.seed}: val {metrics['val_acc']:.4f} test "
          f"{metrics['test_acc']:.4f} ({train_s:.1f} s)", flush=True)
    if args.metrics_out and g.rank() == 0:
        with open(args.metrics_out + ".tmp", "w") as f:
            json.dump(metrics, f)
        os.replace(args.metrics_out + ".tmp", args.metrics_out)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description="dgld.nn's model zoo")
    p.add_argument("--graph_name", type=str)
    p.add_argument("--ip_config", type=str)
    p.add_argument("--part_config", type=str)
    p.add_argument("--model", choices=MODELS, default="sage-mean")
    p.add_argument("--num_epochs", type=int, default=60)
    p.add_argument("--num_hidden", type=int, default=64)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--fan_out", type=str, default="10,25")
    p.add_argument("--eval_fan_out", type=str, default="-1,-1", help="-1: every neighbour")
    p.add_argument("--batch_size", type=int, default=140)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--weight_decay", type=float, default=5e-4)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--row_normalize", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--metrics_out", type=str, default="")
    main(p.parse_args())
