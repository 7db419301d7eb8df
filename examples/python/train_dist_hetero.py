"""Distributed node classification on a heterogeneous graph in Python on
dgld: examples/python/train_dist.py made typed, written against DGL's
distributed API as DGL's typed examples use it (typed DistGraph,
per-type node_split, DistNodeDataLoader over {ntype: ids} with a fanout
per edge type, typed blocks, DistEmbedding per featureless node type with
SparseAdam); the only dgld-specific lines are the two imports:

    import dgld as dgl                  # DGL: import dgl
    import dgld.nn.pytorch as dglnn     # DGL: import dgl.nn.pytorch as dglnn

The model: each node type with features projected by its own linear layer,
each type without features embedded (a DistEmbedding), then
HeteroGraphConv({relation: SAGEConv('mean')}, aggregate='sum') layers;
the labelled type (--category, default the graph's labelled type) is
classified. Test accuracy with every neighbour (a full-neighbour sampler).

    dgl-launch --workspace $PWD --ip-config ip_config.txt --part-config parts/g.json \\
        --num-trainers 1 --extra-envs PYTHONPATH=$PWD/build/python -- \\
        python3 examples/python/train_dist_hetero.py --graph_name g --ip_config ip_config.txt \\
        --part_config parts/g.json

scripts/bench/hetero_accuracy.sh runs it on Cora written as paper/word.
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


class TypedInput(nn.Module):
    """Every node type into `dim`: a linear projection of its features, or
    a learnable DistEmbedding when it has none."""

    def __init__(self, g, feat_dims, dim):
        super().__init__()
        self.proj = nn.ModuleDict({t: nn.Linear(d, dim) for t, d in feat_dims.items()})
        self.embeds = {t: dgl.distributed.DistEmbedding(g.num_nodes(t), dim, name=f"{t}_embed",
                                                        init_func=lambda shape, dtype: th.empty(shape, dtype=dtype)
                                                        .uniform_(-1, 1),
                                                        part_policy=g.get_node_partition_policy(t))
                       for t in g.ntypes if t not in feat_dims}

    def forward(self, input_nodes, feats):
        h = {t: self.proj[t](x) for t, x in feats.items()}
        for t, emb in self.embeds.items():
            if input_nodes[t].numel():
                h[t] = emb(input_nodes[t])
        return h


class TypedSAGE(nn.Module):
    def __init__(self, g, n_hidden, n_classes, n_layers, dropout):
        super().__init__()
        dims = [n_hidden] * n_layers + [n_classes]
        self.layers = nn.ModuleList(
            dglnn.HeteroGraphConv({rel: dglnn.SAGEConv(dims[i], dims[i + 1], "mean") for rel in g.etypes},
                                  aggregate="sum")
            for i in range(n_layers))
        self.dropout = nn.Dropout(dropout)

    def forward(self, blocks, h):
        for i, (layer, block) in enumerate(zip(self.layers, blocks)):
            h = layer(block, h)
            if i != len(self.layers) - 1:
                h = {t: self.dropout(F.relu(x)) for t, x in h.items()}
        return h


class Net(nn.Module):
    def __init__(self, embed, model):
        super().__init__()
        self.embed, self.model = embed, model

    def forward(self, blocks, input_nodes, feats):
        return self.model(blocks, self.embed(input_nodes, feats))


def batch_features(g, input_nodes, feat_types):
    """Each featured type's rows for the batch (fetched with it by the loader)."""
    return {t: g.nodes[t].data["features"][input_nodes[t]] for t in feat_types if input_nodes[t].numel()}


def evaluate(g, embed, model, category, nids, batch_size, feat_types, n_layers):
    """Accuracy over every trainer's `nids` with every neighbour."""
    model.eval()
    sampler = dgl.dataloading.MultiLayerFullNeighborSampler(n_layers)
    loader = dgl.dataloading.DistNodeDataLoader(g, {category: nids}, sampler, batch_size=batch_size)
    counts = th.zeros(2)
    with th.no_grad():
        for input_nodes, seeds, blocks in loader:
            h = model(blocks, embed(input_nodes, batch_features(g, input_nodes, feat_types)))
            labels = g.nodes[category].data["labels"][seeds[category]]
            counts += th.tensor([float((h[category].argmax(1) == labels).sum()), float(len(labels))])
    model.train()
    if th.distributed.is_initialized():
        th.distributed.all_reduce(counts)
    return float(counts[0] / max(float(counts[1]), 1.0))


def main(args):
    dgl.distributed.initialize(args.ip_config)
    th.distributed.init_process_group(backend="gloo")
    g = dgl.distributed.DistGraph(args.graph_name, part_config=args.part_config)
    th.manual_seed(args.seed)
    category = args.category or next(t for t in g.ntypes if "labels" in g.nodes[t].data)
    pb = g.get_partition_book()
    split = {name: dgl.distributed.node_split(g.nodes[category].data[name], pb, ntype=category, force_even=True)
             for name in ("train_mask", "val_mask", "test_mask")}
    labels = g.nodes[category].data["labels"]
    n_classes = int(labels[th.arange(g.num_nodes(category))].max()) + 1
    feat_dims = {t: g.nodes[t].data["features"].shape[1] for t in g.ntypes if "features" in g.nodes[t].data}
    embed = TypedInput(g, feat_dims, args.num_hidden)
    model = TypedSAGE(g, args.num_hidden, n_classes, args.num_layers, args.dropout)
    # Relations into types that are not classified get no gradient in the last layer.
    net = th.nn.parallel.DistributedDataParallel(Net(embed, model), find_unused_parameters=True)
    optimizer = th.optim.Adam(net.parameters(), lr=args.lr)
    sparse = dgl.distributed.optim.SparseAdam(list(embed.embeds.values()), lr=args.sparse_lr) \
        if embed.embeds else None
    fanouts = [{etype: int(f) for etype in g.etypes} for f in args.fan_out.split(",")]
    sampler = dgl.dataloading.NeighborSampler(fanouts)
    loader = dgl.dataloading.DistNodeDataLoader(g, {category: split["train_mask"]}, sampler,
                                                batch_size=args.batch_size, shuffle=True)
    tic = time.time()
    loss = th.zeros(())
    for epoch in range(args.num_epochs):
        with net.join():
            for input_nodes, seeds, blocks in loader:
                out = net(blocks, input_nodes, batch_features(g, input_nodes, feat_dims))[category]
                loss = F.cross_entropy(out, blocks[-1].dstdata["labels"][category])
                optimizer.zero_grad()
                if sparse is not None:
                    sparse.zero_grad()
                loss.backward()
                optimizer.step()
                if sparse is not None:
                    sparse.step()
        if args.log_every and epoch % args.log_every == 0:
            print(f"Part {g.rank()}: epoch {epoch} loss {float(loss):.4f}", flush=True)
    train_s = time.time() - tic
    val = evaluate(g, embed, model, category, split["val_mask"], 1000, feat_dims, args.num_layers)
    test = evaluate(g, embed, model, category, split["test_mask"], 1000, feat_dims, args.num_layers)
    print(f"Part {g.rank()}: val {val:.4f} test {test:.4f} ({train_s:.1f} s)", flush=True)
    if args.metrics_out and g.rank() == 0:
        with open(args.metrics_out + ".tmp", "w") as f:
            json.dump({"val_acc": val, "test_acc": test, "train_s": train_s, "last_loss": float(loss)}, f)
        os.replace(args.metrics_out + ".tmp", args.metrics_out)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description="typed GraphSAGE (HeteroGraphConv) on dgld")
    p.add_argument("--graph_name", type=str)
    p.add_argument("--ip_config", type=str)
    p.add_argument("--part_config", type=str)
    p.add_argument("--category", type=str, default="", help="the node type to classify (default: the labelled one)")
    p.add_argument("--num_epochs", type=int, default=40)
    p.add_argument("--num_hidden", type=int, default=64)
    p.add_argument("--num_layers", type=int, default=2)
    p.add_argument("--fan_out", type=str, default="10,10", help="per layer, for every edge type")
    p.add_argument("--batch_size", type=int, default=70)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--sparse_lr", type=float, default=0.01)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--log_every", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--metrics_out", type=str, default="")
    main(p.parse_args())
