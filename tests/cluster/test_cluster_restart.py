"""Training that survives a lost machine (docs/reliability.md), on the cluster
emulator: 3 machines and a spare, trainer-host checkpointing every few steps
into a directory every machine shares. dgl-launch --max-restarts 3 carries
the job through a trainer killed with kill -9 mid-epoch, then a machine that
dies with its sshd (the spare takes its place under the same machine id); it
ends by itself with the test accuracy of an undisturbed run of the same seed.

Root only (network namespaces): skipped elsewhere.
"""
import json
import os
import signal
import time

import pytest

from emu_util import BUILD, Cluster, emu

if os.geteuid() != 0:
    pytest.skip("the cluster emulator needs root (network namespaces); CI runs as root", allow_module_level=True)

GRAPH = "sbm:nodes=30000,avg_degree=10,classes=8,feat_dim=32,seed=5"


def trainer_args(ckpt):
    return ["--num-epochs", "5", "--batch-size", "50", "--fan-out", "10,25", "--num-hidden", "32", "--lr", "0.01",
            "--eval-every", "0", "--no-progress", "--seed", "3", "--collective-timeout-s", "30",
            "--checkpoint-dir", ckpt, "--checkpoint-every-steps", "10", "--metrics-out", "metrics.json"]


def wait_log(log, text, p, timeout, after=0):
    """Waits until `text` appears in `log` past offset `after`; its end offset."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        body = log.read_text()
        at = body.find(text, after)
        if at >= 0:
            return at + len(text)
        if p.poll() is not None:
            pytest.fail(f"the launcher ended ({p.returncode}) before '{text}':\n{body[-4000:]}")
        time.sleep(0.1)
    pytest.fail(f"no '{text}' within {timeout} s:\n{log.read_text()[-4000:]}")


def trainer_pid(c, machine):
    for pid in c.job_processes(machine):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if cmd and cmd[0].endswith(b"trainer-host"):
            return pid
    return None


def test_a_killed_trainer_and_a_lost_machine_cost_two_restarts_and_no_accuracy(tmp_path):
    c = Cluster("t-rs", 4, "10g")
    try:
        c.partition(GRAPH, 3, spares=1)
        shared = c.status["shared"]
        launch = ["--num-trainers", "1", "--job-id", "rs"]
        # The undisturbed run.
        log0 = tmp_path / "undisturbed.log"
        p = c.launch(launch + ["--max-restarts", "3"], trainer_args(f"{shared}/ckpt-a"), log0)
        assert p.wait(timeout=120) == 0, log0.read_text()[-4000:]
        reference = json.loads((c.src / "metrics.json").read_text())

        # The same job, disturbed twice.
        log = tmp_path / "disturbed.log"
        p = c.launch(launch[:-1] + ["rs2", "--max-restarts", "3", "--restart-backoff-s", "0.5"],
                     trainer_args(f"{shared}/ckpt-b"), log)
        at = wait_log(log, "epoch 0 step 20 committed by every trainer", p, 90)
        pid = trainer_pid(c, 1)
        assert pid, "no trainer-host on machine 1"
        os.kill(pid, signal.SIGKILL)
        at = wait_log(log, "trainers resumed from the checkpoint of", p, 90, at)
        at = wait_log(log, "committed by every trainer", p, 90, at)
        emu("kill", "--name", c.name, "2")  # every process of machine 2, its sshd too
        rc = p.wait(timeout=150)
        text = log.read_text()
        assert rc == 0, text[-5000:]
        errors = [l for l in text.splitlines() if " error launcher" in l]
        # Each failure is named: the trainer with its signal, then the machine.
        assert any("(machine 1): trainer 1 (pid" in l and "was killed by SIGKILL" in l for l in errors), text[-5000:]
        assert any("(machine 2" in l and "lost the connection to its machine agent" in l for l in errors), errors
        spare = c.status["machines"][3]["address"]
        assert f"spare {spare}:30050 (ip_config.txt line 4) took the place of machine 2" in text, text[-5000:]
        assert "after 2 restart(s)" in text
        report = json.loads((c.src / "dgld-logs" / "rs2-restarts.json").read_text())
        assert [r["cause"]["kind"] for r in report] == ["process", "lost_agent"], report
        for r in report:
            assert r["resumed_at"] is not None and r["restart_s"] > 0, r
        print("\nrestart costs: " + "; ".join(
            f"restart {r['restart']}: trainers resumed {r['restart_s']:.1f} s after the failure (teardown "
            f"{r['teardown_s']:.1f} s, back-off {r['backoff_s']:.1f} s), {r['lost_work_s']:.1f} s of training redone"
            for r in report))
        metrics = json.loads((c.src / "metrics.json").read_text())
        assert len(metrics["epochs"]) == 5 and metrics["resumed_at"] is not None
        assert abs(metrics["test_acc"] - reference["test_acc"]) <= 0.01, (metrics["test_acc"], reference["test_acc"])
        for i in (0, 1, 3):
            assert c.job_processes(i) == [], f"machine {i} still runs processes of the job"
    finally:
        c.down_and_check()
