"""dgld.distributed.Checkpointer under dgl-launch --max-restarts (2 machines
x 1 trainer): a DGL-style script with learnable node embeddings
(DistEmbedding + SparseAdam) and a GraphSAGE model whose rank 1 kills
itself (SIGKILL) mid-epoch. dgl-launch restarts the job, the script resumes
from the last step checkpoint, and the embedding rows and the model at the
end equal those of an undisturbed run of the same seed, bit for bit. Then
rank 0's newest checkpoint is altered on disk: it is refused with its path
and reason, and its replica on machine 1 is used; with the replica altered
too, the one before it is used, and the result is again the same. Last, the
checkpoint directory of each machine on a path of its own, and machine 1's
wiped: its trainer resumes from the replica machine 0 holds."""

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch

from conftest import BUILD, binary, free_port_block, generate_parts

GRAPH = "sbm:nodes=3000,avg_degree=8,classes=4,feat_dim=8,seed=3"

SCRIPT = Path(__file__).with_name("ckpt_train.py")


@pytest.fixture(scope="module")
def job_dir():
    with tempfile.TemporaryDirectory(prefix="dgld-pytest-ckpt-") as d:
        d = Path(d)
        generate_parts(d / "parts", GRAPH)
        (d / "train.py").write_text(SCRIPT.read_text())
        yield d


def launch(d, ckpt, out, extra=(), launch_flags=()):
    base = free_port_block(40)
    (d / "ip_config.txt").write_text(f"127.0.0.1 {base}\n127.0.0.1 {base + 20}\n")
    cmd = [binary("launcher/launch/dgl-launch"), "--local", "--no-copy", "--workspace", str(d), "--ip-config",
           "ip_config.txt", "--part-config", "parts/g.json", "--num-trainers", "1", *launch_flags,
           "--extra-envs", f"PYTHONPATH={BUILD / 'python'}", "--", sys.executable, "train.py", "--ckpt", ckpt,
           "--out", out, *extra]
    r = subprocess.run(cmd, cwd=d, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240)
    assert r.returncode == 0, r.stdout[-6000:]
    return torch.load(d / out), r.stdout


def assert_same(a, b):
    assert torch.equal(a["emb"], b["emb"]), (a["emb"] - b["emb"]).abs().max()
    for k in a["model"]:
        assert torch.equal(a["model"][k], b["model"][k]), k


def test_a_killed_trainer_resumes_mid_epoch_with_the_same_embedding_rows(job_dir):
    d = job_dir
    undisturbed, out = launch(d, "ckpt-a", "a.pt")
    steps = int(re.search(r"rank 0 starts at epoch 0 step 0 of (\d+) steps", out).group(1))
    assert steps >= 9, out[-3000:]
    # Rank 1 dies before step 7 of epoch 1: the last checkpoint every
    # trainer holds is the one of step 6 (every 3 steps), from which the job
    # resumes mid-epoch.
    resumed, out = launch(d, "ckpt-b", "b.pt", ["--crash-at", str(steps + 7)],
                          ["--max-restarts", "1", "--restart-backoff-s", "0.2"])
    e, s = 1, 6
    assert f"rank 1 starts at epoch {e} step {s} of" in out, out[-4000:]
    # dgl-launch names the failure, restarts, and follows the script's
    # checkpoints and its resumption (the dgld-progress lines of rank 0).
    assert re.search(r"restart 1 of at most 1 in .* after: .*machine 1", out), out[-4000:]
    assert f"trainers resumed from the checkpoint of epoch {e} step {s}" in out, out[-4000:]
    assert_same(undisturbed, resumed)

    # Rank 0's newest checkpoint (the end of the last epoch) altered on disk:
    # refused with its path and reason; its copy on machine 1 (replicas=1)
    # is sent back, verified, and the job resumes there.
    def alter(path):
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))

    alter(d / "ckpt-b" / "rank-0" / "ckpt-2-0.pt")
    again, out = launch(d, "ckpt-b", "c.pt")
    assert re.search(r"refused checkpoint ckpt-b/rank-0/ckpt-2-0\.pt: CRC-32 \w+, but ckpt-2-0\.json records \w+ "
                     r"\(the file was altered\)", out), out[-4000:]
    assert "fetched from rank 1's replica (machine 1)" in out, out[-4000:]
    assert "rank 0 starts at epoch 2 step 0 of" in out, out[-4000:]
    assert_same(undisturbed, again)
    # The replica altered too: every trainer goes back to the position
    # before it, finishes the epoch, and ends where the others did.
    alter(d / "ckpt-b" / "rank-0" / "ckpt-2-0.pt")
    alter(d / "ckpt-b" / "replica" / "rank-0" / "ckpt-2-0.pt")
    again, out = launch(d, "ckpt-b", "c.pt")
    assert re.search(r"refused checkpoint ckpt-b/replica/rank-0/ckpt-2-0\.pt: CRC-32", out), out[-4000:]
    last = (steps - 1) // 3 * 3
    assert f"starts at epoch 1 step {last} of" in out, out[-4000:]
    assert_same(undisturbed, again)


def test_a_machine_whose_checkpoints_are_lost_resumes_from_the_replica_on_another(job_dir):
    d = job_dir
    reference, _ = launch(d, "ckpt-r3", "r3.pt", ["--epochs", "3"])
    # Each machine's checkpoints on a path of its own; machine 1's lost after two epochs.
    launch(d, "ckpt-m/m{machine}", "m2.pt")
    assert (d / "ckpt-m" / "m0" / "replica" / "rank-1" / "ckpt-2-0.json").exists()
    import shutil
    shutil.rmtree(d / "ckpt-m" / "m1")
    resumed, out = launch(d, "ckpt-m/m{machine}", "m3.pt", ["--epochs", "3"])
    assert "fetched from rank 0's replica (machine 0)" in out, out[-4000:]
    assert "rank 1 starts at epoch 2 step 0 of" in out, out[-4000:]
    assert (d / "ckpt-m" / "m1" / "rank-1" / "ckpt-3-0.json").exists()
    assert (d / "ckpt-m" / "m1" / "replica" / "rank-0" / "ckpt-3-0.json").exists()
    assert_same(reference, resumed)


def test_a_checkpoint_of_another_job_is_refused_by_name(job_dir):
    d = job_dir
    ckpt = d / "ckpt-other" / "rank-0"
    ckpt.mkdir(parents=True)
    # The same positions as a real run, sealed by the store, but written for a
    # job with another embedding.
    from dgld import _C
    for rank in (0, 1):
        store = _C.CheckpointStore(str(d / "ckpt-other"), rank)
        store.prepare()
        tmp = store.temp_payload_path((1, 0))
        torch.save({}, tmp)
        store.seal((1, 0), tmp, '{"format": "dgld-python-checkpoint-1", "num_trainers": 2, '
                   '"embeddings": {"node_emb": [3000, 16]}, "loaders": 1}')
    base = free_port_block(40)
    (d / "ip_config.txt").write_text(f"127.0.0.1 {base}\n127.0.0.1 {base + 20}\n")
    cmd = [binary("launcher/launch/dgl-launch"), "--local", "--no-copy", "--workspace", str(d), "--ip-config",
           "ip_config.txt", "--part-config", "parts/g.json", "--num-trainers", "1", "--extra-envs",
           f"PYTHONPATH={BUILD / 'python'}", "--", sys.executable, "train.py", "--ckpt", "ckpt-other", "--out", "x.pt"]
    r = subprocess.run(cmd, cwd=d, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240)
    assert r.returncode != 0
    assert re.search(r"ckpt-1-0\.json: the checkpoint has embeddings = .*16.*, but this run has .*8", r.stdout), \
        r.stdout[-4000:]
