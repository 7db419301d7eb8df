"""init_process_group's env:// rendezvous in a dgld job goes through dgld's
authenticated store (dgld/distributed/rendezvous.py): two trainer processes
form their Gloo group through it and allreduce; meanwhile connections
without the job's secret (another secret, random bytes, an HTTP request) are
refused with a log line naming the peer, and the job goes on."""

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import BUILD, free_port_block

TRAINER = """
import os, sys, time, torch
import dgld.distributed
import torch.distributed as dist
dist.init_process_group(backend="gloo")
store = dist.distributed_c10d._get_default_store()
print("STORE", type(store).__name__, flush=True)
from dgld.distributed import rendezvous
print("PAIRS PROVED", rendezvous._state["stores"][-1].check([dgld._C.pair_proof_session_key]), flush=True)
go = os.environ["GO_FILE"]
with open(os.environ["READY_FILE"] + os.environ["RANK"], "w"):
    pass
while not os.path.exists(go):
    time.sleep(0.05)
t = torch.ones(2) * (dist.get_rank() + 1)
dist.all_reduce(t)
dist.barrier()
print("SUM", t.tolist(), flush=True)
"""


def secret_file(d, text):
    p = Path(d) / f"secret-{text[:4]}"
    p.write_text(text * 4)
    p.chmod(0o600)
    return str(p)


def test_env_rendezvous_is_dgld_store_and_refuses_strangers():
    import dgld

    with tempfile.TemporaryDirectory(prefix="dgld-pytest-rdv-") as d:
        secret = secret_file(d, "0123456789abcdef")
        port = free_port_block(2)
        procs = []
        for rank in range(2):
            env = dict(os.environ, PYTHONPATH=str(BUILD / "python"), DGLD_JOB_ID=f"rdv-{os.getpid()}",
                       DGLD_SECRET_FILE=secret, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                       WORLD_SIZE="2", GO_FILE=f"{d}/go", READY_FILE=f"{d}/ready", PYTHONUNBUFFERED="1")
            procs.append(subprocess.Popen([sys.executable, "-c", TRAINER], env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True))
        try:
            deadline = time.time() + 60
            while not all(os.path.exists(f"{d}/ready{r}") for r in range(2)):
                assert all(p.poll() is None for p in procs), [p.communicate()[0] for p in procs]
                assert time.time() < deadline, "the trainers did not form their group within 60 s"
                time.sleep(0.05)
            # Strangers at the rendezvous port while the job runs.
            with pytest.raises(dgld.DGLError):
                dgld._C.RendezvousClient.connect("127.0.0.1", port, secret_file(d, "fedcba9876543210"), 3.0)
            for junk in (os.urandom(65536), b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", b"\xff\xff\xff\x7f" * 8):
                with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                    try:
                        s.sendall(junk)
                        s.settimeout(5)
                        while s.recv(4096):
                            pass  # the store closes the connection
                    except (ConnectionResetError, BrokenPipeError):
                        pass
            Path(f"{d}/go").touch()
            outs = [p.communicate(timeout=60)[0] for p in procs]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.communicate()
        for p, out in zip(procs, outs):
            assert p.returncode == 0, out
            assert "STORE PrefixStore" in out or "STORE RendezvousStore" in out, out
            assert "SUM [3.0, 3.0]" in out, out
            assert "PAIRS PROVED True" in out, out
        # Rank 0 serves the store: each stranger is named in its log.
        refused = [line for line in outs[0].splitlines()
                   if "127.0.0.1:" in line and ("refused" in line or "bad frame magic" in line)]
        assert len(refused) >= 4, outs[0]  # another secret, random bytes, HTTP, a bogus length


def test_outside_a_dgld_job_torch_rendezvous_is_unchanged():
    port = free_port_block(2)
    code = ("import dgld.distributed, torch.distributed as dist\n"
            "dist.init_process_group(backend='gloo')\n"
            "print('STORE', type(dist.distributed_c10d._get_default_store().underlying_store).__name__)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DGLD_")}
    env.update(PYTHONPATH=str(BUILD / "python"), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0",
               WORLD_SIZE="1")
    r = subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stdout
    assert "STORE TCPStore" in r.stdout, r.stdout


def test_pair_proofs_bind_the_secret_the_session_and_both_ranks():
    import dgld

    with tempfile.TemporaryDirectory(prefix="dgld-pytest-proof-") as d:
        a, b = secret_file(d, "0123456789abcdef"), secret_file(d, "fedcba9876543210")
        s1, s2 = os.urandom(32), os.urandom(32)
        proof = dgld._C.pair_proof(a, s1, 0, 1)
        assert len(proof) == 32
        assert dgld._C.pair_proof_matches(a, s1, 0, 1, proof)
        assert not dgld._C.pair_proof_matches(b, s1, 0, 1, proof)  # another job's secret
        assert not dgld._C.pair_proof_matches(a, s2, 0, 1, proof)  # replayed from another session
        assert not dgld._C.pair_proof_matches(a, s1, 1, 0, proof)  # the other direction
        assert not dgld._C.pair_proof_matches(a, s1, 0, 1, os.urandom(32))
        with pytest.raises(dgld.DGLError):
            dgld._C.pair_proof("", s1, 0, 1)
