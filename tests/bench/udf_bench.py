"""Benchmark (not a test): a GatedMean layer (each neighbour's row weighted
by a gate sigmoid(h_u . h_v), then averaged) written with DGL's built-in
functions (apply_edges(fn.u_dot_v) + update_all(fn.u_mul_e, fn.mean): the
fused gsddmm / gspmm kernels) against the same layer written with
user-defined functions (edge UDFs and a reduce UDF over degree buckets), on
mini-batch blocks shaped like fanout 10,25 batches of 1000 seeds over a
200 k-node graph. Forward + backward, alternating rounds, medians.

Prints
    ratio: gated_mean_udf_vs_builtin <value> (report)
Run by scripts/bench/kernels.sh; standalone:
    PYTHONPATH=build/python python3 tests/bench/udf_bench.py [--rounds R] [--threads T]
"""

import argparse
import statistics
import time

import torch

import dgld
import dgld.function as fn


def make_block(num_dst, fanout, num_nodes, gen):
    """A block of num_dst seeds, each with min(fanout, degree) sampled
    in-neighbours (degrees drawn around 20, as in the benchmark graph)."""
    deg = torch.clamp(torch.poisson(torch.full((num_dst,), 20.5), generator=gen).long(), min=0)
    deg = torch.minimum(deg, torch.tensor(fanout))
    dst = torch.repeat_interleave(torch.arange(num_dst), deg)
    picked = torch.randint(0, num_nodes, (int(deg.sum()),), generator=gen)
    # local src ids: the seeds first, then the distinct new neighbours in
    # order of first appearance over the edges, as dgld's sampler
    # (common/sampling/block.h) and DGL's to_block number them
    uniq, inverse = torch.unique(picked, return_inverse=True)
    by_node, edge = torch.sort(inverse, stable=True)
    first = edge[torch.cat([torch.ones(1, dtype=torch.bool), by_node[1:] != by_node[:-1]])]
    rank = torch.empty_like(first)
    rank[torch.argsort(first)] = torch.arange(uniq.numel())
    src = rank[inverse] + num_dst
    return dgld.create_block((src, dst), num_src_nodes=num_dst + uniq.numel(), num_dst_nodes=num_dst)


def batch_blocks(seed=0):
    """The two blocks of a fanout 10,25 batch of 1000 seeds over 200 k nodes
    (input block first)."""
    gen = torch.Generator().manual_seed(seed)
    b1 = make_block(1000, 25, 200000, gen)
    b0 = make_block(b1.num_src_nodes(), 10, 200000, gen)
    return [b0, b1]


def gated_mean_builtin(block, h):
    with block.local_scope():
        block.srcdata["h"] = h
        block.dstdata["h"] = h[:block.num_dst_nodes()]
        block.apply_edges(fn.u_dot_v("h", "h", "s"))
        block.edata["g"] = torch.sigmoid(block.edata["s"])
        block.update_all(fn.u_mul_e("h", "g", "m"), fn.mean("m", "out"))
        return block.dstdata["out"]


def gated_mean_udf(block, h):
    with block.local_scope():
        block.srcdata["h"] = h
        block.dstdata["h"] = h[:block.num_dst_nodes()]
        block.apply_edges(lambda e: {"g": torch.sigmoid((e.src["h"] * e.dst["h"]).sum(-1, keepdim=True))})
        block.update_all(lambda e: {"m": e.src["h"] * e.data["g"]}, lambda n: {"out": n.mailbox["m"].mean(1)})
        return block.dstdata["out"]


def step(layer, blocks, x, w):
    """A 2-layer step: forward through both blocks, backward."""
    h = x
    for i, b in enumerate(blocks):
        h = layer(b, h) @ w[i]
    h.sum().backward()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--feat", type=int, default=100)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    blocks = batch_blocks()
    b0, b1 = blocks
    x = torch.randn(b0.num_src_nodes(), args.feat, requires_grad=True)
    w = [torch.randn(args.feat, args.hidden, requires_grad=True), torch.randn(args.hidden, args.hidden,
                                                                                requires_grad=True)]
    print(f"blocks: {b0.num_src_nodes()} -> {b0.num_dst_nodes()} ({b0.num_edges()} edges), "
          f"{b1.num_src_nodes()} -> {b1.num_dst_nodes()} ({b1.num_edges()} edges); features {args.feat}")
    # Warm-up: the first steps grow the heap, page-faulting some 800 MB (up to
    # 0.6 s a step here), and the two layers must agree.
    for layer in (gated_mean_builtin, gated_mean_udf):
        for _ in range(3):
            step(layer, blocks, x, w)
    ref = gated_mean_builtin(b0, x.detach())
    assert torch.allclose(gated_mean_udf(b0, x.detach()), ref, rtol=1e-4, atol=1e-5)
    times = {"builtin": [], "udf": []}
    for _ in range(args.rounds):
        for name, layer in (("builtin", gated_mean_builtin), ("udf", gated_mean_udf)):
            t0 = time.perf_counter()
            step(layer, blocks, x, w)
            times[name].append(time.perf_counter() - t0)
    b, u = statistics.median(times["builtin"]), statistics.median(times["udf"])
    print(f"GatedMean step (forward + backward, 2 blocks): built-ins {b * 1000:.1f} ms, UDFs {u * 1000:.1f} ms")
    print(f"ratio: gated_mean_udf_vs_builtin {u / b:.2f} (report)")


if __name__ == "__main__":
    main()
