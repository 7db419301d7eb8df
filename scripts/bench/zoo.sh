#!/usr/bin/env bash
# Benchmark (not a test): dgld.nn's model zoo (examples/python/zoo.py) on Cora
# (../shared/datasets/cora, public split), each model 2-layer, mini-batch
# NeighborSampler([10, 25]), batch 140, hidden 64 (GAT, GATv2: 8 heads of 8,
# then 1 head), dropout 0.5, Adam lr 0.01, weight decay 5e-4, 60 epochs,
# Cora's 0/1 features as shipped (as DGL's figures were taken; --row-normalize
# scales each row to sum 1), full-neighbour test accuracy, 2 machines x 1
# trainer under dgl-launch --local (--parts 1: one machine, one trainer, as
# DGL's runs), mean of seeds 0-2; against DGL 1.1.3's
# figures for exactly this configuration (single process, seeds 0-2).
# Prints a table and one line per model:
#   ratio: zoo_<model>_minus_dgl <delta> (target >= -0.02)
#
#
# --distdgl DIR runs the same zoo.py with DGL itself beside it (DIR: a DGL
# 1.1.3 checkout built from source, never a dependency): its two import lines
# switched to dgl, on a partition DGL's own partition_graph made
# (lib/dgl_cora_partition.py), standalone (DGL_DIST_MODE=standalone, one
# process, a 1-process gloo group for DDP), the same seeds; then each model's
# DGL runs, their mean and min-max, and whether dgld's mean lies within DGL's
# spread over those seeds:
#   ratio: zoo_<model>_within_dgl_spread <0|1> (dgld mean, DGL min..max)
#
# Usage: scripts/bench/zoo.sh [--models "sage-mean gat ..."] [--seeds "0 1 2"] [--row-normalize]
#                             [--cora DIR] [--build DIR] [--distdgl DIR] [--parts 1|2]
set -euo pipefail
cd "$(dirname "$0")/../.."
cora=../shared/datasets/cora
build=build
models="sage-mean sage-gcn sage-pool sage-lstm gcn gat gatv2 gin"
seeds="0 1 2"
features=
distdgl=
parts=2
while [[ $# -gt 0 ]]; do
  case "$1" in
    --models) models="$2"; shift 2 ;;
    --seeds) seeds="$2"; shift 2 ;;
    --row-normalize) features=--row_normalize; shift ;;
    --raw-features) features=""; shift ;;  # the default; kept for older command lines
    --cora) cora="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --distdgl) distdgl="$(realpath "$2")"; shift 2 ;;
    --parts) parts="$2"; shift 2 ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
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
[[ $parts == 1 || $parts == 2 ]] || { echo "zoo.sh: --parts must be 1 or 2, got '$parts'" >&2; exit 2; }
"$bin/partition/dgl-partition" --input "ogb:$cora" --num-parts "$parts" --graph-name cora --output "$work/cora" \
  --log-level warn >/dev/null
declare -A dgl=([sage-mean]=0.776 [sage-gcn]=0.800 [sage-pool]=0.736 [sage-lstm]=0.711 [gcn]=0.776 [gat]=0.775
                [gatv2]=0.778 [gin]=0.732)
: > "$work/results.txt"
for model in $models; do
  for seed in $seeds; do
    base=$(( 20000 + RANDOM % 20000 ))
    printf '127.0.0.1 %d\n' "$base" > "$work/ip_config.txt"
    [[ $parts == 2 ]] && printf '127.0.0.1 %d\n' "$((base + 10))" >> "$work/ip_config.txt"
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
if [[ -n $distdgl ]]; then
  # DGL itself, standalone, on DGL's own partition of the same graph.
  dgl_env=(DGLBACKEND=pytorch PYTHONPATH="$distdgl/python")
  env "${dgl_env[@]}" /usr/bin/python3 -c "import dgl" 2>/dev/null || {
    echo "zoo.sh: $distdgl/python has no importable dgl (a built DGL checkout is needed)" >&2; exit 1; }
  env "${dgl_env[@]}" /usr/bin/python3 scripts/bench/lib/dgl_cora_partition.py "$cora" "$work/dgl-parts" \
    > "$work/dgl-partition.log" 2>&1 || { echo "zoo.sh: DGL's partition_graph failed:" >&2; tail "$work/dgl-partition.log" >&2; exit 1; }
  sed -e 's/^import dgld as dgl$/import dgl/' -e 's/^import dgld.nn.pytorch as dglnn$/import dgl.nn.pytorch as dglnn/' \
    "$example" > "$work/zoo_dgl.py"
  [[ $(grep -c '^import dgl$\|^import dgl.nn.pytorch as dglnn$' "$work/zoo_dgl.py") == 2 ]] || {
    echo "zoo.sh: zoo.py's import lines changed; cannot switch them to dgl" >&2; exit 1; }
  echo "127.0.0.1 $(( 20000 + RANDOM % 20000 ))" > "$work/dgl_ip_config.txt"
  : > "$work/dgl_results.txt"
  for model in $models; do
    for seed in $seeds; do
      rm -f "$work/dgl.json"
      (cd "$work" && env "${dgl_env[@]}" DGL_DIST_MODE=standalone MASTER_ADDR=127.0.0.1 \
         MASTER_PORT=$(( 40000 + RANDOM % 20000 )) RANK=0 WORLD_SIZE=1 /usr/bin/python3 zoo_dgl.py --graph_name cora \
         --ip_config dgl_ip_config.txt --part_config dgl-parts/cora.json --model "$model" --seed "$seed" $features \
         --metrics_out dgl.json > dgl.log 2>&1) || { echo "zoo.sh: DGL's $model seed $seed failed:" >&2; tail -20 "$work/dgl.log" >&2; exit 1; }
      acc=$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print(m["test_acc"], m["train_s"])' "$work/dgl.json")
      echo "dgl $model $seed $acc" | tee -a "$work/dgl_results.txt"
    done
  done
fi
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
if [[ -n $distdgl ]]; then
  echo
  printf '%-10s %-34s %-34s %s\n' model "dgld (mean; runs)" "DGL itself (mean; min..max)" within
  for model in $models; do
    python3 - "$model" "$work/results.txt" "$work/dgl_results.txt" <<'PY'
import statistics, sys
model = sys.argv[1]
ours = [float(l.split()[2]) for l in open(sys.argv[2]) if l.split()[0] == model]
theirs = [float(l.split()[3]) for l in open(sys.argv[3]) if l.split()[1] == model]
m, lo, hi = statistics.mean(ours), min(theirs), max(theirs)
within = int(lo <= m <= hi)
print(f"{model:<10} {m:.4f} ({', '.join(f'{a:.3f}' for a in ours)})".ljust(46) +
      f"{statistics.mean(theirs):.4f} ({lo:.3f}..{hi:.3f})".ljust(35) + ("yes" if within else "no"))
print(f"ratio: zoo_{model}_within_dgl_spread {within} (dgld {m:.4f}, DGL {lo:.3f}..{hi:.3f} over {len(theirs)} seeds)")
PY
  done
fi
