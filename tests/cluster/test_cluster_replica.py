"""Checkpoints that survive their machine without shared storage
(docs/reliability.md, "Storage"), on the cluster emulator: 3 machines and a
spare, trainer-host checkpointing every few steps into the workspace, which
is each machine's own directory (no shared storage), with one replica per
checkpoint (--checkpoint-replicas 1, the default). Machine 2 dies with its
sshd mid-epoch; the spare takes its place with an empty disk, its trainer
gets its files from the replica machine 0 holds, and the job ends by itself
with the test accuracy of an undisturbed run of the same seed.

Root only (network namespaces): skipped elsewhere.
"""
import json
import os
from pathlib import Path

import pytest

from emu_util import Cluster, emu
from test_cluster_restart import GRAPH, trainer_args, wait_log

if os.geteuid() != 0:
    pytest.skip("the cluster emulator needs root (network namespaces); CI runs as root", allow_module_level=True)


def test_a_machine_lost_with_its_disk_resumes_from_the_replica_on_another_machine(tmp_path):
    c = Cluster("t-rp", 4, "10g")
    try:
        c.partition(GRAPH, 3, spares=1)
        launch = ["--num-trainers", "1", "--max-restarts", "2", "--restart-backoff-s", "0.5"]
        # The undisturbed run, its checkpoints on each machine's own disk too.
        log0 = tmp_path / "undisturbed.log"
        p = c.launch(launch + ["--job-id", "rp"], trainer_args("ckpt-a"), log0)
        assert p.wait(timeout=150) == 0, log0.read_text()[-4000:]
        reference = json.loads((c.src / "metrics.json").read_text())
        machine_dirs = [Path(m["dir"]) for m in c.status["machines"]]
        # Each machine holds its own rank's files and the replica of the rank before it.
        for m in range(3):
            assert (machine_dirs[m] / "ckpt-a" / f"rank-{m}").is_dir(), m
            assert (machine_dirs[m] / "ckpt-a" / "replica" / f"rank-{(m + 2) % 3}").is_dir(), m
        assert not (machine_dirs[0] / "ckpt-a" / "rank-1").exists(), "the workspace is shared: not this test's case"

        log = tmp_path / "disturbed.log"
        p = c.launch(launch + ["--job-id", "rp2"], trainer_args("ckpt-b"), log)
        wait_log(log, "epoch 0 step 20 committed by every trainer", p, 120)
        emu("kill", "--name", c.name, "2")  # every process of machine 2, its sshd too
        rc = p.wait(timeout=180)
        text = log.read_text()
        assert rc == 0, text[-5000:]
        spare = c.status["machines"][3]["address"]
        assert f"spare {spare}:30050 (ip_config.txt line 4) took the place of machine 2" in text, text[-5000:]
        report = json.loads((c.src / "dgld-logs" / "rp2-restarts.json").read_text())
        assert [r["cause"]["kind"] for r in report] == ["lost_agent"], report
        assert report[0]["resumed_at"] is not None, report
        # The spare's trainer had no files of its own: it got them from machine 0.
        logs = text + "".join(f.read_text() for f in machine_dirs[3].glob("dgld-logs/rp2-r*/trainer-2.log"))
        assert "fetched from rank 0's replica (machine 0)" in logs, logs[-5000:]
        assert (machine_dirs[3] / "ckpt-b" / "rank-2").is_dir()
        metrics = json.loads((c.src / "metrics.json").read_text())
        assert len(metrics["epochs"]) == 5 and metrics["resumed_at"] is not None
        assert abs(metrics["test_acc"] - reference["test_acc"]) <= 0.01, (metrics["test_acc"], reference["test_acc"])
        ck = reference["checkpoints"]
        print(f"\nrestart: trainers resumed {report[0]['restart_s']:.1f} s after machine 2 was lost; test acc "
              f"{metrics['test_acc']:.4f} (undisturbed {reference['test_acc']:.4f}); per checkpoint (rank 0, "
              f"{ck['count']} checkpoints): {ck['time_s'] / ck['count']:.3f} s in all, of which replication "
              f"{ck['replica_time_s'] / ck['count']:.3f} s, {ck['replica_bytes_sent'] // ck['count']} bytes sent")
        for i in (0, 1, 3):
            assert c.job_processes(i) == [], f"machine {i} still runs processes of the job"
    finally:
        c.down_and_check()
