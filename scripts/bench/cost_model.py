#!/usr/bin/env python3
"""The cost model of docs/performance.md ("Cost model"), fitted to
scripts/bench/scaleout.sh's results and applied.

  cost_model.py STRONG.json [WEAK.json] [--fit "2 4"] [--predict 8]
  cost_model.py RESULTS --papers100m [--cores 32] [--gbit 25]

Per epoch, from what scaleout measured (steady epochs, medians):

  sampler-worker CPU = a_s * sampled edges + a_f * feature rows + a_w * network bytes
  trainer CPU        = a_m * model FLOPs + a_t * trainers
  graph-server CPU   = a_g * network bytes
  switch CPU         = a_x * network bytes           (the emulator's own cost)
  network bytes      = seeds * (b_0 + b_1 * edge cut)   (bytes per seed against the partition's cut)

The work per seed (edges, rows, FLOPs) is the fitted runs' mean; the edge cut
of a partition is known before training (dgl-partition prints it). On the
emulator every machine shares this machine's cores, so an epoch takes
(sum of the CPU) / (cores * u), u the share of the cores the fitted runs
kept busy. --predict checks the model on runs it was not fitted to.

--papers100m applies the per-unit costs to ogbn-papers100M on 16 machines of
--cores cores and --gbit Gbit/s each, where each machine works on its own:
an epoch is bound by the slower of its CPU time (its share of the work over
its cores) and its network time (its bytes over the link).
"""
import argparse
import json
import statistics

import numpy as np


def load(paths):
    runs = []
    for p in paths:
        d = json.load(open(p))
        build = d["args"]["build"]
        runs += [r for r in d["runs"] if r["build"] == build and "sampled_edges" in r["summary"]]
    if not runs:
        raise SystemExit("cost_model: no runs with traffic accounting in " + ", ".join(paths))
    return runs


def features(r):
    s, n, t = r["summary"], r["machines"], r["trainers_per_machine"]
    return {
        "E": s["sampled_edges"], "R": s["input_rows"], "F": s["model_flops"], "S": s["seeds"],
        "B": s["bytes_per_machine"] * n, "cut": r["edge_cut_share"], "trainers": n * t, "N": n, "T": t,
        "cpu_worker": s["cpu_sampler-worker"], "cpu_trainer": s["cpu_trainer-host"],
        "cpu_server": s["cpu_graph-server"], "cpu_switch": s["cpu_dgld-switch"], "cpu_total": s["cpu_total"],
        "stage_sample": s["stage_sample_s"], "stage_fetch": s["stage_fetch_s"], "stage_compute": s["stage_compute_s"],
        "epoch_s": s["epoch_s"],
    }


def lstsq(rows, y, clamp=True):
    coef, *_ = np.linalg.lstsq(np.array(rows, dtype=float), np.array(y, dtype=float), rcond=None)
    return [max(0.0, c) for c in coef] if clamp else list(coef)  # a negative unit cost is noise: none


def fit(runs):
    f = [features(r) for r in runs]
    mean = lambda g: statistics.mean(g(x) for x in f)
    m = {}
    # The stages' own CPU clocks (the worker threads that sampled and pulled,
    # the trainer's model step) give the unit costs directly.
    m["a_s"] = mean(lambda x: x["stage_sample"] / x["E"])
    m["a_f"] = mean(lambda x: x["stage_fetch"] / x["R"])
    m["a_m"] = mean(lambda x: x["stage_compute"] / x["F"])
    # The rest of each process kind's CPU, against what varies between runs:
    # the bytes moved and the number of processes.
    m["a_w"], m["a_k"] = lstsq([[x["B"], x["trainers"]] for x in f],
                               [x["cpu_worker"] - x["stage_sample"] - x["stage_fetch"] for x in f])
    (m["a_t"],) = lstsq([[x["trainers"]] for x in f], [x["cpu_trainer"] - x["stage_compute"] for x in f])
    (m["a_g"],) = lstsq([[x["B"]] for x in f], [x["cpu_server"] for x in f])
    (m["a_x"],) = lstsq([[x["B"]] for x in f], [x["cpu_switch"] for x in f])
    m["b_0"], m["b_1"] = lstsq([[1, x["cut"]] for x in f], [x["B"] / x["S"] for x in f], clamp=False)
    m["edges_per_seed"] = mean(lambda x: x["E"] / x["S"])
    m["rows_per_seed"] = mean(lambda x: x["R"] / x["S"])
    m["flops_per_seed"] = mean(lambda x: x["F"] / x["S"])
    m["seeds_per_node"] = statistics.mean(x["S"] / r["nodes"] for x, r in zip(f, runs))
    # The share of the cores the runs kept busy (CPU over wall time over cores).
    m["u"] = mean(lambda x: x["cpu_total"] / x["epoch_s"] / 2)
    m["other_share"] = mean(lambda x: (x["cpu_total"] - x["cpu_worker"] - x["cpu_trainer"] - x["cpu_server"]
                                       - x["cpu_switch"]) / x["cpu_total"])
    return m


def fit_size_factor(m, runs):
    """How much more CPU a unit of work costs on a larger graph (the runs'
    graphs share this machine's caches and memory): CPU = base x (1 + c x
    (nodes / ref - 1)), c from the fitted runs whose graph is larger than the
    smallest (scaleout --weak), 0 without any."""
    ref = min(r["nodes"] for r in runs)
    m["ref_nodes"], m["size_c"] = ref, 0.0
    pts = []
    for r in runs:
        if r["nodes"] > ref:
            base = predict(m, r["nodes"], r["edge_cut_share"], r["machines"], r["trainers_per_machine"])["cpu_total"]
            pts.append((r["summary"]["cpu_total"] / base - 1) / (r["nodes"] / ref - 1))
    if pts:
        m["size_c"] = max(0.0, statistics.mean(pts))


def predict(m, nodes, cut, n, t, emulator=True):
    seeds = m["seeds_per_node"] * nodes
    E, R, F = seeds * m["edges_per_seed"], seeds * m["rows_per_seed"], seeds * m["flops_per_seed"]
    B = seeds * (m["b_0"] + m["b_1"] * cut)
    cpu = {"sampling": m["a_s"] * E, "feature rows": m["a_f"] * R,
           "worker network and upkeep": m["a_w"] * B + m["a_k"] * n * t, "model": m["a_m"] * F,
           "trainer upkeep": m["a_t"] * n * t, "graph-servers": m["a_g"] * B}
    if emulator:
        cpu["switch (emulator)"] = m["a_x"] * B
    total = sum(cpu.values()) / (1 - m["other_share"])
    total *= 1 + m.get("size_c", 0.0) * (nodes / m.get("ref_nodes", nodes) - 1)
    return {"cpu": cpu, "cpu_total": total, "bytes": B, "epoch_s": total / (2 * m["u"])}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+")
    ap.add_argument("--fit", default="2 4")
    ap.add_argument("--predict", default="8")
    ap.add_argument("--papers100m", action="store_true")
    ap.add_argument("--cores", type=int, default=32)
    ap.add_argument("--gbit", type=float, default=25)
    a = ap.parse_args()
    runs = load(a.results)
    fit_n = {int(x) for x in a.fit.split()}
    fit_runs = [r for r in runs if r["machines"] in fit_n]
    smallest = min(r["nodes"] for r in fit_runs)
    m = fit([r for r in fit_runs if r["nodes"] == smallest])  # unit costs on one graph size
    fit_size_factor(m, fit_runs)
    print("fitted on N = " + ", ".join(str(n) for n in sorted(fit_n)) + ":")
    print(f"  sampling {m['a_s'] * 1e9:.1f} ns CPU per sampled edge, feature rows {m['a_f'] * 1e9:.1f} ns per row, "
          f"the workers' other CPU {m['a_w'] * 1e9:.2f} ns per byte + {m['a_k']:.3f} s per worker")
    print(f"  model {m['a_m'] * 1e12:.2f} ps CPU per FLOP, the trainers' other CPU {m['a_t']:.3f} s per trainer")
    print(f"  graph-servers {m['a_g'] * 1e9:.2f} ns per byte, switch {m['a_x'] * 1e9:.2f} ns per byte")
    print(f"  bytes per seed = {m['b_0']:.0f} {'+' if m['b_1'] >= 0 else '-'} {abs(m['b_1']):.0f} x edge cut; per seed {m['edges_per_seed']:.0f} edges, "
          f"{m['rows_per_seed']:.0f} rows, {m['flops_per_seed'] / 1e6:.2f} MFLOP; cores busy {m['u'] * 100:.0f} %")
    print(f"  a unit of work on a graph k times larger costs 1 + {m['size_c']:.2f} (k - 1) times as much "
          f"(fitted on the larger graphs among the fitted runs)")
    errors = []
    for r in runs:
        if r["machines"] not in {int(x) for x in a.predict.split()}:
            continue
        p = predict(m, r["nodes"], r["edge_cut_share"], r["machines"], r["trainers_per_machine"])
        got = r["summary"]["epoch_s"]
        err = p["epoch_s"] / got - 1
        errors.append(abs(err))
        print(f"held back N={r['machines']} T={r['trainers_per_machine']} ({r['nodes']} nodes, cut "
              f"{r['edge_cut_share'] * 100:.1f} %): predicted {p['epoch_s']:.2f} s, measured {got:.2f} s "
              f"({err * 100:+.0f} %); bytes predicted {p['bytes'] / 1e6:.1f} MB, measured "
              f"{r['summary']['bytes_per_machine'] * r['machines'] / 1e6:.1f} MB")
    for e in errors:
        print(f"ratio: cost_model_heldback_error {e:.3f} (target 0.25)")
    if a.papers100m:
        papers(m, a.cores, a.gbit)


def per_seed_work(fanouts, mean_degree, dims, dedup):
    """Sampled edges, input rows and forward+backward FLOPs per seed of a
    model with `fanouts` (input layer first) on a graph of `mean_degree`:
    each hop takes min(fanout, degree) neighbours of every node of the hop
    before, and `dedup` of them are new nodes (measured on our runs: input
    rows per sampled edge)."""
    edges, frontier, per_layer_dst = 0.0, 1.0, []
    for f in reversed(fanouts):  # from the seeds outwards
        per_layer_dst.append(frontier)
        e = frontier * min(f, mean_degree)
        edges += e
        frontier = frontier + e * dedup
    rows = frontier
    flops, dst = 0.0, list(reversed(per_layer_dst))
    for l in range(len(fanouts)):
        src_rows = dst[l + 1] if l + 1 < len(dst) else 1.0
        flops += 3 * (2 * 2 * dst[l] * dims[l] * dims[l + 1] + dst[l] * min(fanouts[l], mean_degree) * dims[l])
    return edges, rows, flops


def papers(m, cores, gbit):
    # ogbn-papers100M: 111 M nodes, 1.6 B citations (3.2 B edges with the
    # reverse ones, as DGL trains it: mean in-degree 29), 128 float features,
    # 172 classes, 1.21 M training nodes.
    train, machines, trainers, feat, classes, degree = 1_207_179, 16, 4, 128, 172, 29
    dedup = m["rows_per_seed"] / m["edges_per_seed"]
    print(f"\nogbn-papers100M on {machines} machines of {cores} cores and {gbit:g} Gbit/s, {trainers} trainers each, "
          f"the unit costs fitted above (CPU per sampled edge, per feature row scaled to {feat} floats, per model "
          f"FLOP), new rows per sampled edge {dedup:.2f} as measured; a remote row costs {feat * 4 + 8} bytes and "
          f"a remote sampled edge 16, with no feature cache:")
    models = [("DGL's train_dist.py: 2 layers, fanout 10,25, hidden 16", [10, 25], 16),
              ("DistDGL's paper as we read it: 3 layers, fanout 15,10,5, hidden 256", [15, 10, 5], 256)]
    for name, fanouts, hidden in models:
        dims = [feat] + [hidden] * (len(fanouts) - 1) + [classes]
        e, rows, flops = per_seed_work(fanouts, degree, dims, dedup)
        print(f"  {name}: per seed {e:.0f} sampled edges, {rows:.0f} input rows, {flops / 1e6:.1f} MFLOP")
        for remote in (0.3, 0.6):
            cpu = {"sampling": m["a_s"] * e * train, "feature rows": m["a_f"] * rows * train * feat / 100,
                   "model": m["a_m"] * flops * train, "upkeep": (m["a_t"] + m["a_k"]) * machines * trainers}
            net_bytes = train * remote * (rows * (feat * 4 + 8) + e * 16)
            cpu["network"] = (m["a_w"] + m["a_g"]) * net_bytes
            total = sum(cpu.values()) / (1 - m["other_share"])
            cpu_s = total / machines / cores
            net_s = net_bytes / machines / (gbit * 1e9 / 8)
            bound = "CPU" if cpu_s >= net_s else "network"
            print(f"    remote share {remote * 100:.0f} %: CPU {total:.0f} s in all ("
                  + ", ".join(f"{k} {v:.0f}" for k, v in cpu.items())
                  + f") = {cpu_s:.2f} s per machine; {net_bytes / machines / 1e9:.1f} GB per machine = {net_s:.2f} s "
                  f"on the link; epoch about {max(cpu_s, net_s):.2f} s, bound by {bound}")
    print("  DistDGL's paper: 13 s per epoch on 16 machines.")


if __name__ == "__main__":
    main()
