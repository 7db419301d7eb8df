"""Checkpoints that survive their machine without shared storage
(docs/reliability.md, "Storage"), on the cluster emulator: 3 machines and a
spare, trainer-host checkpointing every few steps into the workspace, which
is each machine's own directory (no shared storage), with one replica per
checkpoint (--checkpoint-replicas 1, the default). Machine 2 dies with its
sshd mid-epoch; the spare takes its place with an empty disk, its trainer
gets its files from the replica machine 0 holds, and the job ends by itself
with the test accuracy of an undisturbed run of the same seed. The same for
link prediction (--task link, mlp scorer): the same test ROC-AUC and MRR.

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


# Per task: dgl-partition's flags, trainer-host's flags replacing
# trainer_args' of the same name, and the final figures compared.
TASKS = {
    "node": ([], {}, lambda m: {"test acc": m["test_acc"]}),
    "link": (["--link-split", "0.85,0.05,0.1", "--seed", "3"],
             {"--task": "link", "--model": "gcn", "--scorer": "mlp", "--num-negatives": "3", "--batch-size": "1000",
              "--fan-out": "5,10", "--num-epochs": "3"},
             lambda m: {"test ROC-AUC": m["test"]["roc_auc"], "test MRR": m["test"]["mrr"]}),
}


def with_flags(args, flags):
    args = list(args)
    for flag, value in flags.items():
        if flag in args:
            args[args.index(flag) + 1] = value
        else:
            args += [flag, value]
    return args


@pytest.mark.parametrize("task", TASKS)
def test_a_machine_lost_with_its_disk_resumes_from_the_replica_on_another_machine(tmp_path, task):
    partition_flags, flags, figures = TASKS[task]
    epochs = int(with_flags(trainer_args(""), flags)[trainer_args("").index("--num-epochs") + 1])
    c = Cluster("t-rp", 4, "10g")
    try:
        c.partition(GRAPH, 3, spares=1, flags=partition_flags)
        launch = ["--num-trainers", "1", "--max-restarts", "2", "--restart-backoff-s", "0.5"]
        # The undisturbed run, its checkpoints on each machine's own disk too.
        log0 = tmp_path / "undisturbed.log"
        p = c.launch(launch + ["--job-id", "rp"], with_flags(trainer_args("ckpt-a"), flags), log0)
        assert p.wait(timeout=150) == 0, log0.read_text()[-4000:]
        reference = json.loads((c.src / "metrics.json").read_text())
        machine_dirs = [Path(m["dir"]) for m in c.status["machines"]]
        # Each machine holds its own rank's files and the replica of the rank before it.
        for m in range(3):
            assert (machine_dirs[m] / "ckpt-a" / f"rank-{m}").is_dir(), m
            assert (machine_dirs[m] / "ckpt-a" / "replica" / f"rank-{(m + 2) % 3}").is_dir(), m
        assert not (machine_dirs[0] / "ckpt-a" / "rank-1").exists(), "the workspace is shared: not this test's case"

        log = tmp_path / "disturbed.log"
        p = c.launch(launch + ["--job-id", "rp2"], with_flags(trainer_args("ckpt-b"), flags), log)
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
        assert len(metrics["epochs"]) == epochs and metrics["resumed_at"] is not None
        got, want = figures(metrics), figures(reference)
        for k in want:
            assert abs(got[k] - want[k]) <= 0.01, (k, got[k], want[k])
        ck = reference["checkpoints"]
        said = ", ".join(f"{k} {got[k]:.4f} (undisturbed {want[k]:.4f})" for k in want)
        print(f"\n{task}: trainers resumed {report[0]['restart_s']:.1f} s after machine 2 was lost; {said}; "
              f"per checkpoint (rank 0, "
              f"{ck['count']} checkpoints): {ck['time_s'] / ck['count']:.3f} s in all, of which replication "
              f"{ck['replica_time_s'] / ck['count']:.3f} s, {ck['replica_bytes_sent'] // ck['count']} bytes sent")
        for i in (0, 1, 3):
            assert c.job_processes(i) == [], f"machine {i} still runs processes of the job"
    finally:
        c.down_and_check()
