"""Distributed node classification written the way DGL's distributed guide
and DGL 0.5-0.7's train_dist.py write it: a NeighborSampler class whose
sample_blocks calls dgl.distributed.sample_neighbors and dgl.to_block,
handed to DistDataLoader as its collate_fn, and a model written against
DGL's graph API (srcdata / dstdata, local_scope, update_all with built-in
or user-defined functions). The only dgld-specific lines are the imports:

    import dgld as dgl                  # DGL: import dgl
    import dgld.function as fn          # DGL: import dgl.function as fn

--model picks the layer: 'builtin' (update_all(fn.copy_u, fn.mean), fused
kernels), 'udf' (the same mean with a message and a reduce UDF, DGL's
degree bucketing), 'dglnn' (dgld.nn.SAGEConv on the same blocks).
--num_workers N runs sample_blocks in N sampler processes (dgl-launch
--num-samplers N); 0 runs it in the trainer.

    dgl-launch --workspace $PWD --ip-config ip_config.txt --part-config parts/g.json \\
        --num-trainers 1 --extra-envs PYTHONPATH=$PWD/build/python -- \\
        python3 examples/python/guide_train.py --graph_name g --ip_config ip_config.txt \\
        --part_config parts/g.json --num_epochs 10
"""

import argparse
import json
import os
import time

import numpy as np
import torch as th
import torch.nn as nn
import torch.nn.functional as F

import dgld as dgl
import dgld.function as fn
import dgld.nn.pytorch as dglnn


class NeighborSampler:
    """The guide's sampler: one frontier per layer around the seeds, made
    into a block; the batch's features and labels attached to the blocks."""

    def __init__(self, g, fanouts, sample_neighbors, load_feat=True):
        self.g = g
        self.fanouts = fanouts
        self.sample_neighbors = sample_neighbors
        self.load_feat = load_feat

    def sample_blocks(self, seeds):
        seeds = th.LongTensor(np.asarray(seeds))
        blocks = []
        for fanout in self.fanouts:
            frontier = self.sample_neighbors(self.g, seeds, fanout, replace=True)
            block = dgl.to_block(frontier, seeds)
            seeds = block.srcdata[dgl.NID]
            blocks.insert(0, block)
        input_nodes = blocks[0].srcdata[dgl.NID]
        output_nodes = blocks[-1].dstdata[dgl.NID]
        blocks[0].srcdata["features"] = self.g.ndata["features"][input_nodes]
        blocks[-1].dstdata["labels"] = self.g.ndata["labels"][output_nodes]
        return blocks


class MeanSAGELayer(nn.Module):
    """GraphSAGE-mean written with DGL's graph API: h_dst' = W_self h_dst +
    W_neigh mean(h_src over in-edges), with built-in or user-defined
    message and reduce functions."""

    def __init__(self, in_feats, out_feats, udf):
        super().__init__()
        self.fc_self = nn.Linear(in_feats, out_feats)
        self.fc_neigh = nn.Linear(in_feats, out_feats, bias=False)
        self.udf = udf

    def forward(self, block, h):
        with block.local_scope():
            block.srcdata["h"] = h
            block.dstdata["h_dst"] = h[:block.num_dst_nodes()]
            if self.udf:
                block.update_all(lambda edges: {"m": edges.src["h"]},
                                 lambda nodes: {"neigh": nodes.mailbox["m"].mean(1)})
            else:
                block.update_all(fn.copy_u("h", "m"), fn.mean("m", "neigh"))
            return self.fc_self(block.dstdata["h_dst"]) + self.fc_neigh(block.dstdata["neigh"])


class Model(nn.Module):
    def __init__(self, kind, in_feats, n_hidden, n_classes, n_layers, dropout):
        super().__init__()
        sizes = [in_feats] + [n_hidden] * (n_layers - 1) + [n_classes]
        if kind == "dglnn":
            layers = [dglnn.SAGEConv(sizes[i], sizes[i + 1], "mean") for i in range(n_layers)]
        else:
            layers = [MeanSAGELayer(sizes[i], sizes[i + 1], kind == "udf") for i in range(n_layers)]
        self.layers = nn.ModuleList(layers)
        self.dropout = nn.Dropout(dropout)

    def forward(self, blocks, x):
        h = x
        for i, (layer, block) in enumerate(zip(self.layers, blocks)):
            h = layer(block, h)
            if i != len(self.layers) - 1:
                h = self.dropout(F.relu(h))
        return h


def accuracy(model, g, nids, fanouts, batch_size):
    """(correct, total) over nids with the given fanouts (-1: every neighbour)."""
    sampler = NeighborSampler(g, fanouts, dgl.distributed.sample_neighbors)
    loader = dgl.distributed.DistDataLoader(dataset=nids.numpy(), batch_size=batch_size,
                                            collate_fn=sampler.sample_blocks, shuffle=False, drop_last=False)
    correct = th.zeros(2)
    model.eval()
    with th.no_grad():
        for blocks in loader:
            pred = model(blocks, blocks[0].srcdata["features"])
            labels = blocks[-1].dstdata["labels"].long()
            correct += th.tensor([float((pred.argmax(1) == labels).sum()), float(len(labels))])
    model.train()
    if th.distributed.is_initialized():
        th.distributed.all_reduce(correct)
    return float(correct[0] / max(float(correct[1]), 1.0))


def main(args):
    dgl.distributed.initialize(args.ip_config, num_workers=args.num_workers)
    th.distributed.init_process_group(backend="gloo")
    g = dgl.distributed.DistGraph(args.graph_name, part_config=args.part_config)
    th.manual_seed(args.seed)
    pb = g.get_partition_book()
    train_nid = dgl.distributed.node_split(g.ndata["train_mask"], pb, force_even=True)
    val_nid = dgl.distributed.node_split(g.ndata["val_mask"], pb, force_even=True)
    test_nid = dgl.distributed.node_split(g.ndata["test_mask"], pb, force_even=True)
    fanouts = [int(f) for f in args.fan_out.split(",")]
    sampler = NeighborSampler(g, fanouts, dgl.distributed.sample_neighbors)
    dataloader = dgl.distributed.DistDataLoader(dataset=train_nid.numpy(), batch_size=args.batch_size,
                                                collate_fn=sampler.sample_blocks, shuffle=True, drop_last=False)
    in_feats = g.ndata["features"].shape[1]
    n_classes = args.n_classes
    model = Model(args.model, in_feats, args.num_hidden, n_classes, len(fanouts), args.dropout)
    model = th.nn.parallel.DistributedDataParallel(model)
    optimizer = th.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    metrics = {"model": args.model, "epochs": [], "num_workers": args.num_workers}
    for epoch in range(args.num_epochs):
        tic = time.time()
        losses, seeds = [], 0
        with model.join():
            for blocks in dataloader:
                x = blocks[0].srcdata["features"]
                labels = blocks[-1].dstdata["labels"].long()
                loss = F.cross_entropy(model(blocks, x), labels)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                losses.append(loss.item())
                seeds += len(labels)
        elapsed = time.time() - tic
        print(f"Part {g.rank()} | Epoch {epoch:03d} | Loss {np.mean(losses):.4f} | {elapsed:.3f} s | "
              f"{seeds / max(elapsed, 1e-9):.0f} seeds/s", flush=True)
        metrics["epochs"].append({"epoch": epoch, "loss": float(np.mean(losses)), "time_s": elapsed,
                                  "seeds": seeds})
    full = [-1] * len(fanouts)
    metrics["val_acc"] = accuracy(model.module, g, val_nid, full, args.batch_size_eval)
    metrics["test_acc"] = accuracy(model.module, g, test_nid, full, args.batch_size_eval)
    print(f"Part {g.rank()}, Val Acc {metrics['val_acc']:.4f}, Test Acc {metrics['test_acc']:.4f}", flush=True)
    if args.metrics_out and g.rank() == 0:
        with open(args.metrics_out + ".tmp", "w") as f:
            json.dump(metrics, f, indent=2)
        os.replace(args.metrics_out + ".tmp", args.metrics_out)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="DGL-guide-style distributed GraphSAGE on dgld")
    parser.add_argument("--graph_name", type=str)
    parser.add_argument("--ip_config", type=str)
    parser.add_argument("--part_config", type=str)
    parser.add_argument("--n_classes", type=int, required=True)
    parser.add_argument("--model", choices=["builtin", "udf", "dglnn"], default="builtin")
    parser.add_argument("--num_workers", type=int, default=0)
    parser.add_argument("--num_epochs", type=int, default=10)
    parser.add_argument("--num_hidden", type=int, default=16)
    parser.add_argument("--fan_out", type=str, default="10,25")
    parser.add_argument("--batch_size", type=int, default=1000)
    parser.add_argument("--batch_size_eval", type=int, default=10000)
    parser.add_argument("--lr", type=float, default=0.003)
    parser.add_argument("--weight_decay", type=float, default=0.0)
    parser.add_argument("--dropout", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--metrics_out", type=str, default="")
    main(parser.parse_args())
