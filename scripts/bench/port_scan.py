#!/usr/bin/env python3
"""A port scan of a running dgld job (issue 50): every listening port of
every process of the job, found while it trains, gets strangers' traffic
over and over; all of it must be refused and the job must not notice.

One graph, two runs of the same job with the same seed (dgl-launch --local,
2 machines x 1 trainer, 1 sampler-worker each, trainer-host GraphSAGE):

  undisturbed   nothing happens
  scanned       from the moment the trainers' rendezvous store listens until
                the job ends, rounds over every TCP port a process of the
                job listens on (graph-servers, sampler-workers, the store,
                and anything else: found in /proc, not from a list), each
                port getting per round:
                  connect     connects and sends nothing (the handshake's deadline)
                  random      64 KiB of random bytes
                  http        an HTTP request
                  length      a dgld frame header claiming a 2 GiB payload
                  request     a well-formed request (Ping) without the handshake
                  replay      a real client's handshake recorded earlier in the job, sent again
                  secret      a dgld client holding another job's secret

An attempt counts as refused when the process closes the connection within
15 s without serving anything (no AuthOk, no reply but errors). An attempt
counts at all only if its port still listens after it, in a running job: a
connection closed by the job's end, or by a Gloo pair's port that took it
for its peer while the group formed (and then closed), is not a refusal.
It passes when every counted attempt was refused, every kind reached a
graph-server, a sampler-worker and the store at least once, and the test
accuracy is within 0.01 of the undisturbed job's. Prints the
attempts and refusals by kind and port owner, the refusal lines in the
job's logs, the epoch time and test accuracy of both runs, and
  ratio: port_scan_refused_fraction <f> (target 1)
  ratio: port_scan_epoch_time_over_undisturbed <r>
  ratio: port_scan_test_acc_minus_undisturbed <d> (target within +-0.01)
Writes bench-results/port_scan-<time>.json (or --json).

Usage: scripts/bench/port_scan.py [--nodes N] [--epochs E] [--build DIR] [--json FILE]
"""
import argparse
import json
import os
import random
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAGIC, VERSION_OFFSET = 0x444C4744, 4
KIND_ERROR, KIND_AUTH_CHALLENGE, KIND_AUTH_OK, KIND_PING, KIND_AUTH_HELLO = 1, 7, 9, 2, 6
# The processes of a job that listen for strangers (trainer-host: the rendezvous store).
OWNERS = ["graph-server", "sampler-worker", "trainer-host"]
KINDS = ["connect", "random", "http", "length", "request", "replay", "secret"]


def free_base(span_hi=910):
    """A base port with base..base+19 and base+900..base+909 free."""
    rng = random.Random()
    for _ in range(300):
        base = 11000 + rng.randrange(18000)
        ports = list(range(base, base + 20)) + list(range(base + 900, base + span_hi))
        ok = True
        for p in ports:
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", p))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    sys.exit("port_scan.py: no free block of ports")


def job_pids(job_id):
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
        except OSError:
            continue
        if f"DGLD_JOB_ID={job_id}".encode() in env or job_id.encode() in cmd:
            pids.append(int(name))
    return pids


def program(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return os.path.basename(f.read().split(b"\0")[0].decode())
    except OSError:
        return "?"


def listening_ports(pids):
    """{(host, port): program} of every TCP socket in LISTEN that one of pids holds."""
    inodes = {}
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    inodes[link[8:-1]] = program(pid)
        except OSError:
            continue
    out = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if f[3] != "0A" or f[9] not in inodes:  # 0A: LISTEN
                continue
            addr, port = f[1].split(":")
            host = "127.0.0.1" if len(addr) != 8 else socket.inet_ntoa(struct.pack("<I", int(addr, 16)))
            if host == "0.0.0.0":
                host = "127.0.0.1"
            out[(host, int(port, 16))] = inodes[f[9]]
    return out


def header(kind, payload_len, blob_count=0, request_id=1, version=4):
    return struct.pack("<IHHIIQII", MAGIC, version, kind, 0, payload_len, request_id, blob_count, 0)


def frames_served(data):
    """True when `data` holds a frame that serves the peer (anything but an
    error reply or a challenge)."""
    i = 0
    while i + 32 <= len(data):
        magic, _, kind, flags, plen, _, blobs, _ = struct.unpack_from("<IHHIIQII", data, i)
        if magic != MAGIC:
            return True  # not even a dgld frame: count it as served, so it is looked at
        if kind not in (KIND_ERROR, KIND_AUTH_CHALLENGE) and not flags & 2:
            return True
        if i + 32 + 8 * blobs > len(data):
            break
        lens = struct.unpack_from(f"<{blobs}Q", data, i + 32) if blobs else ()
        i += 32 + 8 * blobs + plen + sum(lens)
    return False


def exchange(host, port, payload, wait_s=15.0):
    """Sends payload, reads until the peer closes; (closed_by_peer, received)."""
    got = b""
    try:
        with socket.create_connection((host, port), timeout=5) as s:
            if payload:
                try:
                    s.sendall(payload)
                except (BrokenPipeError, ConnectionResetError):
                    return True, got
            s.settimeout(wait_s)
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    return True, got
                got += chunk
    except (ConnectionResetError, BrokenPipeError):
        return True, got
    except socket.timeout:
        return False, got
    except OSError as e:
        return False, str(e).encode()


def record_handshake(store, secret, dgld_c):
    """A real client's handshake bytes (AuthHello, AuthResponse), recorded
    through a relay in front of the store."""
    relay = socket.socket()
    relay.bind(("127.0.0.1", 0))
    relay.listen(1)
    sent = bytearray()

    def pump(src, dst, keep):
        try:
            while True:
                b = src.recv(65536)
                if not b:
                    break
                if keep is not None:
                    keep.extend(b)
                dst.sendall(b)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def serve():
        c, _ = relay.accept()
        u = socket.create_connection(store)
        t = threading.Thread(target=pump, args=(u, c, None), daemon=True)
        t.start()
        pump(c, u, sent)
        t.join(5)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    client = dgld_c.RendezvousClient.connect("127.0.0.1", relay.getsockname()[1], secret, 10.0)
    del client  # closes: the relay's pumps end
    t.join(10)
    relay.close()
    return bytes(sent)


def attempt(kind, host, port, replay, other_secret, dgld_c):
    if kind == "secret":
        try:
            dgld_c.RendezvousClient.connect(host, port, other_secret, 5.0)
            return False, "connected and authenticated with another secret"
        except Exception as e:  # dgld.DGLError: the server's proof did not verify
            return True, str(e).splitlines()[0][:160]
    payload = {
        "connect": b"",
        "random": os.urandom(65536),
        "http": b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: */*\r\n\r\n",
        "length": header(KIND_AUTH_HELLO, 0x7FFFFFFF),
        "request": header(KIND_PING, 0),
        "replay": replay,
    }[kind]
    closed, got = exchange(host, port, payload)
    if not closed:
        return False, "still open after 15 s"
    if frames_served(got):
        return False, f"served: {got[:64]!r}"
    return True, f"closed after {len(got)} bytes"


def launch_cmd(a, d, job_id, secret, metrics):
    b = os.path.abspath(a.build)
    return [f"{b}/launcher/launch/dgl-launch", "--local", "--no-copy", "--workspace", d, "--ip-config",
            "ip_config.txt", "--part-config", "parts/g.json", "--num-trainers", "1", "--num-samplers", "1",
            "--job-id", job_id, "--secret-file", secret, "--",
            f"{b}/daemons/trainer_host/trainer-host", "--num-epochs", str(a.epochs), "--fan-out", "10,25",
            "--batch-size", "100", "--num-hidden", "128", "--lr", "0.01", "--seed", "7", "--eval-every", "0",
            "--no-progress", "--metrics-out", metrics]


def run_job(a, d, name, base, secret, scan):
    with open(os.path.join(d, "ip_config.txt"), "w") as f:
        f.write(f"127.0.0.1 {base}\n127.0.0.1 {base + 10}\n")
    job_id = f"scan-{name}-{os.getpid()}"
    metrics = os.path.join(d, f"{name}.json")
    log = open(os.path.join(d, f"{name}.log"), "w")
    t0 = time.time()
    p = subprocess.Popen(launch_cmd(a, d, job_id, secret, metrics), cwd=d, stdout=log, stderr=subprocess.STDOUT)
    result = {"attempts": []}
    try:
        if scan:
            result.update(scan_job(p, job_id, ("127.0.0.1", base + 900), secret, a))
        rc = p.wait(timeout=a.timeout)
    except BaseException:
        p.terminate()
        p.wait(30)
        raise
    log.close()
    text = open(os.path.join(d, f"{name}.log")).read()
    if rc != 0:
        sys.exit(f"port_scan.py: the {name} job failed (exit {rc}):\n{text[-4000:]}")
    m = json.load(open(metrics))
    epochs = [e.get("time_s", e.get("time", 0.0)) for e in m.get("epochs", [])]
    retries = [line.split("] ", 1)[-1] for line in text.splitlines()
               if "forming the trainers' group failed" in line or "group formed at try" in line]
    result.update(wall_s=time.time() - t0, test_acc=m.get("test_acc"), epoch_times=epochs, formation_lines=retries,
                  refusal_log_lines=sum(1 for line in text.splitlines()
                                        if any(k in line for k in ("refused client", "bad frame magic",
                                                                   "did not authenticate", "left the handshake"))))
    return result


def scan_job(p, job_id, store, secret, a):
    sys.path.insert(0, os.path.join(os.path.abspath(a.build), "python"))
    from dgld import _C as dgld_c  # the dgld client the replay is recorded with
    d = tempfile.mkdtemp(prefix="dgld-scan-secret-")
    other = os.path.join(d, "other")
    with open(other, "w") as f:
        f.write(os.urandom(32).hex())
    os.chmod(other, 0o600)
    deadline = time.time() + 120
    while store not in listening_ports(job_pids(job_id)):
        if p.poll() is not None or time.time() > deadline:
            sys.exit("port_scan.py: the trainers' rendezvous store never listened")
        time.sleep(0.1)
    replay = record_handshake(store, secret, dgld_c)
    attempts, dropped, rounds, started = [], 0, 0, time.time()
    ports_seen = {}
    lock = threading.Lock()
    iteration = 0
    while p.poll() is None:
        ports = listening_ports(job_pids(job_id))
        ports_seen.update(ports)
        threads, counted = [], []
        for (host, port), owner in ports.items():
            for kind in KINDS:
                def go(kind=kind, host=host, port=port, owner=owner):
                    refused, detail = attempt(kind, host, port, replay, other, dgld_c)
                    # A connection closed because its port's process ended (the
                    # job's end) or because the port itself closed (a Gloo pair
                    # that took this connection for its peer while the group
                    # formed) is not a refusal: only an attempt whose port still
                    # listens after it, in a running job, counts.
                    live = p.poll() is None and (host, port) in listening_ports(job_pids(job_id))
                    with lock:
                        if live:
                            attempts.append({"port": port, "owner": owner, "kind": kind, "refused": refused,
                                             "detail": detail, "round": iteration})
                        counted.append(live)
                t = threading.Thread(target=go, daemon=True)
                t.start()
                threads.append(t)
        for t in threads:
            t.join(30)
        with lock:
            dropped += counted.count(False)
            complete = bool(ports) and len(counted) == len(threads) and all(counted)
        if os.environ.get("PORT_SCAN_DEBUG"):
            print(f"round {iteration}: {len(ports)} ports, {counted.count(True)} of {len(threads)} attempts "
                  f"counted, {time.time() - started:.1f} s", file=sys.stderr)
        rounds += complete
        iteration += 1
        if not ports:
            time.sleep(0.1)  # between the processes' end and the launcher's
    shutil.rmtree(d, ignore_errors=True)
    return {"attempts": attempts, "rounds": rounds, "dropped": dropped, "scan_s": time.time() - started,
            "ports": sorted(f"{h}:{port} {o}" for (h, port), o in ports_seen.items()),
            "replay_bytes": len(replay)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=50000)
    ap.add_argument("--epochs", type=int, default=150)
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--json")
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="dgld-port-scan-")
    try:
        subprocess.run([f"{a.build}/partition/dgl-partition", "--generate",
                        f"sbm:nodes={a.nodes},avg_degree=15,classes=8,feat_dim=64,seed=5", "--num-parts", "2",
                        "--graph-name", "g", "--output", os.path.join(d, "parts")],
                       check=True, stdout=subprocess.DEVNULL)
        secret = os.path.join(d, "secret")
        with open(secret, "w") as f:
            f.write(os.urandom(32).hex())
        os.chmod(secret, 0o600)
        base = free_base()
        quiet = run_job(a, d, "undisturbed", base, secret, scan=False)
        scanned = run_job(a, d, "scanned", base, secret, scan=True)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    report(a, quiet, scanned)


def report(a, quiet, scanned):
    att = scanned["attempts"]
    print(f"job: 2 machines x 1 trainer, 1 sampler-worker each, {a.nodes} nodes, {a.epochs} epochs")
    print(f"listening ports found while it trained ({len(scanned['ports'])}):")
    for p in scanned["ports"]:
        print(f"  {p}")
    print(f"{scanned['rounds']} complete rounds in {scanned['scan_s']:.1f} s ({scanned['dropped']} attempts not counted: "
          f"their port closed or the job ended); replayed handshake {scanned['replay_bytes']} bytes")
    print(f"{'kind':10s} {'attempts':>8s} {'refused':>8s}")
    for kind in KINDS:
        k = [x for x in att if x["kind"] == kind]
        print(f"{kind:10s} {len(k):8d} {sum(x['refused'] for x in k):8d}")
    # Every kind must have reached every kind of process at least once.
    missing = [f"{kind} on {owner}" for owner in OWNERS for kind in KINDS
               if not any(x["kind"] == kind and x["owner"] == owner for x in att)]
    if missing:
        print(f"NOT TRIED (no counted attempt; a longer job, --epochs, gives the scan more time): {', '.join(missing)}")
    bad = [x for x in att if not x["refused"]]
    for x in bad[:10]:
        print(f"NOT REFUSED: {x['owner']} port {x['port']} {x['kind']}: {x['detail']}")
    for line in scanned["formation_lines"]:
        print(f"group formation: {line[:300]}")
    print(f"refusal lines in the job's logs: {scanned['refusal_log_lines']} (undisturbed run: "
          f"{quiet['refusal_log_lines']})")

    def mean(v):
        v = v[1:] if len(v) > 1 else v
        return sum(v) / max(len(v), 1)
    tq, ts = mean(quiet["epoch_times"]), mean(scanned["epoch_times"])
    print(f"epoch time (mean of epochs 2..): undisturbed {tq:.3f} s, scanned {ts:.3f} s")
    print(f"test accuracy: undisturbed {quiet['test_acc']}, scanned {scanned['test_acc']}")
    frac = sum(x["refused"] for x in att) / max(len(att), 1)
    print(f"ratio: port_scan_refused_fraction {frac:.4f} (target 1)")
    print(f"ratio: port_scan_epoch_time_over_undisturbed {ts / tq if tq else float('nan'):.3f}")
    acc_d = (scanned["test_acc"] or 0) - (quiet["test_acc"] or 0)
    print(f"ratio: port_scan_test_acc_minus_undisturbed {acc_d:+.4f} (target within +-0.01)")
    out = a.json or os.path.join(REPO, "bench-results", f"port_scan-{time.strftime('%Y%m%d-%H%M%S')}.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump({"undisturbed": quiet, "scanned": scanned, "nodes": a.nodes, "epochs": a.epochs}, f, indent=1)
    ok = frac == 1.0 and not missing and abs(acc_d) <= 0.01
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
