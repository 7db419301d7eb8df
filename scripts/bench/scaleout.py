#!/usr/bin/env python3
"""Scale-out benchmark (not a test): the same training job on N = 2, 4, 8
emulated machines (scripts/cluster_emu.py: network namespaces over shaped
links, dgl-launch over ssh), 1 and 2 trainers per machine with one
sampler-worker each. --weak grows the graph with N (--nodes per 2 machines).

For every run it prints one table: the epoch time (the first, and the median
of the others) and rank 0's split, the CPU seconds of every process kind per
epoch (polled from /proc, lined up with each epoch by its end time), the
cluster's per-stage CPU and work (metrics.json "cluster": sampled edges,
feature rows, model FLOPs), bytes per epoch per machine (dgld's accounting
and the machines' eth0 counters), and each figure's ratio to N = 2 with the
same trainers per machine. JSON goes to bench-results/scaleout-<time>.json,
the input of scripts/bench/cost_model.py.

Usage: scripts/bench/scaleout.sh [--machines "2 4 8"] [--trainers "1 2"] [--preset 10g]
          [--nodes 200000] [--weak] [--epochs 4] [--batch-size 200] [--fan-out 10,25]
          [--build build] [--baseline-build DIR] [--out bench-results]
--baseline-build runs every configuration again with DIR's binaries right
after this build's, and prints the ratios of the two (first epoch, steady
epoch, CPU).
"""
import argparse
import atexit
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EMU = [sys.executable, os.path.join(REPO, "scripts", "cluster_emu.py")]
KINDS = ("graph-server", "trainer-host", "sampler-worker", "dgld-switch", "dgl-launch", "sshd", "rsync")
HZ = os.sysconf("SC_CLK_TCK")


def sh(argv, **kw):
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    if r.returncode != 0:
        raise SystemExit(f"scaleout: {' '.join(argv[:6])} ... failed ({r.returncode}):\n{r.stdout[-3000:]}")
    return r.stdout


class Poller:
    """CPU seconds of every dgld process (by kind) and the machines' eth0
    counters, every 0.2 s, in a thread."""

    def __init__(self, sshd_pids):
        self.sshd_pids = sshd_pids
        self.rows = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def sample(self):
        cpu = {k: 0.0 for k in KINDS}
        for p in os.listdir("/proc"):
            if not p.isdigit():
                continue
            try:
                s = open(f"/proc/{p}/stat").read()
            except OSError:
                continue
            comm = s[s.index("(") + 1:s.rindex(")")]
            kind = next((k for k in KINDS if comm.startswith(k)), None)
            if kind:
                f = s[s.rindex(")") + 2:].split()
                cpu[kind] += (int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])) / HZ
        net = []
        for pid in self.sshd_pids:
            try:
                for line in open(f"/proc/{pid}/net/dev"):
                    if line.strip().startswith("eth0:"):
                        v = line.split(":", 1)[1].split()
                        net.append((int(v[0]), int(v[8]), int(v[9])))  # rx bytes, tx bytes, tx packets
            except OSError:
                net.append((0, 0, 0))
        return {"t": time.time(), "cpu": cpu, "net": net}

    def run(self):
        while not self.stop.is_set():
            self.rows.append(self.sample())
            self.stop.wait(0.2)

    def at(self, t):
        return min(self.rows, key=lambda r: abs(r["t"] - t))


def window(poller, a, b):
    ra, rb = poller.at(a), poller.at(b)
    cpu = {k: max(0.0, rb["cpu"][k] - ra["cpu"][k]) for k in KINDS}
    tx = sum(y[1] - x[1] for x, y in zip(ra["net"], rb["net"]))
    pk = sum(y[2] - x[2] for x, y in zip(ra["net"], rb["net"]))
    return {"wall_s": rb["t"] - ra["t"], "cpu": cpu, "iface_tx_bytes": tx, "iface_tx_packets": pk}


def epoch_ends_from_log(path):
    """epoch -> Unix time of rank 0's "Epoch N | Loss" line in dgl-launch's output."""
    ends = {}
    for line in open(path, errors="replace"):
        if "/trainer/0: " not in line or "| Loss" not in line:
            continue
        rest = line.split("/trainer/0: ", 1)[1]
        try:
            t = datetime.datetime.strptime(rest[:23], "%Y-%m-%d %H:%M:%S.%f").timestamp()
            ends[int(rest.split("Epoch ", 1)[1].split()[0])] = t
        except (ValueError, IndexError):
            continue
    return ends


def leftovers(name, st):
    """What the job left on the machines: processes besides sshd, /dev/shm entries."""
    left = []
    state = json.load(open(os.path.join(st["src"], "..", "state.json")))
    for i, m in enumerate(state["machines"]):
        pids = subprocess.run(["ip", "netns", "pids", m["ns"]], stdout=subprocess.PIPE, text=True).stdout.split()
        pids = [p for p in pids if int(p) != m["sshd_pid"]]
        if pids:
            left.append(f"machine {i}: processes {' '.join(pids)}")
        shm = sh(EMU + ["exec", "--name", name, str(i), "--", "ls", "-A", "/dev/shm"]).split()
        if shm:
            left.append(f"machine {i}: /dev/shm {' '.join(shm)}")
    return left


def run_job(a, build, n, t, nodes, name, parts_cache):
    sh(EMU + ["down", "--name", name])
    sh(EMU + ["up", "--name", name, "--machines", str(n), "--preset", a.preset, "--build", a.build])
    try:
        st = json.loads(sh(EMU + ["status", "--name", name, "--json"]))
        src = st["src"]
        key = (nodes, n)
        parts = os.path.join(src, "parts")
        if key not in parts_cache:
            cache_dir = os.path.join(a.work, f"parts-{nodes}-{n}")
            if not os.path.exists(os.path.join(cache_dir, "g.json")):
                gen = f"sbm:nodes={nodes},avg_degree=20,classes=47,feat_dim=100,seed=1"
                out = sh([os.path.join(REPO, a.build, "partition", "dgl-partition"), "--log-level", "warn", "--generate",
                          gen, "--num-parts", str(n), "--graph-name", "g", "--output", cache_dir])
                # "edge cut 61738 (17.58% of edges)": known before any training.
                cut = next((float(l.split("(")[1].split("%")[0]) / 100 for l in out.splitlines()
                            if l.startswith("edge cut")), None)
                with open(os.path.join(cache_dir, "cut.json"), "w") as f:
                    json.dump({"edge_cut_share": cut}, f)
            parts_cache[key] = cache_dir
        os.symlink(parts_cache[key], parts)
        with open(os.path.join(src, "ip_config.txt"), "w") as f:
            for m in st["machines"]:
                f.write(f"{m['address']} 30050\n")
        trainer = os.path.join(REPO, build, "daemons", "trainer_host", "trainer-host")
        cmd = EMU + ["launch", "--name", name, "--build", build, "--", "--workspace", st["workspace"],
                     "--ip-config", "ip_config.txt", "--part-config", "parts/g.json", "--num-trainers", str(t),
                     "--num-samplers", str(a.samplers), "--num-servers", "1", "--", trainer, "--num-epochs",
                     str(a.epochs), "--batch-size", str(a.batch_size), "--fan-out", a.fan_out, "--num-hidden",
                     str(a.hidden), "--lr", "0.01", "--eval-every", "0" if a.eval else "-1", "--no-progress",
                     "--metrics-out", "metrics.json", "--seed", str(a.seed)]
        poller = Poller([m["sshd_pid"] for m in json.load(open(os.path.join(st["src"], "..", "state.json")))["machines"]])
        poller.thread.start()
        t0 = time.time()
        log_path = os.path.join(a.work, f"{name}-{os.path.basename(build)}-n{n}-t{t}.log")
        with open(log_path, "w") as log:
            rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=a.job_timeout).returncode
        total = time.time() - t0
        poller.stop.set()
        poller.thread.join()
        if rc != 0:
            raise SystemExit(f"scaleout: the job on N={n} T={t} failed ({rc}); log: {log_path}")
        m = json.load(open(os.path.join(src, "metrics.json")))
        left = leftovers(name, st)
    finally:
        sh(EMU + ["down", "--name", name])
    ends = epoch_ends_from_log(log_path)
    epochs = []
    for e in m["epochs"]:
        # A build from before metrics.json had end_unix_s: rank 0's log line.
        end = e.get("end_unix_s") or ends.get(e["epoch"], 0)
        epochs.append({"epoch": e["epoch"], "time_s": e["time_s"],
                       "split": {k: e[k] for k in ("sample_s", "fetch_s", "compute_s", "allreduce_s", "wait_s")},
                       "cluster": e.get("cluster"), "window": window(poller, end - e["time_s"], end)})
    cut = json.load(open(os.path.join(parts_cache[(nodes, n)], "cut.json")))["edge_cut_share"]
    return {"machines": n, "trainers_per_machine": t, "nodes": nodes, "build": build, "total_s": total,
            "edge_cut_share": cut, "epochs": epochs, "test_acc": m.get("test_acc") if a.eval else None,
            "left_behind": left}


def summarize(r):
    ep = r["epochs"]
    rest = ep[1:] or ep
    med = lambda f: statistics.median(f(e) for e in rest)
    n = r["machines"]
    s = {
        "first_epoch_s": ep[0]["time_s"],
        "epoch_s": med(lambda e: e["time_s"]),
        **{k: med(lambda e, k=k: e["split"][k]) for k in ("sample_s", "fetch_s", "compute_s", "allreduce_s", "wait_s")},
        **{f"cpu_{k}": med(lambda e, k=k: e["window"]["cpu"][k]) for k in ("trainer-host", "sampler-worker",
                                                                           "graph-server", "dgld-switch")},
        "cpu_total": med(lambda e: sum(e["window"]["cpu"].values())),
        "first_cpu_total": sum(ep[0]["window"]["cpu"].values()),
        "iface_bytes_per_machine": med(lambda e: e["window"]["iface_tx_bytes"]) / n,
    }
    if any(e["cluster"] is None for e in ep):  # a build without traffic accounting
        return s
    s |= {
        **{f"stage_{k}": med(lambda e, k=k: e["cluster"]["cpu"][k]) for k in ("sample_s", "fetch_s", "compute_s",
                                                                              "allreduce_s", "process_s")},
        "sampled_edges": med(lambda e: e["cluster"]["sampled_edges"]),
        "input_rows": med(lambda e: e["cluster"]["input_rows"]),
        "model_flops": med(lambda e: e["cluster"]["model_flops"]),
        "seeds": med(lambda e: e["cluster"]["seeds"]),
        "bytes_per_machine": med(lambda e: e["cluster"]["network_bytes"]) / n,
        "bytes_per_seed": med(lambda e: e["cluster"]["bytes_per_seed"]),
        "remote_row_share": med(lambda e: e["cluster"]["remote_row_share"]),
        "round_trips_per_batch": med(lambda e: e["cluster"]["round_trips_per_batch"]),
    }
    all_dgld = sum(e["cluster"]["network_bytes"] for e in ep)
    all_iface = sum(e["window"]["iface_tx_bytes"] for e in ep)
    s["accounting_vs_iface"] = all_dgld / all_iface if all_iface else 0.0
    return s


ROWS = [
    ("first epoch s", "first_epoch_s", "{:.2f}"), ("epoch s (median of the rest)", "epoch_s", "{:.2f}"),
    ("  sample s (rank 0)", "sample_s", "{:.2f}"), ("  fetch s", "fetch_s", "{:.2f}"),
    ("  compute s", "compute_s", "{:.2f}"), ("  allreduce s", "allreduce_s", "{:.2f}"), ("  wait s", "wait_s", "{:.2f}"),
    ("CPU s per epoch, all processes", "cpu_total", "{:.2f}"), ("  first epoch", "first_cpu_total", "{:.2f}"),
    ("  trainers", "cpu_trainer-host", "{:.2f}"), ("  sampler-workers", "cpu_sampler-worker", "{:.2f}"),
    ("  graph-servers", "cpu_graph-server", "{:.2f}"), ("  switch (emulator)", "cpu_dgld-switch", "{:.2f}"),
    ("stage CPU s: sample", "stage_sample_s", "{:.2f}"), ("  fetch", "stage_fetch_s", "{:.2f}"),
    ("  compute", "stage_compute_s", "{:.2f}"), ("  allreduce", "stage_allreduce_s", "{:.2f}"),
    ("sampled edges", "sampled_edges", "{:.3g}"), ("input feature rows", "input_rows", "{:.3g}"),
    ("model GFLOP", "model_flops", "{:.3g}"),
    ("MB per epoch per machine (dgld)", "bytes_per_machine", "{:.1f}"),
    ("MB per epoch per machine (eth0)", "iface_bytes_per_machine", "{:.1f}"),
    ("bytes per seed", "bytes_per_seed", "{:.0f}"), ("remote feature rows %", "remote_row_share", "{:.1f}"),
    ("round trips per batch", "round_trips_per_batch", "{:.1f}"),
]
SCALE = {"model_flops": 1e-9, "bytes_per_machine": 1e-6, "iface_bytes_per_machine": 1e-6, "remote_row_share": 100}


def print_table(a, r, s, ref):
    n, t = r["machines"], r["trainers_per_machine"]
    print(f"\nscaleout: N={n} machines x {t} trainer(s) ({a.samplers} sampler-worker each), {r['nodes']} nodes, "
          f"preset {a.preset}, {a.epochs} epochs, batch {a.batch_size}, fanout {a.fan_out} [{r['build']}]")
    print(f"  {'':34} {'value':>12} {'/ N=2':>8}")
    for label, key, fmt in ROWS:
        if key not in s:
            continue
        v = s[key] * SCALE.get(key, 1)
        ratio = f"{s[key] / ref[key]:.2f}" if ref and ref.get(key) else "-"
        print(f"  {label:34} {fmt.format(v):>12} {ratio:>8}")
    if r.get("test_acc") is not None:
        print(f"  test accuracy {r['test_acc']:.4f}")
    print(f"  left behind on the machines: {'; '.join(r['left_behind']) or 'nothing'}")
    if "accounting_vs_iface" in s:
        print(f"  dgld's bytes / eth0 bytes over all epochs: {s['accounting_vs_iface']:.3f}")
    print(f"  job {r['total_s']:.1f} s from dgl-launch to its exit")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--machines", default="2 4 8")
    ap.add_argument("--trainers", default="1 2")
    ap.add_argument("--preset", default="10g")
    ap.add_argument("--nodes", type=int, default=200000)
    ap.add_argument("--weak", action="store_true")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=200)
    ap.add_argument("--fan-out", default="10,25")
    ap.add_argument("--hidden", type=int, default=16)
    ap.add_argument("--samplers", type=int, default=1)
    ap.add_argument("--build", default="build")
    ap.add_argument("--baseline-build")
    ap.add_argument("--out", default=os.path.join(REPO, "bench-results"))
    ap.add_argument("--job-timeout", type=int, default=900)
    ap.add_argument("--eval", action="store_true", help="evaluate after the last epoch and report test accuracy")
    ap.add_argument("--repeat", type=int, default=1, help="runs of every configuration")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.epochs < 2:
        raise SystemExit("scaleout: --epochs must be >= 2 (the first is reported apart)")
    a.work = os.path.join("/tmp", f"dgld-scaleout-{os.getpid()}")
    os.makedirs(a.work, exist_ok=True)
    atexit.register(shutil.rmtree, a.work, True)  # the partitions and logs go with the run (results stay in --out)
    os.makedirs(a.out, exist_ok=True)
    builds = [a.build] + ([a.baseline_build] if a.baseline_build else [])
    results, refs, parts = [], {}, {}
    for t in [int(x) for x in a.trainers.split()]:
        for n in [int(x) for x in a.machines.split()]:
            nodes = a.nodes * n // 2 if a.weak else a.nodes
            pair = []
            for b in [b for b in builds for _ in range(a.repeat)]:
                r = run_job(a, b, n, t, nodes, "scaleout", parts)
                s = summarize(r)
                r["summary"] = s
                results.append(r)
                refs.setdefault((t, b), s if n == 2 else None)
                print_table(a, r, s, refs.get((t, b)))
                pair.append(s)
            if len(builds) == 2 and len(pair) == 2:
                print(f"  {builds[0]} / {builds[1]}: first epoch {pair[0]['first_epoch_s'] / pair[1]['first_epoch_s']:.2f}, "
                      f"epoch {pair[0]['epoch_s'] / pair[1]['epoch_s']:.2f}, "
                      f"CPU per epoch {pair[0]['cpu_total'] / pair[1]['cpu_total']:.2f}, "
                      f"first-epoch CPU {pair[0]['first_cpu_total'] / pair[1]['first_cpu_total']:.2f}")
            sys.stdout.flush()
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    path = os.path.join(a.out, f"scaleout-{stamp}.json")
    with open(path, "w") as f:
        json.dump({"args": {k: v for k, v in vars(a).items()}, "runs": results}, f, indent=1)
    print(f"\nscaleout: results in {path}")
    for r in results:
        s = r["summary"]
        print(f"ratio: scaleout_first_epoch_over_steady_n{r['machines']}_t{r['trainers_per_machine']} "
              f"{s['first_epoch_s'] / s['epoch_s']:.2f} (target 2.0) [{r['build']}]")


if __name__ == "__main__":
    main()
