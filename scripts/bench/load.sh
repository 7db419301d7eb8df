#!/usr/bin/env bash
# Load test (not a unit test) of two graph-servers: N concurrent clients, each
# registered with the coordinator and heartbeating, pull random feature rows
# and push random rows of a tensor of their own (every push read back and
# compared) for a fixed time on loopback. Prints per-kind latency (p50/p99),
# requests/s, errors and the servers' resident memory after the warm-up, and
#   ratio: load_rss_growth_after_warmup <x> (target <=1.05)
#   ratio: load_errors <n> (target ==0)
# Results go to bench-results/load.json; exit code 1 when any call failed.
#
# Usage: scripts/bench/load.sh [--nodes N] [--clients C] [--seconds S] [--warmup S] [--build DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
nodes=200000
clients=16
seconds=60
warmup=10
build=build
while [[ $# -gt 0 ]]; do
  case "$1" in
    --nodes) nodes="$2"; shift 2 ;;
    --clients) clients="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "load.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ -x "$build/tests/bench/bench_load" ]] || { echo "load.sh: build first ($build/tests/bench/bench_load missing)" >&2; exit 1; }

work="$(mktemp -d "${TMPDIR:-/tmp}/dgld-load-bench.XXXXXX")"
trap 'rm -rf "$work"' EXIT
"$build/partition/dgl-partition" --log-level warn \
  --generate "sbm:nodes=${nodes},avg_degree=20,classes=47,feat_dim=100,seed=1" \
  --num-parts 2 --graph-name load --output "$work/parts" >/dev/null
mkdir -p bench-results
echo "load test: ${clients} clients for ${seconds} s (${warmup} s warm-up) against 2 graph-servers, SBM ${nodes} nodes, 100-dim features"
"$build/tests/bench/bench_load" --part-config "$work/parts/load.json" --clients "$clients" --seconds "$seconds" \
  --warmup "$warmup" --json bench-results/load.json --log-level warn
echo "results: bench-results/load.json"
