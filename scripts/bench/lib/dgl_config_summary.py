"""The tables and ratio lines of one model of scripts/bench/epoch.sh
--dgl-config, also written as JSON.

Usage: dgl_config_summary.py MODEL PART_BYTES MEMCPY_GB_PER_S OUT_JSON KIND:METRICS...
MODEL is example or paper; each METRICS is a run's metrics.json (rank 0's;
DistDGL's as distdgl_metrics writes it) with METRICS.rss beside it, the peak
resident KiB "<server0> <server1> <trainer0> <trainer1>" (0: not measured).
Kinds: fused, reference, baseline, python, python-baseline, distdgl.
"""
import json
import statistics
import sys

PHASES = ["time_s", "sample_s", "fetch_s", "compute_s", "allreduce_s", "wait_s"]
MIB = 1 << 20
MODELS = {
    "example": "DGL's example model: GraphSAGE 2 layers, hidden 16, fanout 10,25, batch 1000, lr 0.01,"
               " 10 epochs, evaluation after the last",
    "paper": "DistDGL's paper model: GraphSAGE 3 layers, hidden 256, fanout 15,10,5, batch 1000, lr 0.003,"
             " dropout 0.5, 3 epochs, no evaluation",
}


def median(values):
    """The median of the values that are there (None: none are)."""
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def one_run(path):
    """A run's figures over its epochs after the first: the mean of each phase
    (None where the run does not report it), the median of the model step's
    GFLOP/s, its share of the GEMM peak and the gather rate; and its peaks."""
    epochs = json.load(open(path))["epochs"][1:]
    if not epochs:
        sys.exit(f"dgl_config_summary.py: {path} has fewer than 2 epochs")
    run = {p: statistics.mean(e[p] for e in epochs) if all(p in e for e in epochs) else None for p in PHASES}
    steps = [e["model"] for e in epochs if "model" in e]
    run["gflops_per_s"] = median(s.get("gflops_per_s") for s in steps)
    run["peak_fraction"] = median(s.get("peak_fraction") for s in steps)
    run["gather_gb_per_s"] = median(e.get("gather_gb_per_s") for e in epochs)
    s0, s1, t0, t1 = (int(x) * 1024 for x in open(path + ".rss").read().split())
    run["server_peak_bytes"] = max(s0, s1) or None
    run["trainer_peak_bytes"] = max(t0, t1) or None
    run["epochs_measured"] = len(epochs)
    return run


def cell(value, width, fmt):
    return f"{'-':>{width}}" if value is None else f"{value:>{width}{fmt}}"


def main():
    model, part_bytes, memcpy, out = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
    runs = {}
    for arg in sys.argv[5:]:
        kind, path = arg.split(":", 1)
        runs.setdefault(kind, []).append(one_run(path))
    med = {kind: {key: median(r[key] for r in rs) for key in rs[0]} for kind, rs in runs.items()}
    last = 1 + next(iter(runs.values()))[0]["epochs_measured"]
    rounds = len(next(iter(runs.values())))

    print()
    print(f"== {model} model ({MODELS[model]})")
    print(f"{'run':<16}" + "".join(f"{p[:-2]:>10}" for p in PHASES)
          + f"{'GFLOP/s':>9}{'peak frac':>10}{'gather GB/s':>13}")
    for kind, m in med.items():
        print(f"{kind:<16}" + "".join(cell(m[p], 10, ".3f") for p in PHASES)
              + cell(m["gflops_per_s"], 9, ".1f") + cell(m["peak_fraction"], 10, ".2f")
              + cell(m["gather_gb_per_s"], 13, ".2f"))
    print(f"  s per epoch: the mean of epochs 2-{last}; GFLOP/s of trainer-host's model step (forward + backward),"
          f" peak frac: its share of the GEMM peak,")
    print(f"  gather: feature bytes per second of fetch (memcpy: "
          + (f"{memcpy:.2f} GB/s" if memcpy else "not measured, no numpy")
          + f"): medians of epochs 2-{last}; every figure the median of {rounds} round(s)")
    if "distdgl" in runs:
        print("  distdgl: rank 0's log lines; sample is its sample+data_copy, compute forward+backward+update")
    elif model == "example":
        print("  DistDGL 1.1.3, historical (issue 16; not measured in this run, see --distdgl):"
              " epoch 2.68-5.96 s, forward+backward+update 0.95-1.37 s")
    print()
    print(f"{'run':<16}{'server MiB':>12}{'trainer MiB':>13}   (peak RSS, the larger of the two processes,"
          f" median of rounds; partition 0's files: {part_bytes / MIB:.0f} MiB)")
    for kind, m in med.items():
        mib = {w: None if m[w] is None else m[w] / MIB for w in ("server_peak_bytes", "trainer_peak_bytes")}
        print(f"{kind:<16}" + cell(mib["server_peak_bytes"], 12, ".0f") + cell(mib["trainer_peak_bytes"], 13, ".0f"))
    if "distdgl" in runs:
        print("  distdgl: DGL's server and trainer processes (python3 train_dist.py)")
    elif model == "example":
        print("  DistDGL 1.1.3, historical (issue 29; not measured in this run, see --distdgl):"
              " graph-server 483 MiB, trainer 984 MiB")

    ratios = {}

    def ratio(name, value, note=None, fmt=".2f"):
        if value is None:
            return
        ratios[name] = value
        print(f"ratio: {name} {value:{fmt}}" + (f" ({note})" if note else ""))

    def over(a, b):
        return None if a is None or not b else a / b

    def get(kind, key):
        return med[kind][key] if kind in med else None

    # The example model keeps the names (and targets) these lines have had;
    # the paper model's are the same figures, for reference.
    example = model == "example"
    prefix = "dgl_config" if example else "paper"

    def target(text):
        return text if example else "for reference"

    fused_time, fused_trainer = get("fused", "time_s"), get("fused", "trainer_peak_bytes")
    fused_server = get("fused", "server_peak_bytes")
    ratio(f"{prefix}_compute_fused_over_index_add", over(get("fused", "compute_s"), get("reference", "compute_s")),
          "target <= 0.5")
    ratio(f"{prefix}_epoch_s", fused_time, target("target <= 1.0"))
    ratio(f"{prefix}_trainer_peak_rss_mib", over(fused_trainer, MIB), target("target <= 500"), ".0f")
    ratio(f"{prefix}_server_peak_rss_mib", over(fused_server, MIB), target("target <= 250"), ".0f")
    ratio(f"{prefix}_trainer_peak_rss_over_partition_bytes", over(fused_trainer, part_bytes))
    ratio(f"{prefix}_server_peak_rss_over_partition_bytes", over(fused_server, part_bytes))
    if "baseline" in med:
        ratio(f"{prefix}_epoch_over_baseline", over(fused_time, get("baseline", "time_s")), "target <= 1.0")
        ratio(f"{prefix}_trainer_peak_rss_over_baseline", over(fused_trainer, get("baseline", "trainer_peak_bytes")))
        ratio(f"{prefix}_server_peak_rss_over_baseline", over(fused_server, get("baseline", "server_peak_bytes")))
    script_time, script_peak = get("python", "time_s"), get("python", "trainer_peak_bytes")
    if "python" in med:
        ratio(f"{prefix}_python_epoch_s", script_time)
        ratio(f"{prefix}_python_trainer_peak_rss_mib", over(script_peak, MIB), target("target <= 500"), ".0f")
    if "python-baseline" in med:
        ratio(f"{prefix}_python_epoch_over_baseline", over(script_time, get("python-baseline", "time_s")),
              "target <= 1.0")
        ratio(f"{prefix}_python_trainer_peak_rss_over_baseline",
              over(script_peak, get("python-baseline", "trainer_peak_bytes")))

    if example:
        ratio("example_trainer_host_peak_mib", over(fused_trainer, MIB), "target <= 500", ".0f")
    else:
        ratio("paper_model_step_peak_fraction", get("fused", "peak_fraction"), "target >= 0.5")
    ratio(f"{model}_gather_over_memcpy", over(get("fused", "gather_gb_per_s"), memcpy), "for reference")
    ratio(f"{model}_trainer_host_over_script", over(fused_time, script_time), "target <= 0.95")
    distdgl_time, distdgl_peak = get("distdgl", "time_s"), get("distdgl", "trainer_peak_bytes")
    if "distdgl" in med:
        ratio(f"{model}_distdgl_epoch_s", distdgl_time, "for reference")
        ratio(f"{model}_trainer_host_over_distdgl", over(fused_time, distdgl_time),
              "target <= 0.15" if example else "target <= 0.35")
        ratio(f"{model}_script_over_distdgl", over(script_time, distdgl_time),
              "for reference" if example else "target <= 0.40")
        ratio(f"{model}_distdgl_trainer_peak_mib", over(distdgl_peak, MIB), "for reference", ".0f")
        ratio(f"{model}_trainer_host_peak_over_distdgl_trainer_peak", over(fused_trainer, distdgl_peak),
              "for reference")
        ratio(f"{model}_script_peak_over_distdgl_trainer_peak", over(script_peak, distdgl_peak),
              "target <= 0.6" if example else "for reference")

    result = {"model": model, "description": MODELS[model], "runs": runs, "median": med,
              "peak_rss_bytes": {k: {"server": m["server_peak_bytes"], "trainer": m["trainer_peak_bytes"]}
                                 for k, m in med.items()},
              "partition_bytes": part_bytes, "memcpy_gb_per_s": memcpy, "ratios": ratios}
    if "dgl_config_compute_fused_over_index_add" in ratios:
        result["compute_ratio"] = ratios["dgl_config_compute_fused_over_index_add"]
    with open(out, "w") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
