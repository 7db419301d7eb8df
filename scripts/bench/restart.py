#!/usr/bin/env python3
"""Benchmark (not a test): training that survives a lost machine, on the
cluster emulator (scripts/cluster_emu.py, root only). 4 emulated machines
over the 10g preset: 3 run the job, the 4th is a '# spare' of ip_config.txt;
trainer-host GraphSAGE with a checkpoint every --every steps into the
directory every machine shares. Per graph, two runs with the same seed:

  undisturbed   dgl-launch --max-restarts 3, nothing happens
  disturbed     the same; kill -9 of machine 1's trainer in the middle of an
                epoch, then (after the trainers resumed and committed a
                checkpoint) kill -9 of every process of machine 2, its sshd
                too: the spare takes its place

Graphs: cora (../shared/datasets/cora, public split, 100 epochs, hidden 64,
row-normalised features, batch 16 per trainer) and products200k (the DistDGL
benchmark graph of scripts/bench/epoch.sh --dgl-config: 200000 nodes, ~4.1 M
edges, 100 features, 47 classes; 3 epochs, hidden 16, batch 1000).

Prints per graph the test accuracy of both runs, each restart's cause and
cost (from the failure until the trainers resumed, and its parts), and
  ratio: restart_<graph>_test_acc_minus_undisturbed <d> (target within +-0.01)
Writes bench-results/restart-<time>.json.

Usage: scripts/bench/restart.sh [--graphs "cora products200k"] [--build DIR] [--cora DIR]
"""
import argparse
import atexit
import json
import os
import re
import signal
import subprocess
import sys
import shutil
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EMU = [sys.executable, os.path.join(REPO, "scripts", "cluster_emu.py")]

GRAPHS = {
    "cora": {
        "trainer": ["--num-epochs", "100", "--num-hidden", "64", "--lr", "0.01", "--weight-decay", "5e-4",
                    "--row-normalize", "--batch-size", "16", "--eval-every", "0"],
        "every": 20,
        "kill_epoch": 20,
    },
    "products200k": {
        "generate": "sbm:nodes=200000,avg_degree=21.2,classes=47,feat_dim=100,seed=1",
        "trainer": ["--num-epochs", "3", "--num-hidden", "16", "--lr", "0.01", "--fan-out", "10,25",
                    "--batch-size", "1000", "--eval-every", "0"],
        "every": 10,
        "kill_epoch": 0,
    },
}


def emu(*args):
    r = subprocess.run(EMU + list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.exit(f"restart.py: cluster_emu.py {' '.join(args)} failed:\n{r.stdout}")
    return r.stdout


def wait_log(path, text, proc, timeout, after=0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        body = open(path).read()
        at = body.find(text, after)
        if at >= 0:
            return at + len(text)
        if proc.poll() is not None:
            sys.exit(f"restart.py: the launcher ended ({proc.returncode}) before '{text}':\n{body[-3000:]}")
        time.sleep(0.1)
    sys.exit(f"restart.py: no '{text}' within {timeout} s in {path}")


def wait_mid_epoch(path, proc, min_epoch, timeout):
    """Waits for a mid-epoch checkpoint of epoch >= min_epoch; its end offset."""
    pattern = re.compile(r"checkpoint of epoch (\d+) step \d+ committed")
    deadline = time.time() + timeout
    while time.time() < deadline:
        body = open(path).read()
        for m in pattern.finditer(body):
            if int(m.group(1)) >= min_epoch:
                return m.end()
        if proc.poll() is not None:
            sys.exit(f"restart.py: the launcher ended ({proc.returncode}) before a mid-epoch checkpoint:\n"
                     f"{body[-3000:]}")
        time.sleep(0.1)
    sys.exit(f"restart.py: no mid-epoch checkpoint of epoch >= {min_epoch} within {timeout} s in {path}")


def trainer_pid(st, machine):
    out = subprocess.run(["ip", "netns", "pids", st["machines"][machine]["ns"]], stdout=subprocess.PIPE,
                         text=True).stdout
    for pid in out.split():
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if cmd and cmd[0].endswith(b"trainer-host"):
            return int(pid)
    return None


def run(a, st, g, name, job, disturb, work):
    spec = GRAPHS[g]
    ckpt = os.path.join(st["shared"], f"ckpt-{job}")
    log = os.path.join(work, f"{job}.log")
    cmd = EMU + ["launch", "--name", name, "--build", a.build, "--", "--workspace", st["workspace"],
                 "--ip-config", "ip_config.txt", "--part-config", "parts/g.json", "--num-trainers", "1",
                 "--job-id", job, "--max-restarts", "3", "--restart-backoff-s", "0.5", "--",
                 os.path.join(a.build, "daemons", "trainer_host", "trainer-host")] + spec["trainer"] + [
        "--no-progress", "--seed", "1", "--log-every", "0", "--checkpoint-dir", ckpt, "--checkpoint-every-steps",
        str(spec["every"]), "--metrics-out", f"metrics-{job}.json"]
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)
    if disturb:
        # Mid-epoch, some way into the run.
        at = wait_mid_epoch(log, p, spec["kill_epoch"], 600)
        pid = trainer_pid(st, 1)
        if pid:
            os.kill(pid, signal.SIGKILL)
        at = wait_log(log, "trainers resumed from the checkpoint of", p, 600, at)
        wait_log(log, "committed by every trainer", p, 600, at)
        emu("kill", "--name", name, "2")
    rc = p.wait(timeout=1800)
    wall = time.time() - t0
    if rc != 0:
        sys.exit(f"restart.py: {job} failed ({rc}):\n{open(log).read()[-4000:]}")
    metrics = json.load(open(os.path.join(st["src"], f"metrics-{job}.json")))
    report_path = os.path.join(st["src"], "dgld-logs", f"{job}-restarts.json")
    restarts = json.load(open(report_path)) if os.path.exists(report_path) else []
    return {"job": job, "wall_s": wall, "test_acc": metrics["test_acc"], "restarts": restarts, "log": log}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graphs", default="cora products200k")
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--cora", default=os.path.join(REPO, "..", "shared", "datasets", "cora"))
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)
    if os.geteuid() != 0:
        sys.exit("restart.py: root is needed (the cluster emulator's network namespaces)")
    work = os.path.join("/tmp", f"dgld-restart-bench-{os.getpid()}")
    os.makedirs(work)
    atexit.register(shutil.rmtree, work, True)  # the partitions and logs go with the run
    results = {}
    for g in a.graphs.split():
        if g not in GRAPHS:
            sys.exit(f"restart.py: unknown graph '{g}' (known: {', '.join(GRAPHS)})")
        if g == "cora" and not os.path.exists(os.path.join(a.cora, "raw", "edge.csv.gz")):
            print(f"== {g}: skipped, Cora is not at {a.cora}")
            continue
        name = "bench-rs"
        emu("down", "--name", name)
        emu("up", "--name", name, "--machines", "4", "--preset", "10g", "--build", a.build)
        try:
            st = json.loads(emu("status", "--name", name, "--json"))
            source = ["--generate", GRAPHS[g]["generate"]] if "generate" in GRAPHS[g] else ["--input", f"ogb:{a.cora}"]
            subprocess.run([os.path.join(a.build, "partition", "dgl-partition"), "--log-level", "warn"] + source + [
                "--num-parts", "3", "--graph-name", "g", "--output", os.path.join(st["src"], "parts")], check=True,
                stdout=subprocess.DEVNULL)
            with open(os.path.join(st["src"], "ip_config.txt"), "w") as f:
                for m in st["machines"][:3]:
                    f.write(f"{m['address']} 30050\n")
                f.write(f"# spare {st['machines'][3]['address']} 30050\n")
            print(f"== {g}: 3 emulated machines + 1 spare (10g), checkpoint every {GRAPHS[g]['every']} steps")
            base = run(a, st, g, name, f"{g}-a", False, work)
            print(f"  undisturbed: test acc {base['test_acc']:.4f}, {base['wall_s']:.1f} s")
            hit = run(a, st, g, name, f"{g}-b", True, work)
            print(f"  disturbed:   test acc {hit['test_acc']:.4f}, {hit['wall_s']:.1f} s, {len(hit['restarts'])} "
                  f"restart(s)")
            for r in hit["restarts"]:
                c = r["cause"]
                what = f"{c['role']} {c['rank']} killed" if c["kind"] == "process" else "machine lost (sshd too)"
                print(f"    restart {r['restart']}: {what} on machine {c['machine']}: trainers resumed "
                      f"{r['restart_s']:.1f} s after the failure (teardown {r['teardown_s']:.1f} s, back-off "
                      f"{r['backoff_s']:.1f} s), {r['lost_work_s']:.1f} s of training redone"
                      + (f"; {r['replaced']}" if r["replaced"] else ""))
            delta = hit["test_acc"] - base["test_acc"]
            results[g] = {"undisturbed": base, "disturbed": hit, "delta": delta}
            print(f"ratio: restart_{g}_test_acc_minus_undisturbed {delta:+.4f} (target within +-0.01)")
        finally:
            emu("down", "--name", name)
    os.makedirs(os.path.join(REPO, "bench-results"), exist_ok=True)
    out = os.path.join(REPO, "bench-results", time.strftime("restart-%Y%m%d-%H%M%S.json"))
    json.dump(results, open(out, "w"), indent=2)
    print(f"results: {out}")


if __name__ == "__main__":
    main()
