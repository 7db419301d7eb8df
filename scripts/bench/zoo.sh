#!/usr/bin/env bash
# Benchmark (not a test): dgld.nn's model zoo (examples/python/zoo.py) on Cora
# (../shared/datasets/cora, public split), each model 2-layer, mini-batch
# NeighborSampler([10, 25]), batch 140, hidden 64 (GAT, GATv2: 8 heads of 8,
# then 1 head), dropout 0.5, Adam lr 0.01, weight decay 5e-4, 60 epochs,
# Cora's 0/1 features as shipped (as DGL's figures were taken; --row-normalize
# scales each row to sum 1), full-neighbour test accuracy, 2 machines x 1
# trainer under dgl-launch --local, mean of seeds 0-2; against DGL 1.1.3's
# figures for exactly this configuration (single process, seeds 0-2).
# Prints a table and one line per model:
#   ratio: zoo_<model>_minus_dgl <delta> (target >= -0.02)
#
# Usage: scripts/bench/zoo.sh [--models "sage-mean gat ..."] [--seeds "0 1 2"] [--row-normalize]
#                             [--cora DIR] [--build DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
cora=../shared/datasets/cora
build=build
models="sage-mean sage-gcn sage-pool sage-lstm gcn gat gatv2 gin"
seeds="0 1 2"
features=
while [[ $# -gt 0 ]]; do
  case "$1" in
    --models) models="$2"; shift 2 ;;
    --seeds) seeds="$2"; shift 2 ;;
    --row-normalize) features=--row_normalize; shift ;;
    --raw-features) features=""; shift ;;  # the default; kept for older command lines
    --cora) cora="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "zoo.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ -f "$cora/raw/edge.csv.gz" ]] || { echo "zoo.sh: Cora is not at $cora (it is in the shared folder next to the repo)" >&2; exit 1; }
bin="$(realpath "$build")"
for b in partition/dgl-partition launcher/launch/dgl-launch; do
  [[ -x "$bin/$b" ]] || { echo "zoo.sh: build first ($bin/$b missing)" >&2; exit 1; }
done
example="$(realpath examples/python/zoo.py)"
work="$(mktemp -d "${TMPDIR:-/tmp}/dgld-zoo.XXXXXX")"
trap 'rm -rf "$work"' EXIT
"$bin/partition/dgl-partition" --input "ogb:$cora" --num-parts 2 --graph-name cora --output "$work/cora" \
  --log-level warn >/dev/null
declare -A dgl=([sage-mean]=0.776 [sage-gcn]=0.800 [sage-pool]=0.736 [sage-lstm]=0.711 [gcn]=0.776 [gat]=0.775
                [gatv2]=0.778 [gin]=0.732)
: > "$work/results.txt"
for model in $models; do
  for seed in $seeds; do
    base=$(( 20000 + RANDOM % 20000 ))
    printf '127.0.0.1 %d\n127.0.0.1 %d\n' "$base" "$((base + 10))" > "$work/ip_config.txt"
    if ! (cd "$work" && "$bin/launcher/launch/dgl-launch" --local --no-copy --workspace "$work" \
          --ip-config ip_config.txt --part-config cora/cora.json --num-trainers 1 --log-level warn \
          --extra-envs "PYTHONPATH=$bin/python" -- /usr/bin/python3 "$example" --graph_name cora \
          --ip_config ip_config.txt --part_config cora/cora.json --model "$model" --seed "$seed" $features \
          --metrics_out m.json > "$work/launch.log" 2>&1); then
      echo "zoo.sh: $model seed $seed failed:" >&2; tail -20 "$work/launch.log" >&2; exit 1
    fi
    acc=$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print(m["test_acc"], m["train_s"])' "$work/m.json")
    echo "$model $seed $acc" | tee -a "$work/results.txt"
  done
done
echo
printf '%-10s %8s %8s %8s\n' model dgld DGL delta
for model in $models; do
  mean=$(awk -v m="$model" '$1 == m {s += $3; n++} END {printf "%.4f", s / n}' "$work/results.txt")
  delta=$(python3 -c "print(f'{$mean - ${dgl[$model]}:+.4f}')")
  printf '%-10s %8s %8s %8s\n' "$model" "$mean" "${dgl[$model]}" "$delta"
done
for model in $models; do
  mean=$(awk -v m="$model" '$1 == m {s += $3; n++} END {printf "%.4f", s / n}' "$work/results.txt")
  echo "ratio: zoo_${model}_minus_dgl $(python3 -c "print(f'{$mean - ${dgl[$model]}:+.4f}')") (target >= -0.02)"
done
