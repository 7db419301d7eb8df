#!/usr/bin/env bash
# Benchmark (not a test) of the link-prediction mini-batch path, compared in the same run:
#   positive training edges/s through DistEdgeDataLoader (uniform negatives) vs in-process
#   sampling + feature gather of the same batches of the same graph in memory (target:
#   distributed >= 0.5x), with the time split into sampling, feature fetch and waiting;
#   the local-uniform negative sampler's rate for information. SBM graph with a
#   0.85/0.05/0.1 link split, 2 partitions, two graph-servers on loopback, trainer 0 of 2,
#   batch 1000 edges, fanouts 10,25. Results go to bench-results/link.json.
#
# Usage: scripts/bench/link.sh [--nodes N] [--batches B] [--threads T] [--negatives K] [--build DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
nodes=1000000
batches=100
threads=2
negatives=1
build=build
while [[ $# -gt 0 ]]; do
  case "$1" in
    --nodes) nodes="$2"; shift 2 ;;
    --batches) batches="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --negatives) negatives="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "link.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ -x "$build/tests/bench/bench_link" ]] || { echo "link.sh: build first ($build/tests/bench/bench_link missing)" >&2; exit 1; }

work="$(mktemp -d "${TMPDIR:-/tmp}/dgld-link-bench.XXXXXX")"
trap 'rm -rf "$work"' EXIT
echo "partitioning SBM ${nodes} nodes (avg degree 20, 100-dim features, link split 0.85,0.05,0.1) into 2 parts..."
"$build/partition/dgl-partition" --log-level warn \
  --generate "sbm:nodes=${nodes},avg_degree=20,classes=47,feat_dim=100,seed=1" \
  --num-parts 2 --link-split 0.85,0.05,0.1 --link-negatives 0 \
  --graph-name bench --output "$work/parts" >/dev/null
base=$(( 20000 + RANDOM % 20000 ))
printf '127.0.0.1 %d\n127.0.0.1 %d\n' "$base" "$((base + 10))" > "$work/ip_config.txt"
mkdir -p bench-results
"$build/tests/bench/bench_link" --part-config "$work/parts/bench.json" --ip-config "$work/ip_config.txt" \
  --batch 1000 --fanouts 10,25 --negatives "$negatives" --batches "$batches" --threads "$threads" \
  --json bench-results/link.json --log-level warn
