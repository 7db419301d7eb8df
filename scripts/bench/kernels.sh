#!/usr/bin/env bash
# Benchmark (not a test): the model step on blocks of real mini-batches, the
# fused message-passing kernels (common/ops) against the index_select +
# index_add_ reference, per model (GraphSAGE, GCN, GAT with 2 heads), in
# alternating rounds of one run; and the fused step against the
# memory-bandwidth bound of reading each block's CSR and the input rows once
# (memcpy bandwidth measured in the same run); and DGL's update_all(u_mul_e,
# sum) and apply_edges(u_dot_v) on each batch's input block, forward +
# backward, the fused gspmm / gsddmm ops against index_select + index_add_.
# Graph: the DistDGL benchmark graph (200,000 nodes, ~4.09 M edges, 100-dim
# features, 47 classes), one partition; batches of 1000 seeds, fanout 10,25,
# hidden 16, one LibTorch thread (as each trainer of the 2-trainer epoch
# benchmark runs).
#
# Last, in Python: a GatedMean layer with UDFs against the same layer with
# built-ins (tests/bench/udf_bench.py: ratio gated_mean_udf_vs_builtin), and
# dgld.nn's SAGEConv('pool') and GINConv against their aggregation in
# index_select + index_add_ / scatter_reduce (tests/bench/nn_bench.py).
#
# Usage: scripts/bench/kernels.sh [--nodes N] [--rounds R] [--threads T] [--build DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
nodes=200000
rounds=5
threads=1
build=build
while [[ $# -gt 0 ]]; do
  case "$1" in
    --nodes) nodes="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "kernels.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
part="$build/partition/dgl-partition"
bench="$build/tests/bench/bench_kernels"
for b in "$part" "$bench"; do
  [[ -x "$b" ]] || { echo "kernels.sh: build first ($b missing)" >&2; exit 1; }
done
work="$(mktemp -d "${TMPDIR:-/tmp}/dgld-kernel-bench.XXXXXX")"
trap 'rm -rf "$work"' EXIT

echo "partitioning an SBM graph of ${nodes} nodes (1 part)..."
"$part" --log-level warn --generate "sbm:nodes=${nodes},avg_degree=21.2,classes=47,feat_dim=100,seed=1" \
  --num-parts 1 --graph-name g --output "$work/p1" >/dev/null
mkdir -p bench-results
OMP_NUM_THREADS="$threads" OMP_WAIT_POLICY=PASSIVE "$bench" --part-config "$work/p1/g.json" --rounds "$rounds" \
  --threads "$threads" --json bench-results/kernels.json

# A GatedMean layer written with UDFs against the same layer with built-ins
# (Python, dgld's graph API; tests/bench/udf_bench.py).
if ls "$build"/python/dgld/_C*.so >/dev/null 2>&1; then
  echo "GatedMean with UDFs vs built-ins (Python)..."
  # Importing dgld tunes glibc to keep large freed buffers for reuse, as the
  # daemons do (common/memory.h): a step does not page-fault them afresh.
  PYTHONPATH="$build/python" OMP_NUM_THREADS="$threads" OMP_WAIT_POLICY=PASSIVE \
    /usr/bin/python3 tests/bench/udf_bench.py --rounds "$rounds" --threads "$threads"
  echo "dgld.nn's SAGEConv('pool') and GINConv, fused against index_add (Python)..."
  PYTHONPATH="$build/python:tests/bench" OMP_NUM_THREADS="$threads" OMP_WAIT_POLICY=PASSIVE \
    /usr/bin/python3 tests/bench/nn_bench.py --rounds "$rounds" --threads "$threads"
else
  echo "kernels.sh: the dgld Python package is not built: skipping the UDF comparison"
fi
