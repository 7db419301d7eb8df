#!/usr/bin/env bash
# Benchmark (not a test) of graph-server, every comparison made in the same run:
#   - remote pull bandwidth (large replies) vs a raw TCP stream between two processes (target >= 0.8x)
#   - local shared-memory pull vs an in-process random row gather of the same rows (target >= 0.8x)
#   - sampling seeds/s through the server, fanout 10, vs in-process sampling of the same partition (target >= 0.5x);
#     the server spreads a request over its 2 sampling threads, so in-process sampling with 2 threads is shown too
# Two graph-servers run on loopback (one per partition); results go to bench-results/server.json.
#
# Usage: scripts/bench/server.sh [--nodes N] [--seconds S] [--build DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
nodes=200000
seconds=3
build=build
while [[ $# -gt 0 ]]; do
  case "$1" in
    --nodes) nodes="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "server.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ -x "$build/tests/bench/bench_server" ]] || { echo "server.sh: build first ($build/tests/bench/bench_server missing)" >&2; exit 1; }

work="$(mktemp -d "${TMPDIR:-/tmp}/dgld-server-bench.XXXXXX")"
trap 'rm -rf "$work"' EXIT
"$build/partition/dgl-partition" --log-level warn \
  --generate "sbm:nodes=${nodes},avg_degree=20,classes=47,feat_dim=100,seed=1" \
  --num-parts 2 --graph-name bench --output "$work/parts" >/dev/null
base=$(( 20000 + RANDOM % 20000 ))
printf '127.0.0.1 %d\n127.0.0.1 %d\n' "$base" "$((base + 10))" > "$work/ip_config.txt"
mkdir -p bench-results
echo "graph-server benchmark: SBM ${nodes} nodes, 100-dim float features, 2 partitions on loopback"
"$build/tests/bench/bench_server" --part-config "$work/parts/bench.json" --ip-config "$work/ip_config.txt" \
  --seconds "$seconds" --json bench-results/server.json --log-level warn
echo "results: bench-results/server.json"
