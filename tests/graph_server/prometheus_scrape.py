#!/usr/bin/env python3
"""A real Prometheus (Debian's `prometheus` package) scrapes a graph-server and
a training trainer-host started with --metrics-port, and its query API says
up == 1 for both, with dgld's series stored.

Usage: prometheus_scrape.py BUILD_DIR. Exit 77 (meson's "skipped") when no
`prometheus` binary is installed (`apt-get install prometheus`; or
$DGLD_PROMETHEUS names one). Every process it starts is stopped by PID.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

DEADLINE_S = 90


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(path, text, proc, deadline):
    while time.monotonic() < deadline:
        if os.path.exists(path) and text in open(path, errors="replace").read():
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.1)
    return False


def query(port, expr):
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=5) as r:
        body = json.load(r)
    if body.get("status") != "success":
        raise RuntimeError(f"{expr}: {body}")
    return body["data"]["result"]


def main():
    build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
    prometheus = os.environ.get("DGLD_PROMETHEUS") or shutil.which("prometheus")
    if not prometheus:
        print("skipped: no prometheus binary (apt-get install prometheus, or set DGLD_PROMETHEUS)")
        return 77
    work = tempfile.mkdtemp(prefix="dgld-prom-")
    procs = []
    try:
        deadline = time.monotonic() + DEADLINE_S
        subprocess.run([f"{build}/partition/dgl-partition", "--generate",
                        "sbm:nodes=3000,avg_degree=8,classes=4,feat_dim=8,seed=5", "--num-parts", "1",
                        "--graph-name", "g", "--output", f"{work}/parts"],
                       check=True, capture_output=True, timeout=120)
        base, server_metrics, trainer_metrics, prom_port = free_port(), free_port(), free_port(), free_port()
        with open(f"{work}/ip_config.txt", "w") as f:
            f.write(f"127.0.0.1 {base}\n")

        def start(name, argv, env=None):
            log = open(f"{work}/{name}.log", "w")
            p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                 env=dict(os.environ, **(env or {})))
            procs.append(p)
            return p, f"{work}/{name}.log"

        server, server_log = start("server", [f"{build}/daemons/graph_server/graph-server", "--part-config",
                                              f"{work}/parts/g.json", "--ip-config", f"{work}/ip_config.txt",
                                              "--server-id", "0", "--metrics-port", str(server_metrics)])
        if not wait_for(server_log, "Prometheus metrics at", server, deadline):
            raise RuntimeError("graph-server did not open its metrics port:\n" + open(server_log).read())
        trainer, trainer_log = start("trainer", [f"{build}/daemons/trainer_host/trainer-host", "--standalone",
                                                 "--part-config", f"{work}/parts/g.json", "--num-epochs", "2000",
                                                 "--batch-size", "2", "--log-every", "0", "--eval-every", "-1", "--num-threads", "1", "--measure-peak",
                                                 "false", "--metrics-port", str(trainer_metrics)],
                                     {"LOCAL_RANK": "0"})
        if not wait_for(trainer_log, "Prometheus metrics at", trainer, deadline):
            raise RuntimeError("trainer-host did not open its metrics port:\n" + open(trainer_log).read())
        with open(f"{work}/prometheus.yml", "w") as f:
            f.write(f"""global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: dgld-graph-server
    static_configs:
      - targets: ['127.0.0.1:{server_metrics}']
  - job_name: dgld-trainer
    static_configs:
      - targets: ['127.0.0.1:{trainer_metrics}']
""")
        prom, prom_log = start("prometheus", [prometheus, f"--config.file={work}/prometheus.yml",
                                              f"--storage.tsdb.path={work}/tsdb",
                                              f"--web.listen-address=127.0.0.1:{prom_port}"])
        want = {
            'up{job="dgld-graph-server"}': "1",
            'up{job="dgld-trainer"}': "1",
        }
        found = {}
        while time.monotonic() < deadline:
            if prom.poll() is not None:
                raise RuntimeError("prometheus exited:\n" + open(prom_log).read()[-4000:])
            try:
                for expr in want:
                    r = query(prom_port, expr)
                    found[expr] = r[0]["value"][1] if r else None
                series = query(prom_port, 'dgld_server_uptime_seconds{machine="0",server="0"}')
                step = query(prom_port, 'dgld_trainer_steps_total{machine="0",rank="0"}')
                if all(found[e] == v for e, v in want.items()) and series and step:
                    print(f"prometheus {prom_port}: " + ", ".join(f"{e} = {v}" for e, v in found.items()) +
                          f"; dgld_server_uptime_seconds = {series[0]['value'][1]}"
                          f"; dgld_trainer_steps_total = {step[0]['value'][1]}")
                    targets = json.load(urllib.request.urlopen(
                        f"http://127.0.0.1:{prom_port}/api/v1/targets", timeout=5))["data"]["activeTargets"]
                    for t in targets:
                        print(f"  target {t['scrapeUrl']}: health {t['health']}, lastError '{t['lastError']}'")
                    return 0
            except (OSError, RuntimeError, KeyError, IndexError, ValueError):
                pass  # prometheus still starting, or no scrape yet
            time.sleep(0.5)
        print(f"FAILED: within {DEADLINE_S} s prometheus did not see both targets up: {found}")
        for name in ("server", "trainer"):
            print(f"--- {name} (exit {procs[0 if name == 'server' else 1].poll()}):")
            print(open(f"{work}/{name}.log", errors="replace").read()[-2000:])
        print(open(prom_log).read()[-4000:])
        return 1
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in reversed(procs):
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if not os.environ.get("DGLD_KEEP_TEST_DIRS"):
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
