"""The cluster emulator (scripts/cluster_emu.py) and dgld on it: machines in
network namespaces joined by dgld-switch over shaped links, each with its
own sshd, /dev/shm and workspace; dgl-launch reaches them over ssh as on a
cluster. Every packet stays between the emulator's own namespaces.

Root only (network namespaces, TAP devices, mounts): skipped elsewhere.
Each test takes its cluster down by itself and checks that nothing is left:
namespaces, processes, TAP devices, the state directory.
"""
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from emu_util import BUILD, Cluster, emu

if os.geteuid() != 0:
    pytest.skip("the cluster emulator needs root (network namespaces); CI runs as root", allow_module_level=True)


def test_emulator_links_give_what_the_preset_names_and_down_leaves_nothing():
    # The 1g preset's delay with its rate lowered to 100 Mbit/s. This machine
    # carries 1g (0.988 Gbit/s measured), but a CI machine measured only
    # 175 Mbit/s through the 1g preset: the switch shares two cores with the
    # probe's sender and receiver there. At 100 Mbit/s the switch has ten
    # times less to do, so a shortfall is the shaper's, not the machine's.
    c = Cluster("t-links", 2, "1g", "--rate", "100m")
    try:
        assert len(c.status["machines"]) == 2 and c.status["switch_running"]
        m = json.loads(emu("measure", "--name", c.name, "--json", "--seconds", "1.5"))
        assert m["target_rate_bps"] == 100e6, m
        # The rate a TCP stream gets through the shaped link.
        assert 0.85 * 100e6 <= m["rate_bps"] <= 1.05 * 100e6, m
        # 0.1 ms one way on top of this machine's own round trip (a loaded
        # 2-core machine adds tens of microseconds).
        assert 0.1 <= m["one_way_delay_ms"] <= 0.5, m
        assert m["loss"] <= 0.002, m
        # Each machine has its own /dev/shm and workspace behind the same path.
        emu("exec", "--name", c.name, "0", "--", "touch", "/dev/shm/dgld-emu-probe", c.status["workspace"] + "/probe")
        assert "dgld-emu-probe" not in c.shm_entries(1)
        assert not (Path(c.status["machines"][1]["dir"]) / "probe").exists()
        assert (Path(c.status["machines"][0]["dir"]) / "probe").exists()
    finally:
        c.down_and_check()
    assert not Path("/dev/shm/dgld-emu-probe").exists()


def test_lossy_preset_drops_one_percent():
    c = Cluster("t-lossy", 2, "lossy")
    try:
        m = json.loads(emu("measure", "--name", c.name, "--json", "--seconds", "0.5"))
        # 20000 datagrams at 1 %: 200 expected, a standard deviation of 14.
        assert 0.006 <= m["loss"] <= 0.014, m
    finally:
        c.down_and_check()


def test_four_machines_train_over_ssh_account_their_traffic_and_a_killed_machine_ends_the_job(tmp_path):
    c = Cluster("t-n4", 4, "10g")
    try:
        c.partition("sbm:nodes=20000,avg_degree=10,classes=8,feat_dim=32,seed=7", 4)
        common = ["--num-epochs", "3", "--batch-size", "200", "--fan-out", "5,10", "--num-hidden", "16", "--lr", "0.01",
                  "--eval-every", "0", "--no-progress", "--metrics-out", "metrics.json"]
        log = tmp_path / "train.log"
        p = c.launch(["--num-trainers", "1", "--num-samplers", "1"], common, log)
        assert p.wait(timeout=150) == 0, log.read_text()[-4000:]
        metrics = json.loads((c.src / "metrics.json").read_text())
        assert metrics["num_trainers"] == 4 and len(metrics["epochs"]) == 3
        # It learned: three epochs leave the model near chance (8 classes: 0.125;
        # the loss 5.3 -> 3.2), its test accuracy 0.18-0.27 over seeds 1-5 (0.2
        # was once the bound here, and seeds 0, 2 and 5 fall below it).
        losses = [e["loss"] for e in metrics["epochs"]]
        assert losses[2] < losses[1] < losses[0], losses
        assert metrics["test_acc"] > 0.15, metrics["test_acc"]
        for e in metrics["epochs"]:
            k = e["cluster"]
            assert k["num_machines"] == 4 and k["seeds"] > 0 and k["round_trips"] > 0
            assert 0 < k["remote_row_share"] < 1 and k["bytes_per_seed"] > 0
            links = k["link_bytes"]
            assert len(links) == 16 and all(links[i * 4 + i] == 0 for i in range(4))
            assert sum(links) == k["network_bytes"], "the link matrix adds up to the epoch's bytes"
        # The per-link traffic as dgld-stats shows it.
        stats = subprocess.run([str(BUILD / "launcher" / "stats" / "dgld-stats"), "--metrics",
                                str(c.src / "metrics.json")], stdout=subprocess.PIPE, text=True, check=True).stdout
        assert "bytes between machines" in stats and "RTs/batch" in stats
        for i in range(4):
            assert c.job_processes(i) == [], f"machine {i} still runs processes of the job"
            assert [e for e in c.shm_entries(i) if e.startswith("dgld")] == []

        # kill -9 of every process of machine 2 in the middle of training.
        log2 = tmp_path / "kill.log"
        p = c.launch(["--num-trainers", "1", "--num-samplers", "1"],
                     common[:1] + ["50"] + common[2:] + ["--collective-timeout-s", "60"], log2)
        deadline = time.time() + 90
        while "Epoch 00001" not in log2.read_text() and time.time() < deadline and p.poll() is None:
            time.sleep(0.2)
        assert p.poll() is None, log2.read_text()[-3000:]
        killed_at = time.time()
        for pid in c.job_processes(2):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        rc = p.wait(timeout=60)
        took = time.time() - killed_at
        text = log2.read_text()
        assert rc != 0
        # Within the heartbeat deadline (10 s), naming the machine.
        assert took < 15, f"the job took {took:.1f} s to end"
        failure = [l for l in text.splitlines() if "error launcher" in l]
        assert failure and any("machine 2" in l for l in failure), text[-3000:]
        for i in range(4):
            assert c.job_processes(i) == [], f"machine {i} still runs processes of the job:\n{text[-2000:]}"
    finally:
        c.down_and_check()
