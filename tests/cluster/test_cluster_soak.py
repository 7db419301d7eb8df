"""The chaos soak, 4 minutes of it (scripts/bench/soak.py; docs/reliability.md,
"Chaos soak"): one job on 4 emulated machines and a spare, checkpoints on
each machine's own disk with one replica, a fault every 10-20 s (every kind
of scripts/bench/soak.py in turn: kill -9 of a trainer, a sampler-worker, a
graph-server, a whole machine with its link down, SIGSTOP past the heartbeat
deadline, 20 % loss on a link). Every fault recovered, the undisturbed job's
test accuracy, no memory creeping up, /dev/shm empty at the end.

Root only (network namespaces): skipped elsewhere.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from emu_util import BUILD, REPO

if os.geteuid() != 0:
    pytest.skip("the cluster emulator needs root (network namespaces); CI runs as root", allow_module_level=True)


def test_minutes_of_faults_are_all_recovered_and_leave_nothing(tmp_path):
    out = tmp_path / "soak"
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "bench" / "soak.py"), "--minutes", "4",
                        "--fault-every", "10s", "20s", "--loss-s", "15", "--stop-s", "15", "--sample-s", "5",
                        "--name", "t-sk", "--build", str(BUILD), "--out", str(out)],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1000)
    print(r.stdout)
    result = json.loads((out / "soak.json").read_text())
    assert result["exit"] == 0, r.stdout[-5000:]
    faults = result["faults"]
    # Every kind at least once: they come in turn, in a random order each round.
    assert len(faults) >= 6 and all(n >= 1 for n in result["kinds"].values()), result["kinds"]
    assert [f for f in faults if not f["recovered"]] == [], r.stdout[-5000:]
    # The switch dropped frames of the lossy link while the loss lasted.
    assert all(f["frames_lost"] > 0 for f in faults if f["kind"] == "loss"), faults
    assert abs(result["test_acc"] - result["undisturbed_test_acc"]) <= 0.01, r.stdout[-3000:]
    # A lost machine came back as the spare: the launcher took the spare, and
    # the restart report says which.
    assert any(rs["replaced"] for f in faults if f["kind"] == "kill_machine" for rs in f["restarts"]), r.stdout
    # Memory: the median of the last quarter within 20 % of the first's (the
    # hour-long run's target is 10 %; four minutes are noisier).
    growth = {k: v["growth"] for k, v in result["rss_growth"].items()}
    assert growth and max(growth.values()) <= 1.2, growth
    left = {h: v for h, v in result["shm_left"].items() if v["bytes"] is not None and v["entries"]}
    assert left == {}, left
    assert r.returncode == 0, r.stdout[-3000:]
