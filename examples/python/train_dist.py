"""Distributed GraphSAGE in Python on dgld, written against DGL's distributed
API exactly as DGL's own GraphSAGE example uses it (the same calls and
flags); the only dgld-specific lines are the two imports:

    import dgld as dgl                  # DGL: import dgl
    import dgld.nn.pytorch as dglnn     # DGL: import dgl.nn.pytorch as dglnn

Run it with dgl-launch (examples/python/README.md):

    dgl-launch --workspace $PWD --ip-config ip_config.txt --part-config parts/g.json \\
        --num-trainers 1 --extra-envs PYTHONPATH=$PWD/build/python -- \\
        python3 examples/python/train_dist.py --graph_name g --ip_config ip_config.txt \\
        --part_config parts/g.json --num_epochs 10

Flags beyond DGL's example: --seed, --metrics_out (a JSON of the epochs and
accuracies, as trainer-host writes).
"""

import argparse
import json
import os
import socket
import time

import numpy as np
import torch as th
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

import dgld as dgl
import dgld.nn.pytorch as dglnn


class DistSAGE(nn.Module):
    def __init__(self, in_feats, n_hidden, n_classes, n_layers, activation, dropout):
        super().__init__()
        self.n_layers = n_layers
        self.n_hidden = n_hidden
        self.n_classes = n_classes
        sizes = [in_feats] + [n_hidden] * (n_layers - 1) + [n_classes]
        self.layers = nn.ModuleList(dglnn.SAGEConv(sizes[i], sizes[i + 1], "mean") for i in range(n_layers))
        self.dropout = nn.Dropout(dropout)
        self.activation = activation

    def forward(self, blocks, x):
        h = x
        for i, (layer, block) in enumerate(zip(self.layers, blocks)):
            h = layer(block, h)
            if i != len(self.layers) - 1:
                h = self.activation(h)
                h = self.dropout(h)
        return h

    def inference(self, g, x, batch_size, device):
        """Layer-wise inference over every node: layer i of all nodes is
        computed from the full neighbourhood and written to a DistTensor
        that layer i + 1 reads."""
        nodes = dgl.distributed.node_split(th.ones(g.num_nodes(), dtype=th.bool), g.get_partition_book(),
                                           force_even=True)
        for i, layer in enumerate(self.layers):
            last = i == len(self.layers) - 1
            y = dgl.distributed.DistTensor((g.num_nodes(), self.n_classes if last else self.n_hidden), th.float32,
                                           "h_last" if last else f"h{i}", persistent=True)
            # Layer 0 reads the graph's features: fetched with each batch.
            sampler = dgl.dataloading.NeighborSampler([-1], prefetch_node_feats=None if i == 0 else [])
            dataloader = dgl.dataloading.DistNodeDataLoader(g, nodes, sampler, batch_size=batch_size, shuffle=False,
                                                            drop_last=False)
            for input_nodes, output_nodes, blocks in dataloader:
                block = blocks[0].to(device)
                h = x[input_nodes].to(device)
                h_dst = h[: block.number_of_dst_nodes()]
                h = layer(block, (h, h_dst))
                if not last:
                    h = self.activation(h)
                    h = self.dropout(h)
                y[output_nodes] = h.cpu()
            # This layer's last batch goes before the next layer's loader makes its own.
            input_nodes = output_nodes = blocks = block = h = h_dst = None
            x = y
            g.barrier()
        return y


def compute_acc(pred, labels):
    labels = labels.long()
    return (th.argmax(pred, dim=1) == labels).float().sum() / max(len(pred), 1)


def correct_and_total(pred, labels):
    return th.tensor([float((th.argmax(pred, dim=1) == labels.long()).sum()), float(len(pred))])


def evaluate(model, g, inputs, labels, val_nid, test_nid, batch_size, device):
    """Validation and test accuracy over every trainer's ids."""
    model.eval()
    with th.no_grad():
        pred = model.inference(g, inputs, batch_size, device)
    model.train()
    counts = th.cat([correct_and_total(pred[val_nid], labels[val_nid]),
                     correct_and_total(pred[test_nid], labels[test_nid])])
    if th.distributed.is_initialized():
        th.distributed.all_reduce(counts)
    return float(counts[0] / max(counts[1], 1)), float(counts[2] / max(counts[3], 1))


def load_subtensor(g, seeds, input_nodes, device, load_feat=True):
    batch_inputs = g.ndata["features"][input_nodes].to(device) if load_feat else None
    batch_labels = g.ndata["labels"][seeds].to(device)
    return batch_inputs, batch_labels


def run(args, device, data):
    train_nid, val_nid, test_nid, in_feats, n_classes, g = data
    sampler = dgl.dataloading.NeighborSampler([int(fanout) for fanout in args.fan_out.split(",")])
    dataloader = dgl.dataloading.DistNodeDataLoader(g, train_nid, sampler, batch_size=args.batch_size, shuffle=True,
                                                    drop_last=False)
    model = DistSAGE(in_feats, args.num_hidden, n_classes, args.num_layers, F.relu, args.dropout)
    model = model.to(device)
    if not args.standalone:
        model = th.nn.parallel.DistributedDataParallel(model)
    loss_fcn = nn.CrossEntropyLoss().to(device)
    optimizer = optim.Adam(model.parameters(), lr=args.lr)

    metrics = {"graph_name": args.graph_name, "model": "sage", "num_trainers": g_world(), "epochs": [], "evals": [],
               "num_parameters": sum(p.numel() for p in model.parameters())}
    run_start = time.time()
    for epoch in range(args.num_epochs):
        tic = time.time()
        sample_time = forward_time = backward_time = update_time = 0.0
        num_seeds = num_inputs = 0
        step_time = []
        losses = []
        correct = th.zeros(2)
        start = time.time()
        with model.join():
            for step, (input_nodes, seeds, blocks) in enumerate(dataloader):
                tic_step = time.time()
                sample_time += tic_step - start
                batch_inputs, batch_labels = load_subtensor(g, seeds, input_nodes, "cpu")
                batch_labels = batch_labels.long()
                num_seeds += len(blocks[-1].dstdata[dgl.NID])
                num_inputs += len(blocks[0].srcdata[dgl.NID])
                blocks = [block.to(device) for block in blocks]
                batch_labels = batch_labels.to(device)
                batch_pred = model(blocks, batch_inputs)
                loss = loss_fcn(batch_pred, batch_labels)
                forward_end = time.time()
                optimizer.zero_grad()
                loss.backward()
                compute_end = time.time()
                forward_time += forward_end - tic_step
                backward_time += compute_end - forward_end
                optimizer.step()
                update_time += time.time() - compute_end
                step_t = time.time() - tic_step
                step_time.append(step_t)
                losses.append(loss.item())
                correct += th.tensor([float((batch_pred.argmax(1) == batch_labels).sum()), float(len(batch_labels))])
                if args.log_every > 0 and step % args.log_every == 0:
                    acc = compute_acc(batch_pred, batch_labels)
                    print(f"Part {g.rank()} | Epoch {epoch:05d} | Step {step:05d} | Loss {loss.item():.4f} | "
                          f"Train Acc {acc.item():.4f} | Speed (samples/sec) "
                          f"{np.mean(len(seeds) / np.array(step_time[-args.log_every:])):.4f} | "
                          f"time {np.sum(step_time[-args.log_every:]):.3f} s", flush=True)
                start = time.time()
        toc = time.time()
        # Every trainer's seeds, for the metrics (the same count as trainer-host reports).
        all_seeds = th.cat([th.tensor([float(num_seeds)]), correct])
        if th.distributed.is_initialized():
            th.distributed.all_reduce(all_seeds)
        print(f"Part {g.rank()}, Epoch Time(s): {toc - tic:.4f}, sample+data_copy: {sample_time:.4f}, "
              f"forward: {forward_time:.4f}, backward: {backward_time:.4f}, update: {update_time:.4f}, "
              f"#seeds: {num_seeds}, #inputs: {num_inputs}", flush=True)
        metrics["epochs"].append({"epoch": epoch, "loss": float(np.mean(losses)) if losses else 0.0,
                                  "train_acc": float(all_seeds[1] / max(float(all_seeds[2]), 1.0)),
                                  "time_s": toc - tic, "seeds_per_s": float(all_seeds[0]) / max(toc - tic, 1e-9),
                                  "sample_s": sample_time, "compute_s": forward_time + backward_time + update_time})

        last = epoch == args.num_epochs - 1
        # The epoch's last batch (features, blocks) is not needed by the evaluation: let it go first.
        input_nodes = seeds = blocks = batch_inputs = batch_labels = batch_pred = loss = None
        if args.eval_every >= 0 and (last or (args.eval_every > 0 and (epoch + 1) % args.eval_every == 0)):
            start = time.time()
            val_acc, test_acc = evaluate(model.module if hasattr(model, "module") else model, g, g.ndata["features"],
                                         g.ndata["labels"], val_nid, test_nid, args.batch_size_eval, device)
            print(f"Part {g.rank()}, Val Acc {val_acc:.4f}, Test Acc {test_acc:.4f}, time: {time.time() - start:.4f}",
                  flush=True)
            metrics["evals"].append({"epoch": epoch, "val_acc": val_acc, "test_acc": test_acc})
            metrics["val_acc"], metrics["test_acc"] = val_acc, test_acc
    metrics["total_time_s"] = time.time() - run_start
    return metrics


def g_world():
    return th.distributed.get_world_size() if th.distributed.is_initialized() else 1


def main(args):
    print(socket.gethostname(), "Initializing DGL dist", flush=True)
    dgl.distributed.initialize(args.ip_config, net_type=args.net_type)
    if not args.standalone:
        print(socket.gethostname(), "Initializing DGL process group", flush=True)
        th.distributed.init_process_group(backend=args.backend)
    print(socket.gethostname(), "Initializing DistGraph", flush=True)
    g = dgl.distributed.DistGraph(args.graph_name, part_config=args.part_config)
    print(socket.gethostname(), "rank:", g.rank(), flush=True)
    if args.seed is not None:
        th.manual_seed(args.seed)

    pb = g.get_partition_book()
    if "trainer_id" in g.ndata:
        train_nid = dgl.distributed.node_split(g.ndata["train_mask"], pb, force_even=True,
                                               node_trainer_ids=g.ndata["trainer_id"])
        val_nid = dgl.distributed.node_split(g.ndata["val_mask"], pb, force_even=True,
                                             node_trainer_ids=g.ndata["trainer_id"])
        test_nid = dgl.distributed.node_split(g.ndata["test_mask"], pb, force_even=True,
                                              node_trainer_ids=g.ndata["trainer_id"])
    else:
        train_nid = dgl.distributed.node_split(g.ndata["train_mask"], pb, force_even=True)
        val_nid = dgl.distributed.node_split(g.ndata["val_mask"], pb, force_even=True)
        test_nid = dgl.distributed.node_split(g.ndata["test_mask"], pb, force_even=True)
    local_nid = pb.partid2nids(pb.partid).detach().numpy()
    print(f"part {g.rank()}, train: {len(train_nid)} (local: {len(np.intersect1d(train_nid.numpy(), local_nid))}), "
          f"val: {len(val_nid)}, test: {len(test_nid)}", flush=True)
    device = th.device("cpu")
    n_classes = args.n_classes
    if n_classes == 0:
        labels = g.ndata["labels"][np.arange(g.num_nodes())]
        n_classes = len(th.unique(labels[th.logical_not(th.isnan(labels.float()))]))
        del labels
    print(f"Number of classes: {n_classes}", flush=True)

    in_feats = g.ndata["features"].shape[1]
    data = train_nid, val_nid, test_nid, in_feats, n_classes, g
    metrics = run(args, device, data)
    if args.metrics_out and g.rank() == 0:
        tmp = args.metrics_out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(metrics, f, indent=2)
        os.replace(tmp, args.metrics_out)
    print("parent ends", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="GraphSAGE on dgld")
    parser.add_argument("--graph_name", type=str, help="graph name")
    parser.add_argument("--id", type=int, help="the partition id")
    parser.add_argument("--ip_config", type=str, help="The file for IP configuration")
    parser.add_argument("--part_config", type=str, help="The path to the partition config file")
    parser.add_argument("--n_classes", type=int, default=0, help="the number of classes")
    parser.add_argument("--backend", type=str, default="gloo", help="pytorch distributed backend")
    parser.add_argument("--num_gpus", type=int, default=-1, help="dgld trains on the CPU: -1")
    parser.add_argument("--num_epochs", type=int, default=20)
    parser.add_argument("--num_hidden", type=int, default=16)
    parser.add_argument("--num_layers", type=int, default=2)
    parser.add_argument("--fan_out", type=str, default="10,25")
    parser.add_argument("--batch_size", type=int, default=1000)
    parser.add_argument("--batch_size_eval", type=int, default=100000)
    parser.add_argument("--log_every", type=int, default=20)
    parser.add_argument("--eval_every", type=int, default=5)
    parser.add_argument("--lr", type=float, default=0.003)
    parser.add_argument("--dropout", type=float, default=0.5)
    parser.add_argument("--local_rank", type=int, help="get rank of the process")
    parser.add_argument("--standalone", action="store_true", help="run in the standalone mode")
    parser.add_argument("--net_type", type=str, default="socket", help="DGL's transport (no effect on dgld)")
    parser.add_argument("--seed", type=int, default=None, help="dgld addition: torch's seed (weights, shuffling)")
    parser.add_argument("--metrics_out", type=str, default="", help="dgld addition: write metrics JSON here")
    args = parser.parse_args()
    print(args, flush=True)
    main(args)
