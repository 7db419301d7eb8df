"""Distributed R-GCN entity classification written the way DGL's distributed
R-GCN examples are written (examples/distributed/rgcn/node_classification.py
and examples/pytorch/rgcn/experimental/entity_classify_dist.py call the same
APIs: typed DistGraph, get_ntype_id, per-type node_split and
partid2nids, DistNodeDataLoader over {ntype: ids} with an int fanout per edge
type, an input layer of per-type projections and DistEmbeddings, R-GCN
layers of HeteroGraphConv over GraphConv(weight=False) with WeightBasis,
block.to(device), g.local_var(), a "results" DistTensor sized by the
labelled type); the only dgld-specific lines are the imports:

    import dgld as dgl                  # DGL: import dgl
    import dgld.nn.pytorch as dglnn     # DGL: import dgl.nn.pytorch as dglnn

    dgl-launch --workspace $PWD --ip-config ip_config.txt --part-config parts/mag.json \\
        --num-trainers 1 --extra-envs PYTHONPATH=$PWD/build/python -- \\
        python3 examples/python/rgcn_dist.py --graph-name mag --ip-config ip_config.txt \\
        --conf-path parts/mag.json --n-bases 2 --fanout 10,10

Embedding modes as DGL's: default (featureless types: torch.nn.Embedding,
dense Adam), --sparse-embedding (torch.nn.Embedding(sparse=True),
torch.optim.SparseAdam), --sparse-embedding --dgl-sparse
(dgl.distributed.DistEmbedding, dgl.distributed.optim.SparseAdam).
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
import dgld.nn.pytorch as dglnn


class RelGraphConvLayer(nn.Module):
    """One R-GCN layer: per relation a mean over in-neighbours (GraphConv,
    norm='right') with the relation's weight (its own, or from bases), plus
    a self loop and a bias."""

    def __init__(self, in_feat, out_feat, rel_names, num_bases, activation=None, self_loop=True, dropout=0.0):
        super().__init__()
        self.in_feat, self.out_feat, self.rel_names = in_feat, out_feat, rel_names
        self.num_bases, self.activation, self.self_loop = num_bases, activation, self_loop
        self.conv = dglnn.HeteroGraphConv({rel: dglnn.GraphConv(in_feat, out_feat, norm="right", weight=False,
                                                                bias=False) for rel in rel_names})
        self.use_basis = 0 < num_bases < len(rel_names)
        if self.use_basis:
            self.basis = dglnn.WeightBasis((in_feat, out_feat), num_bases, len(rel_names))
        else:
            self.weight = nn.Parameter(th.Tensor(len(rel_names), in_feat, out_feat))
            nn.init.xavier_uniform_(self.weight, gain=nn.init.calculate_gain("relu"))
        self.h_bias = nn.Parameter(th.zeros(out_feat))
        if self_loop:
            self.loop_weight = nn.Parameter(th.Tensor(in_feat, out_feat))
            nn.init.xavier_uniform_(self.loop_weight, gain=nn.init.calculate_gain("relu"))
        self.dropout = nn.Dropout(dropout)

    def forward(self, g, inputs):
        g = g.local_var()
        weight = self.basis() if self.use_basis else self.weight
        wdict = {self.rel_names[i]: {"weight": w.squeeze(0)} for i, w in enumerate(th.split(weight, 1, dim=0))}
        if g.is_block:
            inputs_dst = {k: v[: g.number_of_dst_nodes(k)] for k, v in inputs.items()}
        else:
            inputs_dst = inputs
        hs = self.conv(g, inputs, mod_kwargs=wdict)

        def _apply(ntype, h):
            if self.self_loop:
                h = h + th.matmul(inputs_dst[ntype], self.loop_weight)
            h = h + self.h_bias
            if self.activation:
                h = self.activation(h)
            return self.dropout(h)

        return {ntype: _apply(ntype, h) for ntype, h in hs.items()}


class EntityClassify(nn.Module):
    def __init__(self, g, h_dim, out_dim, num_bases, num_hidden_layers, dropout, use_self_loop):
        super().__init__()
        rel_names = sorted(set(g.etypes))
        self.layers = nn.ModuleList()
        self.layers.append(RelGraphConvLayer(h_dim, h_dim, rel_names, num_bases, activation=F.relu,
                                             self_loop=use_self_loop, dropout=dropout))
        for _ in range(num_hidden_layers):
            self.layers.append(RelGraphConvLayer(h_dim, h_dim, rel_names, num_bases, activation=F.relu,
                                                 self_loop=use_self_loop, dropout=dropout))
        self.layers.append(RelGraphConvLayer(h_dim, out_dim, rel_names, num_bases, activation=None,
                                             self_loop=use_self_loop))

    def forward(self, blocks, feats):
        h = feats
        for layer, block in zip(self.layers, blocks):
            h = layer(block.to("cpu"), h)
        return h


def init_emb(shape, dtype):
    arr = th.zeros(shape, dtype=dtype)
    nn.init.uniform_(arr, -1.0, 1.0)
    return arr


class DistEmbedLayer(nn.Module):
    """Every node type into embed_size: featured types through a linear
    projection of their 'feat', the others through an embedding."""

    def __init__(self, g, embed_size, sparse_emb, dgl_sparse_emb, feat_name="feat"):
        super().__init__()
        self.embed_size, self.feat_name = embed_size, feat_name
        self.dgl_sparse_emb = dgl_sparse_emb
        self.ntype_id_map = {g.get_ntype_id(ntype): ntype for ntype in g.ntypes}
        self.node_projs = nn.ModuleDict()
        for ntype in g.ntypes:
            if feat_name in g.nodes[ntype].data:
                self.node_projs[ntype] = nn.Linear(g.nodes[ntype].data[feat_name].shape[1], embed_size)
                nn.init.xavier_uniform_(self.node_projs[ntype].weight)
        if dgl_sparse_emb:
            self.node_embeds = {}
            for ntype in g.ntypes:
                if feat_name not in g.nodes[ntype].data:
                    self.node_embeds[ntype] = dgl.distributed.DistEmbedding(
                        g.num_nodes(ntype), embed_size, "node_emb_" + ntype, init_emb,
                        part_policy=g.get_node_partition_policy(ntype))
        else:
            self.node_embeds = nn.ModuleDict()
            for ntype in g.ntypes:
                if feat_name not in g.nodes[ntype].data:
                    self.node_embeds[ntype] = th.nn.Embedding(g.num_nodes(ntype), embed_size, sparse=sparse_emb)
                    nn.init.uniform_(self.node_embeds[ntype].weight, -1.0, 1.0)

    def forward(self, node_ids, g):
        embeds = {}
        for ntype in node_ids:
            if feat_name_in(g, ntype, self.feat_name):
                embeds[ntype] = self.node_projs[ntype](g.nodes[ntype].data[self.feat_name][node_ids[ntype]])
            else:
                embeds[ntype] = self.node_embeds[ntype](node_ids[ntype])
        return embeds


def feat_name_in(g, ntype, name):
    return name in g.nodes[ntype].data


def evaluate(g, model, embed_layer, labels, eval_loader, test_loader, all_val_nid, all_test_nid):
    model.eval()
    embed_layer.eval()
    global_results = dgl.distributed.DistTensor(labels.shape, th.long, "results", persistent=True)
    with th.no_grad():
        for loader in (eval_loader, test_loader):
            for input_nodes, seeds, blocks in loader:
                seeds = seeds["paper"]
                logits = model(blocks, embed_layer(input_nodes, g))
                assert len(logits) == 1
                global_results[seeds] = logits["paper"].argmax(dim=1)
    g.barrier()
    val_acc = float((global_results[all_val_nid] == labels[all_val_nid]).float().mean())
    test_acc = float((global_results[all_test_nid] == labels[all_test_nid]).float().mean())
    model.train()
    embed_layer.train()
    return val_acc, test_acc


def run(args, g, labels, num_classes, train_nid, val_nid, test_nid, all_val_nid, all_test_nid):
    fanouts = [int(f) for f in args.fanout.split(",")]
    val_fanouts = [int(f) for f in (args.validation_fanout or args.fanout).split(",")]
    sampler = dgl.dataloading.MultiLayerNeighborSampler(fanouts)
    loader = dgl.dataloading.DistNodeDataLoader(g, {"paper": train_nid}, sampler, batch_size=args.batch_size,
                                                shuffle=True, drop_last=False)
    # As DGL's scripts: validation and test sample with --validation-fanout
    # (default: --fanout), validation in training batches, test in eval ones.
    eval_sampler = dgl.dataloading.MultiLayerNeighborSampler(val_fanouts)
    valid_loader = dgl.dataloading.DistNodeDataLoader(g, {"paper": val_nid}, eval_sampler,
                                                      batch_size=args.batch_size, shuffle=False)
    test_loader = dgl.dataloading.DistNodeDataLoader(g, {"paper": test_nid}, eval_sampler,
                                                     batch_size=args.eval_batch_size, shuffle=False)
    embed_layer = DistEmbedLayer(g, args.n_hidden, args.sparse_embedding, args.dgl_sparse)
    model = EntityClassify(g, args.n_hidden, num_classes, args.n_bases, args.n_layers - 2, args.dropout,
                           args.use_self_loop)
    model = th.nn.parallel.DistributedDataParallel(model)
    if len(embed_layer.node_projs) > 0 or not args.dgl_sparse:
        embed_layer = th.nn.parallel.DistributedDataParallel(embed_layer)
    inner = embed_layer.module if isinstance(embed_layer, th.nn.parallel.DistributedDataParallel) else embed_layer
    if args.sparse_embedding:
        if args.dgl_sparse:
            emb_optimizer = dgl.distributed.optim.SparseAdam(list(inner.node_embeds.values()), lr=args.sparse_lr)
        else:
            emb_optimizer = th.optim.SparseAdam(list(inner.node_embeds.parameters()), lr=args.sparse_lr)
        dense = list(model.parameters()) + list(inner.node_projs.parameters())
    else:
        emb_optimizer = None
        dense = list(model.parameters()) + list(embed_layer.parameters())
    optimizer = th.optim.Adam(dense, lr=args.lr, weight_decay=args.l2norm)
    # Every trainer takes the same number of steps (the fewest any has): two
    # DDP modules and the sparse optimiser's exchange all need every trainer.
    steps = th.tensor([len(loader)])
    th.distributed.all_reduce(steps, op=th.distributed.ReduceOp.MIN)
    epochs = []
    for epoch in range(args.n_epochs):
        tic = time.time()
        losses = []
        for step, (input_nodes, seeds, blocks) in enumerate(loader):
            if step == int(steps):
                break
            seeds = seeds["paper"]
            logits = model(blocks, embed_layer(input_nodes, g))
            loss = F.cross_entropy(logits["paper"], labels[seeds])
            optimizer.zero_grad()
            if emb_optimizer is not None:
                emb_optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if emb_optimizer is not None:
                emb_optimizer.step()
            losses.append(float(loss))
        val_acc, test_acc = evaluate(g, model.module, embed_layer, labels, valid_loader, test_loader, all_val_nid,
                                     all_test_nid)
        epochs.append({"epoch": epoch, "loss": float(np.mean(losses)) if losses else 0.0, "val_acc": val_acc,
                       "test_acc": test_acc, "time_s": time.time() - tic})
        print(f"Part {g.rank()} | Epoch {epoch:05d} | Loss {epochs[-1]['loss']:.4f} | Val Acc {val_acc:.4f} | "
              f"Test Acc {test_acc:.4f}", flush=True)
    return epochs


def main(args):
    dgl.distributed.initialize(args.ip_config)
    th.distributed.init_process_group(backend="gloo")
    th.manual_seed(args.seed)
    g = dgl.distributed.DistGraph(args.graph_name, part_config=args.conf_path)
    pb = g.get_partition_book()
    train_nid = dgl.distributed.node_split(g.nodes["paper"].data["train_mask"], pb, ntype="paper", force_even=True)
    val_nid = dgl.distributed.node_split(g.nodes["paper"].data["val_mask"], pb, ntype="paper", force_even=True)
    test_nid = dgl.distributed.node_split(g.nodes["paper"].data["test_mask"], pb, ntype="paper", force_even=True)
    local_nid = pb.partid2nids(pb.partid, "paper").detach().numpy()
    print(f"part {g.rank()}: {len(train_nid)} train ({len(np.intersect1d(train_nid.numpy(), local_nid))} local), "
          f"{len(val_nid)} val, {len(test_nid)} test papers", flush=True)
    n = g.num_nodes("paper")
    labels = g.nodes["paper"].data["labels"][np.arange(n)]
    all_val_nid = th.LongTensor(np.nonzero(g.nodes["paper"].data["val_mask"][np.arange(n)])).squeeze()
    all_test_nid = th.LongTensor(np.nonzero(g.nodes["paper"].data["test_mask"][np.arange(n)])).squeeze()
    num_classes = int(labels.max()) + 1
    epochs = run(args, g, labels, num_classes, train_nid, val_nid, test_nid, all_val_nid, all_test_nid)
    if args.metrics_out and g.rank() == 0:
        with open(args.metrics_out + ".tmp", "w") as f:
            json.dump({"epochs": epochs, "val_acc": epochs[-1]["val_acc"], "test_acc": epochs[-1]["test_acc"]}, f)
        os.replace(args.metrics_out + ".tmp", args.metrics_out)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description="R-GCN entity classification, DGL's distributed style")
    p.add_argument("--graph-name", type=str)
    p.add_argument("--ip-config", type=str)
    p.add_argument("--conf-path", type=str)
    p.add_argument("--n-hidden", type=int, default=16)
    p.add_argument("--n-layers", type=int, default=2)
    p.add_argument("--n-bases", type=int, default=2)
    p.add_argument("--fanout", type=str, default="4,4")
    p.add_argument("--batch-size", type=int, default=100)
    p.add_argument("--eval-batch-size", type=int, default=128)
    p.add_argument("--n-epochs", type=int, default=3)
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--sparse-lr", type=float, default=1e-2)
    p.add_argument("--l2norm", type=float, default=0)
    p.add_argument("--dropout", type=float, default=0)
    p.add_argument("--sparse-embedding", action="store_true")
    p.add_argument("--dgl-sparse", action="store_true")
    p.add_argument("--use-self-loop", action="store_true")
    p.add_argument("--validation-fanout", type=str, default=None)
    # Accepted as DGL 1.1.3's entity_classify_dist.py accepts them: that
    # script passes neither to its layers.
    p.add_argument("--low-mem", action="store_true")
    p.add_argument("--layer-norm", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--metrics_out", type=str, default="")
    main(p.parse_args())
