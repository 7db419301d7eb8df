#!/usr/bin/env bash
# One entry point for the benchmarks. Each prints a small table and
# `ratio: <name> <value> (target <t>)` lines, and writes JSON to bench-results/.
# Usage: scripts/bench/run.sh [partition|server|sampling|link|hetero|kernels|epoch|accuracy|load|python|models|scaleout|all] [--scale small|medium|products]
#   scaleout (root, emulated machines; not part of 'all'): strong and weak scaling on 2, 4, 8 machines, then the cost model.
#   small: under 5 minutes for 'all' on a 2-core machine (200 k-node graphs, a 20 s load test);
#   medium: 1 M-node graphs (the size the epoch and sampling targets are stated for);
#   products: ogbn-products size.
set -euo pipefail
cd "$(dirname "$0")/../.."
what=${1:-all}
shift || true
scale=small
while [[ $# -gt 0 ]]; do
  case "$1" in
    --scale) scale="$2"; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
case "$scale" in
  small) part_nodes=200000; server_nodes=200000; sampling_nodes=200000; epoch_nodes=200000; epoch_rounds=1; acc_nodes=50000; load_seconds=20 ;;
  medium) part_nodes=1000000; server_nodes=1000000; sampling_nodes=1000000; epoch_nodes=1000000; epoch_rounds=3; acc_nodes=200000; load_seconds=120 ;;
  products) part_nodes=2449029; server_nodes=2449029; sampling_nodes=2449029; epoch_nodes=2449029; epoch_rounds=2; acc_nodes=500000; load_seconds=300 ;;
  *) echo "run.sh: --scale must be small, medium or products" >&2; exit 2 ;;
esac

bash scripts/setup.sh >/dev/null
[ -f build/build.ninja ] || meson setup build --buildtype=release >/dev/null
if ! build_log=$(ninja -C build 2>&1); then echo "$build_log" >&2; exit 1; fi

run_one() {
  case "$1" in
    partition) bash scripts/bench/partition.sh --nodes "$part_nodes" --build build --json ;;
    server) bash scripts/bench/server.sh --nodes "$server_nodes" --build build ;;
    sampling)
      if [[ -x scripts/bench/sampling.sh ]]; then bash scripts/bench/sampling.sh --nodes "$sampling_nodes" --build build
      else echo "run.sh: the sampling benchmark is not in this tree yet" >&2; return 2; fi ;;
    link) bash scripts/bench/link.sh --nodes "$sampling_nodes" --build build ;;
    hetero) bash scripts/bench/hetero.sh --papers "$((sampling_nodes * 2 / 3))" --build build ;;
    kernels) bash scripts/bench/kernels.sh --build build ;;
    epoch)
      bash scripts/bench/epoch.sh --nodes "$epoch_nodes" --rounds "$epoch_rounds" --build build
      bash scripts/bench/epoch.sh --dgl-config --rounds "$epoch_rounds" --build build ;;
    accuracy)
      bash scripts/bench/accuracy.sh --nodes "$acc_nodes" --build build
      bash scripts/bench/link_accuracy.sh --build build
      bash scripts/bench/hetero_accuracy.sh --build build ;;
    load) bash scripts/bench/load.sh --nodes "$server_nodes" --seconds "$load_seconds" --build build ;;
    python) bash scripts/bench/python.sh --nodes "$epoch_nodes" --build build ;;
    models) bash scripts/bench/models.sh --nodes "$epoch_nodes" --build build ;;
    scaleout)
      bash scripts/bench/scaleout.sh --nodes "$epoch_nodes" --build build
      bash scripts/bench/scaleout.sh --nodes "$epoch_nodes" --weak --build build
      python3 scripts/bench/cost_model.py "$(ls -t bench-results/scaleout-*.json | sed -n 2p)" --papers100m ;;
    *) echo "run.sh: unknown benchmark '$1' (partition, server, sampling, link, hetero, kernels, epoch, accuracy, load, python, models, scaleout, all)" >&2; return 2 ;;
  esac
}

if [[ "$what" == all ]]; then
  for b in partition server sampling link hetero kernels epoch accuracy load python models; do
    [[ "$b" == sampling && ! -x scripts/bench/sampling.sh ]] && continue
    echo "==== $b"
    run_one "$b"
  done
else
  run_one "$what"
fi
