"""Unsupervised GraphSAGE (link prediction) written as DGL's distributed
unsupervised examples write it, with only the imports changed:

  --loader collate (DGL 0.6-0.7's experimental/train_dist_unsupervised.py):
      a sampler class whose sample_blocks(seed_edges) finds the edges' ends
      (g.find_edges), draws negative tails, builds the pair graphs with
      dgl.graph and dgl.compact_graphs, removes the seed edges from each
      frontier (frontier.edge_ids(..., return_uv=True), dgl.remove_edges)
      and makes blocks with dgl.to_block, run by DistDataLoader(collate_fn).
  --loader edge (DGL 1.x's dist/train_dist_unsupervised.py):
      DistEdgeDataLoader with a NeighborSampler and negative_sampler=.

Both score the pair graphs with apply_edges(fn.u_dot_v) inside
local_scope() and train with binary cross-entropy. The embeddings are then
evaluated as the examples do: a linear classifier on the training nodes'
embeddings (here in torch), accuracy on the test nodes.

    dgl-launch ... -- python3 examples/python/guide_link.py --graph_name g --ip_config ip_config.txt \\
        --part_config parts/g.json --num_epochs 3
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


class PairSampler:
    """DGL 0.6-0.7's unsupervised sampler (see the module doc)."""

    def __init__(self, g, fanouts, num_negs, remove_edge):
        self.g = g
        self.fanouts = fanouts
        self.num_negs = num_negs
        self.remove_edge = remove_edge
        self.num_nodes = g.num_nodes()

    def sample_blocks(self, seed_edges):
        seed_edges = th.LongTensor(np.asarray(seed_edges))
        heads, tails = self.g.find_edges(seed_edges)
        neg_tails = th.randint(0, self.num_nodes, (len(seed_edges) * self.num_negs,))
        neg_heads = heads.view(-1, 1).expand(len(seed_edges), self.num_negs).flatten()
        pos_graph = dgl.graph((heads, tails), num_nodes=self.num_nodes)
        neg_graph = dgl.graph((neg_heads, neg_tails), num_nodes=self.num_nodes)
        pos_graph, neg_graph = dgl.compact_graphs([pos_graph, neg_graph])
        seeds = pos_graph.ndata[dgl.NID]
        blocks = []
        for fanout in self.fanouts:
            frontier = dgl.distributed.sample_neighbors(self.g, seeds, fanout, replace=True)
            if self.remove_edge:
                _, _, eids = frontier.edge_ids(th.cat([heads, tails]), th.cat([tails, heads]), return_uv=True)
                frontier = dgl.remove_edges(frontier, eids)
            block = dgl.to_block(frontier, seeds)
            seeds = block.srcdata[dgl.NID]
            blocks.insert(0, block)
        blocks[0].srcdata["features"] = self.g.ndata["features"][blocks[0].srcdata[dgl.NID]]
        return pos_graph, neg_graph, blocks


class SAGE(nn.Module):
    def __init__(self, in_feats, n_hidden, n_layers, dropout):
        super().__init__()
        sizes = [in_feats] + [n_hidden] * n_layers
        self.layers = nn.ModuleList(dglnn.SAGEConv(sizes[i], sizes[i + 1], "mean") for i in range(n_layers))
        self.dropout = nn.Dropout(dropout)

    def forward(self, blocks, x):
        h = x
        for i, (layer, block) in enumerate(zip(self.layers, blocks)):
            h = layer(block, h)
            if i != len(self.layers) - 1:
                h = self.dropout(F.relu(h))
        return h


def pair_loss(h, pos_graph, neg_graph):
    """DGL's examples' CrossEntropyLoss: u . v scores of both pair graphs."""
    with pos_graph.local_scope():
        pos_graph.ndata["h"] = h
        pos_graph.apply_edges(fn.u_dot_v("h", "h", "score"))
        pos_score = pos_graph.edata["score"]
    with neg_graph.local_scope():
        neg_graph.ndata["h"] = h
        neg_graph.apply_edges(fn.u_dot_v("h", "h", "score"))
        neg_score = neg_graph.edata["score"]
    score = th.cat([pos_score, neg_score])
    label = th.cat([th.ones_like(pos_score), th.zeros_like(neg_score)])
    return F.binary_cross_entropy_with_logits(score, label)


def batches(args, g, train_eids):
    if args.loader == "collate":
        sampler = PairSampler(g, [int(f) for f in args.fan_out.split(",")], args.num_negs, args.remove_edge)
        loader = dgl.distributed.DistDataLoader(dataset=train_eids.numpy(), batch_size=args.batch_size,
                                                collate_fn=sampler.sample_blocks, shuffle=True, drop_last=False)
        for pos_graph, neg_graph, blocks in loader:
            yield pos_graph, neg_graph, blocks
    else:
        sampler = dgl.dataloading.NeighborSampler([int(f) for f in args.fan_out.split(",")])
        loader = dgl.dataloading.DistEdgeDataLoader(
            g, train_eids, sampler, negative_sampler=dgl.dataloading.negative_sampler.Uniform(args.num_negs),
            exclude="reverse_id" if args.remove_edge else None, reverse_eids=th.arange(g.num_edges()),
            batch_size=args.batch_size, shuffle=True, drop_last=False)
        for _, pos_graph, neg_graph, blocks in loader:
            yield pos_graph, neg_graph, blocks


def embed_all(model, g, batch_size):
    """Every node's embedding with full neighbourhoods (DGL's inference)."""
    nodes = th.arange(g.num_nodes())
    sampler = dgl.dataloading.NeighborSampler([-1] * len(model.layers))
    out = th.zeros(g.num_nodes(), model.layers[-1]._out_feats)
    loader = dgl.dataloading.DistNodeDataLoader(g, nodes, sampler, batch_size=batch_size)
    with th.no_grad():
        for input_nodes, seeds, blocks in loader:
            out[seeds] = model(blocks, blocks[0].srcdata["features"])
    return out


def linear_probe(emb, labels, train, test, epochs=300):
    """A logistic regression on the training nodes' embeddings; test accuracy."""
    emb = (emb - emb.mean(0)) / (emb.std(0) + 1e-6)
    clf = nn.Linear(emb.shape[1], int(labels.max()) + 1)
    opt = th.optim.Adam(clf.parameters(), lr=0.05, weight_decay=1e-4)
    for _ in range(epochs):
        opt.zero_grad()
        F.cross_entropy(clf(emb[train]), labels[train]).backward()
        opt.step()
    return float((clf(emb[test]).argmax(1) == labels[test]).float().mean())


def main(args):
    dgl.distributed.initialize(args.ip_config, num_workers=args.num_workers)
    th.distributed.init_process_group(backend="gloo")
    g = dgl.distributed.DistGraph(args.graph_name, part_config=args.part_config)
    th.manual_seed(args.seed)
    pb = g.get_partition_book()
    train_eids = dgl.distributed.edge_split(th.ones(g.num_edges(), dtype=th.bool), pb, force_even=True)
    model = th.nn.parallel.DistributedDataParallel(
        SAGE(g.ndata["features"].shape[1], args.num_hidden, len(args.fan_out.split(",")), args.dropout))
    optimizer = th.optim.Adam(model.parameters(), lr=args.lr)
    metrics = {"loader": args.loader, "epochs": []}
    for epoch in range(args.num_epochs):
        tic, losses = time.time(), []
        with model.join():
            for pos_graph, neg_graph, blocks in batches(args, g, train_eids):
                h = model(blocks, blocks[0].srcdata["features"])
                loss = pair_loss(h, pos_graph, neg_graph)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                losses.append(loss.item())
        print(f"Part {g.rank()} | Epoch {epoch:03d} | Loss {np.mean(losses):.4f} | {time.time() - tic:.2f} s",
              flush=True)
        metrics["epochs"].append({"epoch": epoch, "loss": float(np.mean(losses))})
    g.barrier()
    if g.rank() == 0:
        model.eval()
        emb = embed_all(model.module, g, args.batch_size_eval)
        labels = g.ndata["labels"][th.arange(g.num_nodes())].long()
        train = th.nonzero(g.ndata["train_mask"][th.arange(g.num_nodes())]).reshape(-1)
        test = th.nonzero(g.ndata["test_mask"][th.arange(g.num_nodes())]).reshape(-1)
        metrics["test_acc"] = linear_probe(emb, labels, train, test)
        print(f"Part {g.rank()}, Test Acc (linear probe) {metrics['test_acc']:.4f}", flush=True)
        if args.metrics_out:
            with open(args.metrics_out + ".tmp", "w") as f:
                json.dump(metrics, f, indent=2)
            os.replace(args.metrics_out + ".tmp", args.metrics_out)
    g.barrier()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="DGL-style unsupervised GraphSAGE on dgld")
    parser.add_argument("--graph_name", type=str)
    parser.add_argument("--ip_config", type=str)
    parser.add_argument("--part_config", type=str)
    parser.add_argument("--loader", choices=["collate", "edge"], default="collate")
    parser.add_argument("--num_workers", type=int, default=0)
    parser.add_argument("--num_epochs", type=int, default=3)
    parser.add_argument("--num_hidden", type=int, default=16)
    parser.add_argument("--fan_out", type=str, default="10,25")
    parser.add_argument("--batch_size", type=int, default=1000)
    parser.add_argument("--batch_size_eval", type=int, default=10000)
    parser.add_argument("--num_negs", type=int, default=1)
    parser.add_argument("--remove_edge", action="store_true")
    parser.add_argument("--lr", type=float, default=0.003)
    parser.add_argument("--dropout", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--metrics_out", type=str, default="")
    main(parser.parse_args())
