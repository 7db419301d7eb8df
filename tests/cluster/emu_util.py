"""What the emulator's tests share: the cluster_emu.py command, and a Cluster
brought up for one test (its partitioned graph, dgl-launch on it, what runs
on each machine) and taken down with a check that nothing is left."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("DGLD_BUILD_ROOT", REPO / "build"))
EMU = [sys.executable, str(REPO / "scripts" / "cluster_emu.py")]


def emu(*args, check=True, timeout=120):
    r = subprocess.run(EMU + list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    if check and r.returncode != 0:
        pytest.fail(f"cluster_emu.py {' '.join(args)} failed ({r.returncode}):\n{r.stdout}")
    return r.stdout


def namespaces(name):
    out = subprocess.run(["ip", "netns", "list"], stdout=subprocess.PIPE, text=True).stdout
    return [l.split()[0] for l in out.splitlines() if l.startswith(f"dgldemu-{name}-")]


def ns_pids(ns):
    out = subprocess.run(["ip", "netns", "pids", ns], stdout=subprocess.PIPE, text=True).stdout
    return [int(p) for p in out.split()]


class Cluster:
    def __init__(self, name, machines, preset, *extra):
        self.name = name
        emu("down", "--name", name)
        emu("up", "--name", name, "--machines", str(machines), "--preset", preset, "--build", str(BUILD), *extra)
        self.status = json.loads(emu("status", "--name", name, "--json"))
        self.src = Path(self.status["src"])

    def down_and_check(self):
        dirs = [m["dir"] for m in self.status["machines"]]
        emu("down", "--name", self.name)
        assert namespaces(self.name) == [], "namespaces left after down"
        assert not Path(self.status["src"]).parent.exists(), "the state directory is left after down"
        for d in dirs:
            assert not Path(d).exists()
        # No TAP device of the switch anywhere, no switch or sshd process.
        for p in Path("/proc").iterdir():
            if p.name.isdigit():
                try:
                    cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                except OSError:
                    continue
                assert f"dgldemu-{self.name}-" not in cmd and f"/dgld-emu/{self.name}/" not in cmd, cmd

    def partition(self, gen, parts, spares=0, flags=()):
        """The graph in `parts` partitions (with dgl-partition's `flags`);
        ip_config.txt lists the first `parts` machines and the next `spares`
        as spares."""
        subprocess.run([str(BUILD / "partition" / "dgl-partition"), "--log-level", "warn", "--generate", gen,
                        "--num-parts", str(parts), "--graph-name", "g", "--output", str(self.src / "parts"),
                        *flags], check=True, stdout=subprocess.DEVNULL)
        with open(self.src / "ip_config.txt", "w") as f:
            for m in self.status["machines"][:parts]:
                f.write(f"{m['address']} 30050\n")
            for m in self.status["machines"][parts:parts + spares]:
                f.write(f"# spare {m['address']} 30050\n")

    def launch(self, launch_args, trainer_args, log, program=None):
        """dgl-launch over ssh from machine 0: `program` (default trainer-host) with trainer_args."""
        program = program or [str(BUILD / "daemons" / "trainer_host" / "trainer-host")]
        cmd = EMU + ["launch", "--name", self.name, "--build", str(BUILD), "--", "--workspace", self.status["workspace"],
                     "--ip-config", "ip_config.txt", "--part-config", "parts/g.json"] + launch_args + [
                         "--"] + program + trainer_args
        return subprocess.Popen(cmd, stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)

    def job_processes(self, machine):
        m = self.status["machines"][machine]
        sshd = json.load(open(self.src.parent / "state.json"))["machines"][machine]["sshd_pid"]
        return [p for p in ns_pids(m["ns"]) if p != sshd]

    def shm_entries(self, machine):
        out = emu("exec", "--name", self.name, str(machine), "--", "ls", "-A", "/dev/shm")
        return out.split()


