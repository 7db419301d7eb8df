#!/usr/bin/env bash
# Benchmark (not a test) of heterogeneous mini-batches, compared in the same run: seeds/s of
# typed batches (a fanout per edge type and layer, blocks with edge types, per-type feature
# rows, the target type's labels) made by DistDataLoader through two graph-servers on
# loopback, against in-process sampling and feature gather of the same batches of the same
# graph in memory (ratio line; target >= 0.5 as for homogeneous batches), and the same
# batches made by one sampler-worker (edge types and typed rows in its replies; ratio
# hetero_sampler_worker_vs_inprocess, target >= 0.5). Graph: hsbm with
# reverse relations (4 node types, 8 edge types), 2 partitions, trainer 0 of 2, batch 1000,
# fanouts 10,10 per edge type. Results go to bench-results/hetero.json.
#
# Usage: scripts/bench/hetero.sh [--papers N] [--batches B] [--threads T] [--build DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
papers=400000
batches=60
threads=2
build=build
while [[ $# -gt 0 ]]; do
  case "$1" in
    --papers) papers="$2"; shift 2 ;;
    --batches) batches="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "hetero.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ -x "$build/tests/bench/bench_hetero" ]] || { echo "hetero.sh: build first ($build/tests/bench/bench_hetero missing)" >&2; exit 1; }

work="$(mktemp -d "${TMPDIR:-/tmp}/dgld-hetero-bench.XXXXXX")"
trap 'rm -rf "$work"' EXIT
authors=$((papers / 2))
echo "partitioning hsbm: ${papers} papers, ${authors} authors, 128-dim paper features, reverse relations, into 2 parts..."
"$build/partition/dgl-partition" --log-level warn \
  --generate "hsbm:papers=${papers},authors=${authors},venues=200,topics=2000,classes=16,feat_dim=128,seed=1" \
  --add-reverse --num-parts 2 --graph-name bench --output "$work/parts" >/dev/null
base=$(( 20000 + RANDOM % 20000 ))
printf '127.0.0.1 %d\n127.0.0.1 %d\n' "$base" "$((base + 10))" > "$work/ip_config.txt"
mkdir -p bench-results
"$build/tests/bench/bench_hetero" --part-config "$work/parts/bench.json" --ip-config "$work/ip_config.txt" \
  --batch 1000 --fanouts 10,10 --batches "$batches" --threads "$threads" \
  --json bench-results/hetero.json --log-level warn
