#!/usr/bin/env bash
# Benchmark (not a test) of the mini-batch path, every comparison made in the same run:
#   seeds/s of blocks + input features + labels through DistDataLoader (num_samplers 0,
#   and 1 sampler-worker) vs in-process sampling + feature gather of the same graph in
#   memory (target: distributed >= 0.5x), with the time split into sampling, feature
#   fetch and waiting. SBM graph, 2 partitions, two graph-servers on loopback,
#   fanout 10,25, batch 1000. Results go to bench-results/sampling.json.
#
# Usage: scripts/bench/sampling.sh [--nodes N] [--batches B] [--threads T] [--build DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
nodes=1000000
batches=100
threads=2
build=build
while [[ $# -gt 0 ]]; do
  case "$1" in
    --nodes) nodes="$2"; shift 2 ;;
    --batches) batches="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "sampling.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ -x "$build/tests/bench/bench_sampling" ]] || { echo "sampling.sh: build first ($build/tests/bench/bench_sampling missing)" >&2; exit 1; }
[[ -x "$build/daemons/sampler_worker/sampler-worker" ]] || { echo "sampling.sh: sampler-worker missing in $build" >&2; exit 1; }

work="$(mktemp -d "${TMPDIR:-/tmp}/dgld-sampling-bench.XXXXXX")"
trap 'rm -rf "$work"' EXIT
echo "partitioning SBM ${nodes} nodes (avg degree 20, 100-dim features) into 2 parts..."
"$build/partition/dgl-partition" --log-level warn \
  --generate "sbm:nodes=${nodes},avg_degree=20,classes=47,feat_dim=100,seed=1" \
  --num-parts 2 --graph-name bench --output "$work/parts" >/dev/null
base=$(( 20000 + RANDOM % 20000 ))
printf '127.0.0.1 %d\n127.0.0.1 %d\n' "$base" "$((base + 10))" > "$work/ip_config.txt"
mkdir -p bench-results
"$build/tests/bench/bench_sampling" --part-config "$work/parts/bench.json" --ip-config "$work/ip_config.txt" \
  --batch 1000 --fanouts 10,25 --batches "$batches" --threads "$threads" \
  --json bench-results/sampling.json --log-level warn
