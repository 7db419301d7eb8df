"""Benchmark (not a test): dgld.nn's SAGEConv('pool') and GINConv (sum,
2-layer MLP) on the fused kernels against the same layers with their
aggregation written as index_select + index_add_ / scatter_reduce (one row
per edge, scattered back), forward + backward over the 2 blocks of a
fanout 10,25 batch of 1000 seeds on a 200 k-node graph (shaped as
udf_bench.py's), 100-dim input, hidden 16, alternating rounds, medians.

Prints
    ratio: nn_sage_pool_fused_over_index_add <value> (target <= 0.5)
    ratio: nn_gin_fused_over_index_add <value> (target <= 0.5)
Run by scripts/bench/kernels.sh.
"""

import argparse
import statistics
import time
import warnings

import torch

import dgld.nn.pytorch as dglnn
from udf_bench import batch_blocks

warnings.filterwarnings("ignore", message="scatter_reduce")


def index_add_aggregate(block, h, how):
    src, dst = block.edges()
    rows = h.index_select(0, src)
    out = h.new_zeros((block.num_dst_nodes(),) + tuple(h.shape[1:]))
    if how == "sum":
        return out.index_add_(0, dst, rows)
    index = dst.unsqueeze(1).expand_as(rows)
    return out.scatter_reduce(0, index, rows, "amax", include_self=False)


def pool_reference(layer, block, x):
    h_dst = x[:block.num_dst_nodes()]
    neigh = index_add_aggregate(block, torch.relu(layer.fc_pool(x)), "max")
    return layer.fc_self(h_dst) + layer.fc_neigh(neigh) + layer.bias


def gin_reference(layer, block, x):
    h_dst = x[:block.num_dst_nodes()]
    return layer.apply_func((1 + layer.eps) * h_dst + index_add_aggregate(block, x, "sum"))


def step(layers, forward, blocks, x):
    h = x
    for layer, b in zip(layers, blocks):
        h = torch.relu(forward(layer, b, h))
    h.sum().backward()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    blocks = batch_blocks()
    b0 = blocks[0]
    x = torch.randn(b0.num_src_nodes(), 100)
    models = {
        "sage_pool": ([dglnn.SAGEConv(100, 16, "pool"), dglnn.SAGEConv(16, 16, "pool")], pool_reference),
        "gin": ([dglnn.GINConv(torch.nn.Sequential(torch.nn.Linear(100, 16), torch.nn.ReLU(),
                                                   torch.nn.Linear(16, 16))),
                 dglnn.GINConv(torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(),
                                                   torch.nn.Linear(16, 16)))], gin_reference),
    }
    for name, (layers, reference) in models.items():
        fused = lambda layer, b, h: layer(b, h)  # noqa: E731
        with torch.no_grad():
            a = torch.relu(fused(layers[0], b0, x))
            r = torch.relu(reference(layers[0], b0, x))
        assert torch.allclose(a, r, rtol=1e-4, atol=1e-4), name
        times = {"fused": [], "index_add": []}
        for _ in range(args.rounds + 1):
            for kind, f in (("fused", fused), ("index_add", reference)):
                t0 = time.perf_counter()
                step(layers, f, blocks, x)
                times[kind].append(time.perf_counter() - t0)
        f, i = statistics.median(times["fused"][1:]), statistics.median(times["index_add"][1:])
        print(f"{name}: 2-layer step (forward + backward): fused {f * 1000:.1f} ms, index_add {i * 1000:.1f} ms")
        print(f"ratio: nn_{name}_fused_over_index_add {f / i:.2f} (target <= 0.5)")


if __name__ == "__main__":
    main()
