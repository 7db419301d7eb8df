#!/usr/bin/env python3
"""Chaos soak (issue 50; docs/reliability.md, "Chaos soak"), on the cluster
emulator (scripts/cluster_emu.py, root only): one trainer-host job on 4
emulated machines and a '# spare' (10g preset), checkpoints every few steps
on each machine's own disk with one replica (--checkpoint-replicas 1),
dgl-launch --max-restarts high; for --minutes, a fault every --fault-every
MIN MAX, the kinds in turn in a fresh random order each round:

  kill_trainer   kill -9 of a trainer-host
  kill_sampler   kill -9 of a sampler-worker
  kill_server    kill -9 of a graph-server
  kill_machine   a whole machine: its link down, then kill -9 of every process
                 on it (its sshd too); once the spare took its place, the lost
                 machine comes back as a fresh one (empty disk) and is the
                 spare for the next loss
  sigstop        SIGSTOP of a trainer, graph-server or sampler-worker for
                 --stop-s (past the servers' 10 s heartbeat deadline), SIGCONT
  loss           20 % loss on a machine's link (the switch drops the frames it
                 sends and those sent to it), for --loss-s

A fault comes only once the job trains again after the previous one (a
checkpoint committed by every trainer since), so each recovery is measured
alone: from the fault until the next checkpoint every trainer committed after
it (and after any restart it caused). The same job, same seed, runs
undisturbed after it; with --epochs 0 a 2-epoch run first sizes the job so
that it would train for --minutes less the faults' expected cost (at least
30 % of --minutes). With --undisturbed-acc the undisturbed job is not run:
its test accuracy comes from an earlier soak of the same job (the same
--graph, --seed, --batch-size and --epochs: its soak.json's "epochs" and
"undisturbed_test_acc"), and the report says it was given.

Reports every fault (time, kind, target), its recovery time, the restarts it
caused and the training redone (dgl-launch's restart report), the RSS of every
long-lived process and /dev/shm of every machine over time (CSV, JSON, and a
PNG where matplotlib is there), the test accuracy against the undisturbed
job, whether /dev/shm is empty on every machine at the end, and
  ratio: soak_test_acc_minus_undisturbed, soak_rss_growth_max,
         soak_faults_recovered_fraction, soak_shm_bytes_left
Exits 1 when a fault was not recovered, the job failed, the accuracy differs
by more than 0.01 or /dev/shm is not empty.

Usage: scripts/bench/soak.sh [--minutes 60] [--fault-every 2m 6m] [--out DIR] ...
"""
import argparse
import atexit
import csv
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "scripts"), str(REPO / "tests" / "cluster")]
import cluster_emu as ce  # noqa: E402

KINDS = ("kill_trainer", "kill_sampler", "kill_server", "kill_machine", "sigstop", "loss")
ROLES = {"trainer-host": "trainer", "sampler-worker": "sampler", "graph-server": "server", "dgl-launch": "agent"}
GRAPH = "sbm:nodes=30000,avg_degree=10,classes=8,feat_dim=32,seed=5"
EVENTS = {"commit": re.compile(r"checkpoint of (.+) committed by every trainer"),
          "restart": re.compile(r"restart (\d+) of at most \d+ in"),
          "resumed": re.compile(r"trainers resumed from the checkpoint of (.+?), [\d.]+ s after"),
          "replaced": re.compile(r"spare (\S+):\d+ .*took the place of machine (\d+)")}


class SoakError(Exception):
    pass


def seconds(text):
    """'20s', '2m' or a plain number of minutes."""
    t = text.strip().lower()
    try:
        return float(t[:-1]) if t.endswith("s") else float(t.removesuffix("m")) * 60
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}': expected a duration such as 20s, 2m or 2 (minutes)")


class LogTail(threading.Thread):
    """The launcher's log lines that matter, stamped when read (seconds since t0)."""

    def __init__(self, path, t0):
        super().__init__(daemon=True)
        self.path, self.t0, self.lock, self.stop, self.events = path, t0, threading.Lock(), False, []

    def run(self):
        pos, rest = 0, b""
        while True:
            last = self.stop
            with open(self.path, "rb") as f:
                f.seek(pos)
                data = f.read()
            pos += len(data)
            lines = (rest + data).split(b"\n")
            rest = lines.pop()
            now = time.time() - self.t0
            for raw in lines:
                line = raw.decode(errors="replace")
                for kind, rx in EVENTS.items():
                    m = rx.search(line)
                    if m:
                        with self.lock:
                            self.events.append({"t": now, "kind": kind, "args": m.groups(), "line": line})
            if last:
                return
            time.sleep(0.2)

    def get(self, kind, after=-1.0):
        with self.lock:
            return [e for e in self.events if e["kind"] == kind and e["t"] > after]


class Soak:
    def __init__(self, a, cluster):
        self.a, self.c, self.rng = a, cluster, random.Random(a.seed)
        self.st = ce.load_state(cluster.name)
        self.hosts = len(self.st["machines"])
        self.machine_of = {h: h for h in range(self.hosts - 1)}  # emulated host -> machine id of the job
        self.samples, self.shm, self.faults, self.pending = [], [], [], []
        self.sample_stop = threading.Event()
        self.kinds = []

    # ------------------------------------------------------------ what runs where
    def processes(self, host):
        m = self.st["machines"][host]
        out = []
        for pid in ce.ns_pids(m["ns"]):
            if pid == m.get("sshd_pid"):
                continue
            try:
                argv0 = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")[0].decode(errors="replace")
            except (OSError, IndexError):
                continue
            role = ROLES.get(os.path.basename(argv0))
            if role:
                out.append((pid, role))
        return out

    def active(self, role="trainer"):
        """(host, pid) of every process of `role` on a machine of the job."""
        return [(h, pid) for h in range(self.hosts) if ce.pid_alive(self.st["machines"][h].get("sshd_pid"))
                for pid, r in self.processes(h) if r == role]

    def shm_bytes(self, host):
        sshd = self.st["machines"][host].get("sshd_pid")
        if not ce.pid_alive(sshd):
            return None, None
        d = f"/proc/{sshd}/root/dev/shm"  # the machine's own /dev/shm, in its sshd's mount namespace
        total, names = 0, []
        for e in os.scandir(d):
            names.append(e.name)
            try:
                total += e.stat(follow_symlinks=False).st_blocks * 512
            except OSError:
                pass
        return total, names

    def sampler(self, t0, launcher_pid):
        while not self.sample_stop.wait(self.a.sample_s):
            t = time.time() - t0
            procs = [("launcher", launcher_pid, "launcher")] + [
                (h, pid, role) for h in range(self.hosts) if ce.pid_alive(self.st["machines"][h].get("sshd_pid"))
                for pid, role in self.processes(h)]
            for host, pid, role in procs:
                try:
                    status = open(f"/proc/{pid}/status").read()
                except OSError:
                    continue
                m = re.search(r"VmRSS:\s+(\d+) kB", status)
                if m:
                    self.samples.append({"t": round(t, 1), "host": host, "role": role, "pid": pid,
                                         "rss_kib": int(m.group(1))})
            for h in range(self.hosts):
                b, names = self.shm_bytes(h)
                if b is not None:
                    self.shm.append({"t": round(t, 1), "host": h, "bytes": b, "entries": len(names)})

    # ---------------------------------------------------------------- the faults
    def next_kind(self):
        if not self.kinds:
            self.kinds = list(KINDS)
            self.rng.shuffle(self.kinds)
        return self.kinds.pop()

    def inject(self, kind, t):
        f = {"kind": kind, "t": t, "end": t}
        if kind.startswith("kill_") and kind != "kill_machine":
            role = kind.removeprefix("kill_")
            host, pid = self.rng.choice(self.active(role))
            os.kill(pid, signal.SIGKILL)
            f["target"] = f"{role} pid {pid} on host {host} (machine {self.machine_of.get(host)})"
        elif kind == "kill_machine":
            host = self.rng.choice(sorted({h for h, _ in self.active()}))
            ns = self.st["machines"][host]["ns"]
            ce.run([ce.IP, "-n", ns, "link", "set", "eth0", "down"], f"taking host {host}'s link down")
            left = ce.kill_namespace_processes(ns)
            if left:
                raise SoakError(f"host {host}: processes {left} survived kill -9")
            f["target"] = f"host {host} (machine {self.machine_of.get(host)}): link down, every process killed"
            f["host"] = host
            self.pending.append(("repair", host, t))
        elif kind == "sigstop":
            choices = [(h, pid, r) for r in ("trainer", "server", "sampler") for h, pid in self.active(r)]
            host, pid, role = self.rng.choice(choices)
            os.kill(pid, signal.SIGSTOP)
            f["target"] = f"{role} pid {pid} on host {host} (machine {self.machine_of.get(host)}), {self.a.stop_s:g} s"
            f["end"] = t + self.a.stop_s
            self.pending.append(("sigcont", pid, f["end"]))
        elif kind == "loss":
            host = self.rng.choice(sorted({h for h, _ in self.active()}))
            f["lost_before"] = ce.switch_counters(self.st).get("lost", 0)
            ce.set_link_loss(self.st, host, 0.2)
            f["target"] = f"host {host} (machine {self.machine_of.get(host)}): 20 % loss both ways, {self.a.loss_s:g} s"
            f["end"] = t + self.a.loss_s
            self.pending.append(("unloss", host, f["end"]))
        self.faults.append(f)
        print(f"  +{t:7.1f} s  fault {len(self.faults)}: {kind}: {f['target']}", flush=True)

    def repair(self, host):
        """The lost machine comes back as a fresh one: empty disk, link up, sshd."""
        m = self.st["machines"][host]
        shutil.rmtree(os.path.join(self.st["dir"], f"machine{host}"), ignore_errors=True)
        ce.run([ce.IP, "-n", m["ns"], "link", "set", "eth0", "up"], f"bringing host {host}'s link up")
        ce.start_sshd(self.st, host)
        ce.save_state(self.st)
        log = os.path.join(self.st["dir"], f"sshd-{host}.log")
        ce.wait_for(lambda: "Server listening on" in open(log).read(), 20, f"host {host}'s sshd")

    def settle(self, tail, t, ending=False):
        """Ends what is due: SIGCONT, the loss, a lost machine's repair."""
        for item in list(self.pending):
            what, x, due = item
            if what == "repair":
                host = x
                addr = ce.machine_address(host)
                gone = [e for e in tail.get("replaced", due) if e["args"][1] == str(self.machine_of.get(host))]
                if gone or ending:
                    for e in gone:
                        spare = next(h for h in range(self.hosts) if ce.machine_address(h) == e["args"][0])
                        self.machine_of[spare] = self.machine_of.pop(host)
                    self.repair(host)
                    print(f"  +{t:7.1f} s  host {host} ({addr}) is back, empty, as the spare", flush=True)
                    self.pending.remove(item)
            elif t >= due or ending:
                if what == "sigcont":
                    try:
                        os.kill(x, signal.SIGCONT)
                    except ProcessLookupError:
                        pass
                else:
                    ce.set_link_loss(self.st, x, None)
                    f = next(f for f in reversed(self.faults) if f["kind"] == "loss")
                    f["frames_lost"] = ce.switch_counters(self.st).get("lost", 0) - f.pop("lost_before")
                self.pending.remove(item)

    def healthy(self, tail, since):
        """Training goes on: no restart under way (the newest resume after the newest restart; an
        attempt can fail before it resumes), a commit after `since` and after the last resume."""
        restarts, resumes = tail.get("restart"), tail.get("resumed")
        if restarts and (not resumes or resumes[-1]["t"] < restarts[-1]["t"]):
            return False
        after = max([since] + [e["t"] for e in resumes])
        return bool(tail.get("commit", after)) and len(self.active()) == self.hosts - 1

    def drive(self, p, tail, t0):
        a = self.a
        next_at = self.rng.uniform(*a.fault_every)
        last_end, told = 0.0, True
        while p.poll() is None:
            t = time.time() - t0
            self.settle(tail, t)
            if t > a.minutes * 60 * 3 + 600:
                raise SoakError(f"the job still runs after {t:.0f} s: stuck? (launcher log {tail.path})")
            if t < a.minutes * 60 and t >= next_at and not self.pending and self.healthy(tail, last_end):
                self.inject(self.next_kind(), t)
                last_end, told = self.faults[-1]["end"], False
                next_at = t + self.rng.uniform(*a.fault_every)
            elif self.faults and not told and not self.pending and self.healthy(tail, self.faults[-1]["t"]):
                told = True
                print(f"  +{t:7.1f} s  training again ({t - self.faults[-1]['t']:.1f} s after the fault, "
                      f"{len(tail.get('restart'))} restart(s) so far)", flush=True)
            time.sleep(0.2)
        self.settle(tail, time.time() - t0, ending=True)
        return p.returncode


def analyse(faults, tail, restarts, end_t):
    """Per fault: the restarts it caused, when training went on, what was redone."""
    commits = tail.get("commit")
    restart_lines = tail.get("restart")
    for i, f in enumerate(faults):
        until = faults[i + 1]["t"] if i + 1 < len(faults) else end_t
        mine = [e for e in restart_lines if f["t"] <= e["t"] < until]
        f["restarts"] = [restarts[int(e["args"][0]) - 1] for e in mine if int(e["args"][0]) <= len(restarts)]
        after = max([f["t"]] + [e["t"] for e in mine])
        later = [e for e in commits if after < e["t"] < until + 1e-9]
        f["recovered"] = bool(later)
        f["recover_s"] = later[0]["t"] - f["t"] if later else None
        f["progress_at"] = later[0]["args"][0] if later else None
        f["redone_s"] = sum(r.get("lost_work_s", 0.0) for r in f["restarts"])


def rss_growth(samples, t_first, t_last):
    """Per (host, role): the median RSS of the last quarter over the first's,
    each process counted from 20 s after it was first seen (a restarted
    process's start-up is not growth)."""
    seen = {}
    for s in samples:
        seen.setdefault((s["host"], s["pid"]), s["t"])
    samples = [s for s in samples if s["t"] - seen[(s["host"], s["pid"])] >= 20 or s["role"] == "launcher"]
    span = t_last - t_first
    q1, q4 = t_first + span / 4, t_last - span / 4
    keys = sorted({(str(s["host"]), s["role"]) for s in samples})
    out = {}
    for k in keys:
        first = [s["rss_kib"] for s in samples if (str(s["host"]), s["role"]) == k and s["t"] <= q1]
        last = [s["rss_kib"] for s in samples if (str(s["host"]), s["role"]) == k and s["t"] >= q4]
        if first and last:
            out[f"{k[0]}/{k[1]}"] = {"first_mib": statistics.median(first) / 1024,
                                     "last_mib": statistics.median(last) / 1024,
                                     "growth": statistics.median(last) / statistics.median(first)}
    return out


def plot(path, samples, shm, faults):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(11, 7), sharex=True)
    for k in sorted({(str(s["host"]), s["role"]) for s in samples}):
        pts = [s for s in samples if (str(s["host"]), s["role"]) == k]
        ax1.plot([s["t"] / 60 for s in pts], [s["rss_kib"] / 1024 for s in pts], ".", ms=2, label=f"{k[0]} {k[1]}")
    for h in sorted({s["host"] for s in shm}):
        pts = [s for s in shm if s["host"] == h]
        ax2.plot([s["t"] / 60 for s in pts], [s["bytes"] / 2**20 for s in pts], ".-", ms=2, label=f"host {h}")
    for f in faults:
        for ax in (ax1, ax2):
            ax.axvline(f["t"] / 60, color="grey", lw=0.5)
        ax1.text(f["t"] / 60, ax1.get_ylim()[1], f["kind"].replace("kill_", "k:"), rotation=90, fontsize=6,
                 va="top")
    ax1.set_ylabel("RSS (MiB)")
    ax1.legend(fontsize=5, ncol=6, markerscale=4)
    ax2.set_ylabel("/dev/shm (MiB)")
    ax2.set_xlabel("minutes since the disturbed job started")
    ax2.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    return path


def job_name(a, which):
    """The job id of the sizing run (c), the faulted job (d) or the undisturbed
    one (u), named after the cluster: the emulated machines share one PID
    space, and dgl-launch's clean-up sweeps a machine by job id, so two soaks
    (this one and the suite's cluster_soak) with one job id would kill each
    other's processes."""
    return f"{a.name}-{which}"


def trainer_args(a, job, epochs):
    return ["--num-epochs", str(epochs), "--batch-size", str(a.batch_size), "--fan-out", "10,25", "--num-hidden", "32",
            "--lr", "0.01", "--eval-every", "0", "--log-every", "0", "--no-progress", "--seed", str(a.seed),
            "--collective-timeout-s", "30", "--checkpoint-dir", f"ckpt-{job}", "--checkpoint-every-steps",
            str(a.checkpoint_every), "--checkpoint-replicas", "1", "--metrics-out", f"metrics-{job}.json"]


def launch(c, a, job, epochs, log):
    p = c.launch(["--num-trainers", "1", "--num-samplers", "1", "--job-id", job, "--max-restarts", str(a.max_restarts),
                  "--restart-backoff-s", "0.5"], trainer_args(a, job, epochs), log)
    atexit.register(lambda: p.poll() is None and os.killpg(p.pid, signal.SIGKILL))
    return p


def finished(c, p, job, log, timeout):
    rc = p.wait(timeout=timeout)
    if rc != 0:
        raise SoakError(f"job {job} failed ({rc}):\n{Path(log).read_text()[-4000:]}")
    return json.loads((c.src / f"metrics-{job}.json").read_text())


def size_job(a, c, out):
    """Epochs for --minutes: from a 2-epoch run's second epoch, less the faults' expected cost."""
    log = out / "calibrate.log"
    m = finished(c, launch(c, a, job_name(a, "c"), 2, log), job_name(a, "c"), log, 600)
    epoch_s = m["epochs"][-1]["time_s"]
    faults = a.minutes * 60 / (sum(a.fault_every) / 2)
    train_s = max(a.minutes * 60 * 0.3, a.minutes * 60 - faults * a.fault_cost_s)
    epochs = max(2, round(train_s / epoch_s))
    print(f"  an epoch takes {epoch_s:.2f} s: {epochs} epochs ({train_s / 60:.1f} min undisturbed; about "
          f"{faults:.0f} faults of about {a.fault_cost_s:g} s each)", flush=True)
    return epochs


def report(a, soak, tail, restarts, t_end, epochs, base, got, rc, out):
    analyse(soak.faults, tail, restarts, t_end)
    print(f"\n  {'t (s)':>7}  {'kind':<13} {'recovered':>9} {'after (s)':>9} {'restarts':>8} {'redone (s)':>10}  target")
    for f in soak.faults:
        rs = f"{f['recover_s']:9.1f}" if f["recovered"] else "        -"
        print(f"  {f['t']:7.1f}  {f['kind']:<13} {'yes' if f['recovered'] else 'NO':>9} {rs} {len(f['restarts']):>8} "
              f"{f['redone_s']:10.1f}  {f['target']}")
        for r in f["restarts"]:
            print(f"           restart {r['restart']}: {r['cause']['kind']} {r['cause']['role']} machine "
                  f"{r['cause']['machine']}, resumed at {r['resumed_at']} (newest committed {r['last_checkpoint']}) "
                  f"{r['restart_s']:.1f} s after the failure, back-off {r['backoff_s']:.1f} s"
                  + (f"; {r['replaced']}" if r["replaced"] else ""))
    kinds = {k: sum(1 for f in soak.faults if f["kind"] == k) for k in KINDS}
    ok = sum(1 for f in soak.faults if f["recovered"])
    frac = ok / len(soak.faults) if soak.faults else 0.0
    per_kind = {k: [f["recover_s"] for f in soak.faults if f["kind"] == k and f["recovered"]] for k in KINDS}
    print("\n  per kind: " + "; ".join(f"{k} {kinds[k]} ({len(v)} recovered" + (
        f", median {statistics.median(v):.1f} s, max {max(v):.1f} s)" if v else ")") for k, v in per_kind.items()))
    ts = [s["t"] for s in soak.samples]
    growth = rss_growth(soak.samples, min(ts), max(ts)) if ts else {}
    worst = max(growth.items(), key=lambda kv: kv[1]["growth"]) if growth else ("none", {"growth": 0.0})
    print("  RSS, median of the first quarter -> the last: " + "; ".join(
        f"{k} {v['first_mib']:.0f}->{v['last_mib']:.0f} MiB" for k, v in growth.items()))
    shm_left = {}
    for h in range(soak.hosts):
        b, names = soak.shm_bytes(h)
        shm_left[str(h)] = {"bytes": b, "entries": names}
    shm_bytes = sum(v["bytes"] or 0 for v in shm_left.values())
    shm_ok = all(v["bytes"] == 0 and not v["entries"] for v in shm_left.values() if v["bytes"] is not None)
    print("  /dev/shm at the end: " + ", ".join(
        f"host {h} " + ("down" if v["bytes"] is None else "empty" if not v["entries"] else
                        f"{v['bytes']} bytes in {v['entries']}") for h, v in shm_left.items()))
    delta = (got["test_acc"] - base["test_acc"]) if got else float("nan")
    given = ", given by --undisturbed-acc" if a.undisturbed_acc is not None else ""
    print(f"  test acc {got['test_acc'] if got else float('nan'):.4f} (undisturbed {base['test_acc']:.4f}{given}); job "
          f"exit {rc}, {t_end / 60:.1f} min, {len(restarts)} restart(s), {len(soak.faults)} faults: "
          + ", ".join(f"{k} {n}" for k, n in kinds.items()))
    png = plot(out / "soak.png", soak.samples, soak.shm, soak.faults)
    for name, rows in (("rss.csv", soak.samples), ("shm.csv", soak.shm)):
        with open(out / name, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["t"])
            w.writeheader()
            w.writerows(rows)
    result = {"args": {k: v for k, v in vars(a).items()}, "epochs": epochs, "exit": rc, "minutes": t_end / 60,
              "faults": soak.faults,
              "kinds": kinds, "restarts": restarts, "recovered_fraction": frac, "rss_growth": growth,
              "shm_left": shm_left, "test_acc": got["test_acc"] if got else None,
              "undisturbed_test_acc": base["test_acc"], "undisturbed_given": a.undisturbed_acc is not None,
              "plot": str(png) if png else None}
    (out / "soak.json").write_text(json.dumps(result, indent=1, default=str))
    print(f"ratio: soak_test_acc_minus_undisturbed {delta:+.4f} (target within +-0.01{given})")
    print(f"ratio: soak_rss_growth_max {worst[1]['growth']:.3f} ({worst[0]}; target <= 1.10)")
    print(f"ratio: soak_faults_recovered_fraction {frac:.3f} ({ok} of {len(soak.faults)}; target 1)")
    print(f"ratio: soak_shm_bytes_left {shm_bytes} (target 0: /dev/shm {'empty' if shm_ok else 'NOT empty'} "
          f"on every machine)")
    print(f"results: {out} (soak.json, rss.csv, shm.csv{', soak.png' if png else ''}, the launcher logs)")
    return rc == 0 and frac == 1.0 and abs(delta) <= 0.01 and shm_ok and len(soak.faults) > 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=60, help="how long faults come (default 60)")
    ap.add_argument("--fault-every", nargs=2, type=seconds, default=[120.0, 360.0], metavar=("MIN", "MAX"),
                    help="spacing of the faults: 20s, 2m or minutes (default 2m 6m)")
    ap.add_argument("--stop-s", type=float, default=15, help="how long SIGSTOP lasts (default 15 s)")
    ap.add_argument("--loss-s", type=float, default=60, help="how long the 20 %% loss lasts (default 60 s)")
    ap.add_argument("--epochs", type=int, default=0, help="0: sized for --minutes by a 2-epoch run")
    ap.add_argument("--fault-cost-s", type=float, default=30, help="a fault's expected cost, for sizing (30 s)")
    ap.add_argument("--graph", default=GRAPH)
    ap.add_argument("--batch-size", type=int, default=100)
    ap.add_argument("--checkpoint-every", type=int, default=10, help="steps between checkpoints (default 10)")
    ap.add_argument("--max-restarts", type=int, default=1000)
    ap.add_argument("--undisturbed-acc", type=float, metavar="ACC",
                    help="the undisturbed job's test accuracy from an earlier soak of the same job (needs --epochs); "
                         "the undisturbed job is then not run")
    ap.add_argument("--sample-s", type=float, default=10, help="RSS and /dev/shm sampling period (default 10 s)")
    ap.add_argument("--seed", type=int, default=7, help="the job's seed and the faults' (default 7)")
    ap.add_argument("--name", default="soak", help="the emulated cluster's name")
    ap.add_argument("--build", default=str(REPO / "build"))
    ap.add_argument("--out", help="results directory (default bench-results/soak-<time>)")
    a = ap.parse_args(argv)
    # SIGTERM or SIGHUP (its terminal gone) end the soak through its clean-up:
    # the job's process group killed, the cluster taken down (atexit, finally).
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: sys.exit(128 + signum))
    if os.geteuid() != 0:
        raise SoakError("root is needed (the cluster emulator's network namespaces)")
    if a.undisturbed_acc is not None and a.epochs <= 0:
        raise SoakError("--undisturbed-acc needs --epochs: the earlier soak's epoch count (its soak.json's \"epochs\")")
    if not 0 < a.fault_every[0] <= a.fault_every[1]:
        raise SoakError(f"--fault-every {a.fault_every}: expected 0 < MIN <= MAX")
    os.environ["DGLD_BUILD_ROOT"] = a.build = os.path.abspath(a.build)
    import emu_util  # after DGLD_BUILD_ROOT: it reads it once
    out = Path(a.out or REPO / "bench-results" / time.strftime("soak-%Y%m%d-%H%M%S")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    c = emu_util.Cluster(a.name, 5, "10g")
    atexit.register(emu_util.emu, "down", "--name", a.name, check=False)
    try:
        c.partition(a.graph, 4, spares=1)
        print(f"== soak: 4 emulated machines + 1 spare (10g), {a.graph}, a checkpoint every {a.checkpoint_every} "
              f"steps on each machine's own disk, 1 replica; faults every {a.fault_every[0]:g}-{a.fault_every[1]:g} s "
              f"for {a.minutes:g} min", flush=True)
        epochs = a.epochs or size_job(a, c, out)
        log = out / "soak.log"
        log.touch()
        t0 = time.time()
        p = launch(c, a, job_name(a, "d"), epochs, log)
        soak = Soak(a, c)
        tail = LogTail(str(log), t0)
        tail.start()
        sampler = threading.Thread(target=soak.sampler, args=(t0, p.pid), daemon=True)
        sampler.start()
        try:
            rc = soak.drive(p, tail, t0)
        finally:
            soak.sample_stop.set()
            sampler.join()
            tail.stop = True
            tail.join()
        t_end = time.time() - t0
        rpath = c.src / "dgld-logs" / f"{job_name(a, 'd')}-restarts.json"
        restarts = json.loads(rpath.read_text()) if rpath.exists() else []
        got = json.loads((c.src / f"metrics-{job_name(a, 'd')}.json").read_text()) if rc == 0 else None
        for h in range(soak.hosts):  # the trainers' logs, for the record
            src = Path(c.status["machines"][h]["dir"]) / "dgld-logs"
            if src.is_dir():
                shutil.copytree(src, out / f"host{h}-logs", dirs_exist_ok=True)
        if (c.src / "dgld-logs").is_dir():
            shutil.copytree(c.src / "dgld-logs", out / "launcher-logs", dirs_exist_ok=True)
        t1 = time.time()  # the undisturbed job after the soak: the faults' figures come first
        if a.undisturbed_acc is not None:
            base = {"test_acc": a.undisturbed_acc}
            print(f"  undisturbed: not run; test acc {a.undisturbed_acc:.4f} given (--undisturbed-acc)", flush=True)
        else:
            base = finished(c, launch(c, a, job_name(a, "u"), epochs, out / "undisturbed.log"), job_name(a, "u"),
                            out / "undisturbed.log", a.minutes * 60 * 3 + 600)
            print(f"  undisturbed: {epochs} epochs in {(time.time() - t1) / 60:.1f} min, test acc "
                  f"{base['test_acc']:.4f}", flush=True)
        ok = report(a, soak, tail, restarts, t_end, epochs, base, got, rc, out)
    finally:
        emu_util.emu("down", "--name", a.name, check=False)
    return 0 if ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except SoakError as e:
        sys.exit(f"soak.py: {e}")
