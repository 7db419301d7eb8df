#!/usr/bin/env python3
"""The cluster emulator: N machines on this one, each a network namespace with
its own sshd, its own /dev/shm and its own workspace, joined by dgld-switch
over shaped links (rate, one-way delay, loss). docs/cluster-emulator.md.

  cluster_emu.py up --machines N [--preset 10g] [--name NAME]
  cluster_emu.py status [--name NAME] [--json]
  cluster_emu.py measure [--name NAME]          rate, delay, loss between machines 0 and 1
  cluster_emu.py counters [--name NAME]         every machine's eth0 counters (JSON)
  cluster_emu.py exec [--name NAME] WHO -- CMD  WHO: a machine index (its namespaces) or 'launcher'
  cluster_emu.py launch [--name NAME] -- ARGS   dgl-launch ARGS from the launcher namespace, with the ssh flags
  cluster_emu.py kill [--name NAME] MACHINE     kill -9 every process of a machine, its sshd too (a lost machine)
  cluster_emu.py down [--name NAME | --all]

Every machine sees one directory in common, `shared` in status (as an NFS
mount would be): checkpoints a spare machine must read go there.

Every packet stays on this machine: the machines' only interface is a TAP
device of the switch, which runs in a namespace with nothing else in it.
Root only (network namespaces, TAP devices, mounts).
"""
import argparse
import json
import os
import signal
import shutil
import subprocess
import sys
import time

PRESETS = {
    # name: (rate bit/s, one-way delay ms, loss probability)
    "none": (0, 0.0, 0.0),
    "1g": (1e9, 0.1, 0.0),
    "10g": (10e9, 0.1, 0.0),
    "25g": (25e9, 0.05, 0.0),
    "lossy": (10e9, 0.1, 0.01),
}
SUBNET = "10.214.0"
ROOT = "/tmp/dgld-emu"
IP = "/usr/sbin/ip"
TC = "/usr/sbin/tc"
SSHD = "/usr/sbin/sshd"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class EmuError(Exception):
    pass


def run(argv, what, check=True, **kw):
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    if check and r.returncode != 0:
        raise EmuError(f"{what} failed ({' '.join(argv)}): exit {r.returncode}: {r.stdout.strip()}")
    return r.stdout


def state_dir(name):
    return os.path.join(ROOT, name)


def ns_name(name, who):
    return f"dgldemu-{name}-{who}"


def machine_address(i):
    return f"{SUBNET}.{10 + i}"


def load_state(name):
    path = os.path.join(state_dir(name), "state.json")
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        raise EmuError(f"no emulated cluster '{name}' is up ({path} does not exist)")


def save_state(st):
    path = os.path.join(state_dir(st["name"]), "state.json")
    with open(path + ".tmp", "w") as f:
        json.dump(st, f, indent=1)
    os.replace(path + ".tmp", path)


def parse_rate(text):
    t = text.strip().lower().removesuffix("bit").removesuffix("bps").removesuffix("b")
    mult = {"k": 1e3, "m": 1e6, "g": 1e9}.get(t[-1:], 1)
    try:
        return float(t[:-1] if mult != 1 else t) * mult
    except ValueError:
        raise EmuError(f"--rate '{text}': expected bits per second such as 10g, 500m or 0")


def find_switch(build):
    for b in ([build] if build else []) + ["build", "build-wip"]:
        p = os.path.join(REPO, b, "tests", "cluster", "dgld-switch")
        if os.path.exists(p):
            return p
    raise EmuError("dgld-switch not found: build first (meson setup build && ninja -C build) or pass --build DIR")


def namespaces():
    out = run([IP, "netns", "list"], "listing network namespaces", check=False)
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def ns_pids(ns):
    out = run([IP, "netns", "pids", ns], "listing processes", check=False)
    return [int(p) for p in out.split() if p.isdigit()]


def kill_namespace_processes(ns, deadline_s=5.0):
    end = time.time() + deadline_s
    while True:
        pids = ns_pids(ns)
        if not pids or time.time() > end:
            return pids
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)


def wait_for(pred, timeout_s, what):
    end = time.time() + timeout_s
    while time.time() < end:
        if pred():
            return
        time.sleep(0.05)
    raise EmuError(f"timed out after {timeout_s:.0f} s waiting for {what}")


# ---------------------------------------------------------------------------- up

def sshd_config(st, i):
    d = st["dir"]
    return (f"ListenAddress {machine_address(i)}:22\n"
            f"HostKey {d}/keys/host\nAuthorizedKeysFile {d}/keys/authorized_keys\n"
            "PubkeyAuthentication yes\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
            "PermitRootLogin prohibit-password\nStrictModes no\nUsePAM no\nPidFile none\n"
            "Subsystem sftp internal-sftp\nPrintMotd no\nMaxStartups 200:30:400\nMaxSessions 200\n"
            "LogLevel INFO\nAcceptEnv DGLD_* DGL_*\n")


def start_sshd(st, i):
    d = st["dir"]
    conf = os.path.join(d, f"sshd-{i}.conf")
    with open(conf, "w") as f:
        f.write(sshd_config(st, i))
    host_dir = os.path.join(d, f"machine{i}")
    os.makedirs(host_dir, exist_ok=True)
    # In the sshd's own mount namespace (ip netns exec makes one, not
    # propagated back): a private /run, a private /dev/shm, and the workspace
    # path bound to this machine's own directory. Everything started over
    # ssh inherits them.
    script = (f"set -e; mount -t tmpfs dgld-emu-run /run; mkdir -p -m 755 /run/sshd; "
              f"mount -t tmpfs -o mode=1777,size=50% dgld-emu-shm /dev/shm; "
              f"mount --bind '{host_dir}' '{st['workspace']}'; "
              f"exec {SSHD} -D -e -f '{conf}'")
    log = open(os.path.join(d, f"sshd-{i}.log"), "w")
    p = subprocess.Popen([IP, "netns", "exec", st["machines"][i]["ns"], "/bin/sh", "-c", script],
                         stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    st["machines"][i]["sshd_pid"] = p.pid
    return p


def configure_link(ns, dev, addr, mtu, rate):
    run([IP, "-n", ns, "link", "set", dev, "name", "eth0"], f"renaming {dev} in {ns}")
    run([IP, "-n", ns, "link", "set", "eth0", "mtu", str(mtu), "txqueuelen", "10000"], f"setting eth0's MTU in {ns}")
    run([IP, "-n", ns, "addr", "add", f"{addr}/24", "dev", "eth0"], f"addressing eth0 in {ns}")
    run([IP, "-n", ns, "link", "set", "eth0", "up"], f"bringing eth0 up in {ns}")
    run([IP, "-n", ns, "link", "set", "lo", "up"], f"bringing lo up in {ns}")
    if rate > 0:
        # The uplink: a token bucket holding about 1 ms at the line rate
        # (at least 64 KiB), so TCP is held back as by a NIC, not dropped.
        burst = max(65536, int(rate / 8 / 1000))
        run([IP, "netns", "exec", ns, TC, "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", f"{int(rate)}bit",
             "burst", str(burst), "latency", "50ms"], f"shaping eth0 in {ns}")


def cmd_up(a):
    name = a.name
    if os.geteuid() != 0:
        raise EmuError("root is needed (network namespaces, TAP devices, mounts)")
    if not 1 <= a.machines <= 16:
        raise EmuError(f"--machines {a.machines}: expected 1 to 16")
    rate, delay_ms, loss = PRESETS[a.preset]
    if a.rate is not None:
        rate = parse_rate(a.rate)
    if a.delay_ms is not None:
        delay_ms = a.delay_ms
    if a.loss is not None:
        loss = a.loss
    d = state_dir(name)
    if os.path.exists(os.path.join(d, "state.json")) or any(n.startswith(f"dgldemu-{name}-") for n in namespaces()):
        raise EmuError(f"an emulated cluster '{name}' is already up: cluster_emu.py down --name {name}")
    switch = find_switch(a.build)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.join(d, "keys"), mode=0o700)
    st = {"name": name, "dir": d, "preset": a.preset, "rate_bps": rate, "delay_ms": delay_ms, "loss": loss,
          "mtu": a.mtu, "workspace": os.path.join(d, "workspace"), "src": os.path.join(d, "launcher"),
          "shared": os.path.join(d, "shared"),
          "launcher": {"ns": ns_name(name, "l"), "address": f"{SUBNET}.2"},
          "switch": {"ns": ns_name(name, "sw"), "pid": None, "stats": os.path.join(d, "switch.json")},
          "machines": [{"ns": ns_name(name, f"h{i}"), "address": machine_address(i)} for i in range(a.machines)],
          "created": []}
    save_state(st)
    try:
        for p in (st["workspace"], st["src"], st["shared"]):
            os.makedirs(p)
        keys = os.path.join(d, "keys")
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "dgld-emu-user", "-f", f"{keys}/id"], "ssh-keygen")
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "dgld-emu-host", "-f", f"{keys}/host"], "ssh-keygen")
        shutil.copy(f"{keys}/id.pub", f"{keys}/authorized_keys")
        host_key = " ".join(open(f"{keys}/host.pub").read().split()[:2])
        with open(f"{keys}/known_hosts", "w") as f:
            for m in st["machines"]:
                f.write(f"{m['address']} {host_key}\n")

        ports = [st["launcher"]] + st["machines"]
        for p in [st["switch"]] + ports:
            run([IP, "netns", "add", p["ns"]], f"creating namespace {p['ns']}")
            st["created"].append(p["ns"])
            save_state(st)
        ready = os.path.join(d, "switch.ready")
        sw_argv = [IP, "netns", "exec", st["switch"]["ns"], switch, "--ports", str(len(ports)), "--tap-prefix", "port",
                   "--mtu", str(a.mtu), "--rate-bps", str(rate), "--delay-us", str(delay_ms * 1000),
                   "--loss", str(loss), "--seed", str(a.seed), "--stats", st["switch"]["stats"], "--ready-file", ready,
                   "--loss-file", os.path.join(d, "switch-loss.txt")]
        sw = subprocess.Popen(sw_argv, stdout=open(os.path.join(d, "switch.log"), "w"), stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, start_new_session=True)
        st["switch"]["pid"] = sw.pid
        save_state(st)
        wait_for(lambda: os.path.exists(ready) or sw.poll() is not None, 10, "dgld-switch to create its ports")
        if sw.poll() is not None:
            raise EmuError("dgld-switch exited: " + open(os.path.join(d, "switch.log")).read().strip())
        for k, p in enumerate(ports):
            run([IP, "-n", st["switch"]["ns"], "link", "set", f"port{k}", "netns", p["ns"]], f"moving port{k}")
            configure_link(p["ns"], f"port{k}", p["address"], a.mtu, rate)
        for i in range(a.machines if not a.no_sshd else 0):
            start_sshd(st, i)
        save_state(st)
        for i, m in enumerate(st["machines"] if not a.no_sshd else []):
            log = os.path.join(d, f"sshd-{i}.log")
            wait_for(lambda: "Server listening on" in open(log).read() or not pid_alive(m["sshd_pid"]), 20,
                     f"sshd of machine {i}")
            if not pid_alive(m["sshd_pid"]):
                raise EmuError(f"sshd of machine {i} exited: {open(log).read().strip()}")
    except BaseException:
        cmd_down(argparse.Namespace(name=name, all=False, quiet=True))
        raise
    print(f"cluster '{name}' up: {a.machines} machine(s) at {machine_address(0)}..{machine_address(a.machines - 1)}, "
          f"preset {a.preset} ({describe_link(st)}); launcher files in {st['src']}, workspace {st['workspace']}")


def set_link_loss(st, i, loss):
    """Machine i's link loses `loss` of the frames both ways (None: the preset's), within a second."""
    path = os.path.join(st["dir"], "switch-loss.txt")
    lines = [l for l in open(path).read().splitlines() if l.split()[0] != str(i + 1)] if os.path.exists(path) else []
    with open(path + ".tmp", "w") as f:  # port 0 is the launcher's, machine i's is i + 1
        f.write("".join(l + "\n" for l in lines) + (f"{i + 1} {loss}\n" if loss is not None else ""))
    os.replace(path + ".tmp", path)


def pid_alive(pid):
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie of ours counts as gone
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def describe_link(st):
    rate = st["rate_bps"]
    r = "unlimited" if not rate else (f"{rate / 1e9:g} Gbit/s" if rate >= 1e9 else f"{rate / 1e6:g} Mbit/s")
    return f"{r}, {st['delay_ms']:g} ms one way, {st['loss'] * 100:g} % loss, MTU {st['mtu']}"


# -------------------------------------------------------------------------- down

def cmd_down(a):
    names = sorted(os.listdir(ROOT)) if a.all and os.path.isdir(ROOT) else [a.name]
    if a.all:  # namespaces of clusters whose state is gone
        names = sorted(set(names) | {n.split("-")[1] for n in namespaces() if n.startswith("dgldemu-")})
    left = []
    for name in names:
        d = state_dir(name)
        try:
            st = load_state(name)
            nss = st.get("created", [])
            pids = [st["switch"].get("pid")] + [m.get("sshd_pid") for m in st["machines"]]
        except EmuError:
            st, pids = None, []
            nss = []
        nss = sorted(set(nss) | {n for n in namespaces() if n.startswith(f"dgldemu-{name}-")})
        # Jobs first (everything started over ssh lives in the machines'
        # namespaces), then the sshds and the switch (its TAPs go with it).
        for ns in nss:
            rest = kill_namespace_processes(ns)
            if rest:
                left.append(f"{ns}: processes {rest} did not die")
        for pid in pids:
            if pid and pid_alive(pid):
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for ns in nss:
            r = subprocess.run([IP, "netns", "del", ns], capture_output=True, text=True)
            if r.returncode != 0 and ns in namespaces():
                left.append(f"{ns}: {r.stderr.strip()}")
        shutil.rmtree(d, ignore_errors=True)
        if not getattr(a, "quiet", False):
            print(f"cluster '{name}' down" if st else f"cluster '{name}': nothing was up; leftovers removed")
    if left:
        raise EmuError("left behind: " + "; ".join(left))


# ------------------------------------------------------------------------ status

def link_counters(ns):
    out = run([IP, "-n", ns, "-s", "-j", "link", "show", "eth0"], f"reading eth0's counters in {ns}")
    s = json.loads(out)[0]["stats64"]
    return {"rx_bytes": s["rx"]["bytes"], "rx_packets": s["rx"]["packets"], "rx_dropped": s["rx"]["dropped"],
            "tx_bytes": s["tx"]["bytes"], "tx_packets": s["tx"]["packets"], "tx_dropped": s["tx"]["dropped"]}


def counters(st):
    out = {"launcher": link_counters(st["launcher"]["ns"])}
    for i, m in enumerate(st["machines"]):
        out[str(i)] = link_counters(m["ns"])
    return out


def cmd_status(a):
    st = load_state(a.name)
    live = set(namespaces())
    info = {
        "name": st["name"], "preset": st["preset"], "link": describe_link(st), "rate_bps": st["rate_bps"],
        "delay_ms": st["delay_ms"], "loss": st["loss"], "mtu": st["mtu"],
        "switch_running": pid_alive(st["switch"]["pid"]), "src": st["src"], "workspace": st["workspace"],
        "shared": st.get("shared", os.path.join(st["dir"], "shared")),
        "launcher": {"ns": st["launcher"]["ns"], "address": st["launcher"]["address"]},
        "ssh_flags": ssh_flags(st),
        "machines": [{"index": i, "ns": m["ns"], "address": m["address"], "up": m["ns"] in live,
                      "sshd_running": pid_alive(m.get("sshd_pid")), "dir": os.path.join(st["dir"], f"machine{i}"),
                      "processes": len([p for p in ns_pids(m["ns"]) if p != m.get("sshd_pid")])}
                     for i, m in enumerate(st["machines"])],
    }
    if a.json:
        print(json.dumps(info, indent=1))
        return
    print(f"cluster '{info['name']}': {len(info['machines'])} machine(s), preset {info['preset']} ({info['link']}), "
          f"switch {'running' if info['switch_running'] else 'NOT running'}")
    for m in info["machines"]:
        print(f"  machine {m['index']}: {m['address']} ns {m['ns']} sshd {'up' if m['sshd_running'] else 'DOWN'}, "
              f"{m['processes']} other process(es)")


def ssh_flags(st):
    keys = os.path.join(st["dir"], "keys")
    return ["--identity-file", f"{keys}/id", "--ssh-option", f"UserKnownHostsFile={keys}/known_hosts",
            "--ssh-option", "GlobalKnownHostsFile=/dev/null", "--ssh-option", "StrictHostKeyChecking=yes",
            "--ssh-option", "ConnectTimeout=10"]


# ------------------------------------------------------------------ exec, launch

def exec_argv(st, who, cmd):
    if who == "launcher":
        return [IP, "netns", "exec", st["launcher"]["ns"]] + cmd
    i = int(who)
    if not 0 <= i < len(st["machines"]):
        raise EmuError(f"machine {who}: the cluster has machines 0..{len(st['machines']) - 1}")
    m = st["machines"][i]
    if not pid_alive(m.get("sshd_pid")):
        raise EmuError(f"machine {i}'s sshd is not running (its mount namespace went with it)")
    # The machine's network namespace and its sshd's mount namespace (its /dev/shm and workspace).
    return ["nsenter", "-t", str(m["sshd_pid"]), "-n", "-m"] + cmd


def cmd_exec(a):
    st = load_state(a.name)
    os.execvp("nsenter" if a.who != "launcher" else IP, exec_argv(st, a.who, strip_dashes(a.cmd)))


def cmd_kill(a):
    st = load_state(a.name)
    i = int(a.machine)
    if not 0 <= i < len(st["machines"]):
        raise EmuError(f"machine {a.machine}: the cluster has machines 0..{len(st['machines']) - 1}")
    ns = st["machines"][i]["ns"]
    n = len(ns_pids(ns))
    left = kill_namespace_processes(ns)
    if left:
        raise EmuError(f"machine {i}: {len(left)} process(es) survived kill -9: {left}")
    print(f"machine {i}: {n} process(es) killed, its sshd among them; its address still answers (connections are "
          f"refused), as a machine whose services died")


def cmd_launch(a):
    st = load_state(a.name)
    launch = find_tool(a.build, "launcher/launch/dgl-launch")
    args = strip_dashes(a.cmd)
    os.chdir(st["src"])
    argv = [IP, "netns", "exec", st["launcher"]["ns"], launch] + ssh_flags(st) + args
    os.execv(IP, argv)


def find_tool(build, rel):
    for b in ([build] if build else []) + ["build", "build-wip"]:
        p = os.path.join(REPO, b, rel)
        if os.path.exists(p):
            return p
    raise EmuError(f"{rel} not found in the build directory: build first or pass --build DIR")


def strip_dashes(cmd):
    return cmd[1:] if cmd and cmd[0] == "--" else cmd


# ----------------------------------------------------------------------- measure

PROBE = r'''
import socket, sys, time, json, struct
mode, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
if mode == "serve":
    ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); ls.bind((host, port)); ls.listen()
    us = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); us.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 24)
    us.bind((host, port)); us.settimeout(1.0)
    print("ready", flush=True)
    c, _ = ls.accept(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    # ping-pong until the client sends 'B', then count bulk bytes until EOF
    while True:
        b = c.recv(1)
        if b == b"B": break
        c.sendall(b)
    n = 0
    while True:
        d = c.recv(1 << 20)
        if not d: break
        n += len(d)
    c.sendall(struct.pack("<Q", n)); c.close()
    got, end = set(), time.time() + 60
    while time.time() < end:
        try: d, _ = us.recvfrom(2048)
        except socket.timeout: break
        if d[:4] == b"DONE": break
        got.add(struct.unpack("<I", d[:4])[0])
    print(json.dumps({"udp_received": len(got)}), flush=True)
else:
    seconds, count = float(sys.argv[4]), int(sys.argv[5])
    c = socket.create_connection((host, port), timeout=10); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rtts = []
    for i in range(count):
        t = time.perf_counter(); c.sendall(b"x"); c.recv(1); rtts.append(time.perf_counter() - t)
    c.sendall(b"B")
    buf = b"\0" * (1 << 20); sent = 0; t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        c.sendall(buf); sent += len(buf)
    c.shutdown(socket.SHUT_WR)
    n = struct.unpack("<Q", c.recv(8))[0]; el = time.perf_counter() - t0
    us = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    pkts = 20000
    for i in range(pkts):
        us.sendto(struct.pack("<I", i) + b"\0" * 96, (host, port))
        if i % 100 == 99: time.sleep(0.005)
    time.sleep(0.5)
    for _ in range(5): us.sendto(b"DONE", (host, port)); time.sleep(0.05)
    rtts.sort()
    print(json.dumps({"rtt_median_ms": rtts[len(rtts) // 2] * 1e3, "rtt_min_ms": rtts[0] * 1e3,
                      "bulk_bytes": n, "bulk_s": el, "udp_sent": pkts}), flush=True)
'''


def switch_counters(st):
    """The switch's counters summed over its ports ({} before its first write)."""
    try:
        with open(st["switch"]["stats"]) as f:
            ports = json.load(f)["ports"]
    except (OSError, ValueError, KeyError):
        return {}
    keys = ("in_frames", "out_frames", "lost", "queue_drops", "write_errors")
    return {k: sum(p.get(k, 0) for p in ports) for k in keys}


def cmd_measure(a):
    st = load_state(a.name)
    if len(st["machines"]) < 2:
        raise EmuError("measure needs at least 2 machines")
    port = 5999
    before = switch_counters(st)
    probe = os.path.join(st["dir"], "probe.py")
    with open(probe, "w") as f:
        f.write(PROBE)
    srv = subprocess.Popen(exec_argv(st, "1", ["python3", probe, "serve", machine_address(1), str(port)]),
                           stdout=subprocess.PIPE, text=True)
    try:
        if srv.stdout.readline().strip() != "ready":
            raise EmuError("the probe server on machine 1 did not start")
        out = run(exec_argv(st, "0", ["python3", probe, "client", machine_address(1), str(port), str(a.seconds),
                                      str(a.round_trips)]), "the probe client on machine 0")
        cli = json.loads(out.strip().splitlines()[-1])
        srv_out = json.loads(srv.stdout.readline())
    finally:
        srv.kill()
        srv.wait()
    res = {"preset": st["preset"], "target_rate_bps": st["rate_bps"], "target_delay_ms": st["delay_ms"],
           "target_loss": st["loss"],
           "rate_bps": cli["bulk_bytes"] * 8 / cli["bulk_s"],
           "one_way_delay_ms": cli["rtt_median_ms"] / 2, "rtt_min_ms": cli["rtt_min_ms"],
           "loss": 1 - srv_out["udp_received"] / cli["udp_sent"], "udp_sent": cli["udp_sent"]}
    time.sleep(1.1)  # the switch writes its counters every second
    after = switch_counters(st)
    # What the switch itself did meanwhile: frames it dropped because a
    # downlink's queue was full, or could not write to a TAP device (a rate
    # below the preset's, on a busy machine, shows up here).
    res["switch"] = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    if a.json:
        print(json.dumps(res, indent=1))
    else:
        print(f"rate  {res['rate_bps'] / 1e9:8.3f} Gbit/s  (preset {st['rate_bps'] / 1e9:g})\n"
              f"delay {res['one_way_delay_ms']:8.3f} ms one way, median of {a.round_trips} TCP round trips "
              f"(preset {st['delay_ms']:g})\n"
              f"loss  {res['loss'] * 100:8.3f} % of {res['udp_sent']} UDP datagrams (preset {st['loss'] * 100:g})")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="action", required=True)

    def add(name, **kw):
        p = sub.add_parser(name, **kw)
        p.add_argument("--name", default="emu", help="which emulated cluster (several can be up at once)")
        return p
    p = add("up", help="create the machines")
    p.add_argument("--machines", type=int, required=True)
    p.add_argument("--preset", choices=sorted(PRESETS), default="10g")
    p.add_argument("--rate", help="overrides the preset's rate per link, bit/s (10g, 500m, 0: unlimited)")
    p.add_argument("--delay-ms", type=float, help="overrides the preset's one-way delay")
    p.add_argument("--loss", type=float, help="overrides the preset's loss probability per frame")
    p.add_argument("--mtu", type=int, default=9000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--build", help="build directory (default: build, then build-wip)")
    p.add_argument("--no-sshd", action="store_true", help="bare namespaces on the links, for systemd-nspawn "
                   "nodes that bring their own sshd (scripts/cluster/fresh_nodes.sh)")
    p = add("down", help="remove everything")
    p.add_argument("--all", action="store_true", help="every emulated cluster")
    p = add("status")
    p.add_argument("--json", action="store_true")
    p = add("counters", help="eth0 counters of every machine (JSON)")
    p = add("measure", help="rate, delay and loss between machines 0 and 1")
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--round-trips", type=int, default=200)
    p.add_argument("--json", action="store_true")
    p = add("exec", help="run a command on a machine")
    p.add_argument("who")
    p.add_argument("cmd", nargs=argparse.REMAINDER)
    p = add("kill", help="kill -9 every process of a machine, its sshd too")
    p.add_argument("machine")
    p = add("launch", help="dgl-launch from the launcher namespace with the cluster's ssh flags")
    p.add_argument("--build")
    p.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    try:
        if a.action == "up":
            cmd_up(a)
        elif a.action == "down":
            cmd_down(a)
        elif a.action == "status":
            cmd_status(a)
        elif a.action == "counters":
            print(json.dumps(counters(load_state(a.name)), indent=1))
        elif a.action == "measure":
            cmd_measure(a)
        elif a.action == "exec":
            cmd_exec(a)
        elif a.action == "launch":
            cmd_launch(a)
        elif a.action == "kill":
            cmd_kill(a)
    except EmuError as e:
        print(f"cluster_emu: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
