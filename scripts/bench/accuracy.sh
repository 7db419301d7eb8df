#!/usr/bin/env bash
# Benchmark (not a test) of what distributed training learns, every job run
# by dgl-launch --local (simulated machines on loopback, as on a cluster):
#   cora:     GraphSAGE, GCN and GAT (--models) on ../shared/datasets/cora
#             (public split), 2 partitions, 2 trainers, 100 epochs, seeds 0..4
#             (skipped with a message when the dataset is absent). Target: mean
#             test accuracy >= 0.78 for each. With --baseline-build DIR the same
#             jobs run on that build's trainer-host too (same seeds, same
#             partitions) and each model prints its difference to it.
#   sbm:      GraphSAGE against the same network with fanout 0 (an MLP) on a
#             generated SBM graph, 2 partitions, 2 trainers. Target: GraphSAGE
#             ahead by >= 0.10.
#   trainers: the same GraphSAGE with 1, 2 and 4 trainers (1 machine x 1,
#             2 x 1, 2 x 2), each for the same number of optimiser steps (to a
#             plateau). Target: test accuracies within 0.01 of each other.
# Prints a table per part and `ratio:` lines; writes bench-results/accuracy.json.
#
# Usage: scripts/bench/accuracy.sh [--nodes N] [--cora PATH] [--build DIR] [--models "sage gcn gat"]
#                                  [--baseline-build DIR] [--cora-only]
set -euo pipefail
cd "$(dirname "$0")/../.."
nodes=50000
cora=../shared/datasets/cora
build=build
models="sage gcn gat"
baseline=""
cora_only=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --nodes) nodes="$2"; shift 2 ;;
    --cora) cora="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --models) models="$2"; shift 2 ;;
    --baseline-build) baseline="$(realpath "$2")"; shift 2 ;;
    --cora-only) cora_only=1; shift ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "accuracy.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
part="$(realpath "$build")/partition/dgl-partition"
launch="$(realpath "$build")/launcher/launch/dgl-launch"
trainer="$(realpath "$build")/daemons/trainer_host/trainer-host"
base_trainer="${baseline:+$baseline/daemons/trainer_host/trainer-host}"
base_launch="${baseline:+$baseline/launcher/launch/dgl-launch}"
for b in "$part" "$launch" "$trainer" $base_trainer $base_launch; do
  [[ -x "$b" ]] || { echo "accuracy.sh: build first ($b missing)" >&2; exit 1; }
done
work="$(mktemp -d "${TMPDIR:-/tmp}/dgld-accuracy-bench.XXXXXX")"
trap 'rm -rf "$work"' EXIT
results="$work/results.txt"
: > "$results"

# job NAME PARTS_JSON MACHINES TRAINERS_PER_MACHINE TRAINER_ARGS...: runs a job
# with dgl-launch --local and records NAME and its test accuracy ($run_trainer
# and $run_launch are the builds it runs).
run_trainer="$trainer" run_launch="$launch"
job() {
  local name=$1 config=$2 machines=$3 per=$4
  shift 4
  local dir="$work/$name"
  mkdir -p "$dir"
  local base=$(( 20000 + RANDOM % 20000 ))
  : > "$dir/ip_config.txt"
  for ((m = 0; m < machines; m++)); do echo "127.0.0.1 $((base + 10 * m))" >> "$dir/ip_config.txt"; done
  if ! (cd "$dir" && "$run_launch" --local --workspace "$dir/ws" --ip-config ip_config.txt --part-config "$config" \
        --num-trainers "$per" --num-servers 1 --num-omp-threads 1 --log-level warn -- \
        "$run_trainer" --num-threads 1 --log-every 0 --no-progress --metrics-out metrics.json "$@" \
        > "$dir/launch.log" 2>&1); then
    echo "accuracy.sh: job $name failed:" >&2; tail -20 "$dir/launch.log" >&2; exit 1
  fi
  local acc
  acc=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["test_acc"])' "$dir/metrics.json")
  echo "$name $acc" >> "$results"
  printf '  %-28s test acc %.4f\n' "$name" "$acc"
}

if [[ -f "$cora/raw/edge.csv.gz" ]]; then
  echo "== cora: $models, 2 partitions, 2 trainers, 100 epochs, seeds 0-4"
  "$part" --input "ogb:$cora" --num-parts 2 --graph-name cora --output "$work/cora" --log-level warn >/dev/null
  for model in $models; do
    for seed in 0 1 2 3 4; do
      run_trainer="$trainer" run_launch="$launch"
      job "cora-$model-seed$seed" "$work/cora/cora.json" 2 1 --model "$model" --num-epochs 100 --num-hidden 64 \
        --lr 0.01 --weight-decay 5e-4 --row-normalize --eval-every 0 --seed "$seed"
      if [[ -n "$baseline" ]]; then
        run_trainer="$base_trainer" run_launch="$base_launch"
        job "baseline-$model-seed$seed" "$work/cora/cora.json" 2 1 --model "$model" --num-epochs 100 \
          --num-hidden 64 --lr 0.01 --weight-decay 5e-4 --row-normalize --eval-every 0 --seed "$seed"
      fi
    done
  done
  run_trainer="$trainer"
else
  echo "== cora: skipped, the dataset is not at $cora (it is in the shared folder next to the repo)"
fi

if (( cora_only == 0 )); then
gen="sbm:nodes=${nodes},avg_degree=15,classes=8,feat_dim=32,seed=1"
echo "== sbm: ${nodes} nodes, GraphSAGE vs MLP (fanout 0), 2 partitions, 2 trainers, 20 epochs"
"$part" --generate "$gen" --num-parts 2 --graph-name sbm --output "$work/sbm2" --log-level warn >/dev/null
"$part" --generate "$gen" --num-parts 1 --graph-name sbm --output "$work/sbm1" --log-level warn >/dev/null
common=(--num-epochs 20 --lr 0.01 --eval-every 0 --seed 1)
job "sbm-sage" "$work/sbm2/sbm.json" 2 1 "${common[@]}"
job "sbm-mlp" "$work/sbm2/sbm.json" 2 1 "${common[@]}" --fan-out 0,0

# T trainers take T times fewer steps per epoch (each averages T batches), so
# each runs 30*T epochs: the same number of optimiser steps, to a plateau.
echo "== trainers: the same GraphSAGE with 1, 2 and 4 trainers, 30 x trainers epochs"
long=(--lr 0.01 --eval-every 0 --seed 1)
job "trainers-1" "$work/sbm1/sbm.json" 1 1 "${long[@]}" --num-epochs 30
job "trainers-2" "$work/sbm2/sbm.json" 2 1 "${long[@]}" --num-epochs 60
job "trainers-4" "$work/sbm2/sbm.json" 2 2 "${long[@]}" --num-epochs 120
fi

mkdir -p bench-results
python3 - "$results" <<'PY'
import json, statistics, sys
acc = dict(line.split() for line in open(sys.argv[1]))
acc = {k: float(v) for k, v in acc.items()}
out = {"test_acc": acc}
print()
models = sorted({k.split("-")[1] for k in acc if k.startswith("cora-")})
for model in models:
    cora = [v for k, v in acc.items() if k.startswith(f"cora-{model}-")]
    mean = statistics.mean(cora)
    out[f"cora_{model}_mean"] = mean
    print(f"cora {model}: test acc mean {mean:.4f}, min {min(cora):.4f}, max {max(cora):.4f} over {len(cora)} seeds")
    name = "cora_test_acc_mean" if model == "sage" else f"cora_{model}_test_acc_mean"
    print(f"ratio: {name} {mean:.4f} (target >= 0.78)")
    base = [v for k, v in acc.items() if k.startswith(f"baseline-{model}-")]
    if base:
        out[f"baseline_cora_{model}_mean"] = statistics.mean(base)
        print(f"ratio: cora_{model}_minus_baseline {mean - statistics.mean(base):+.4f} "
              f"(baseline {statistics.mean(base):.4f}; target within +-0.01)")
if "sbm-sage" not in acc:
    json.dump(out, open("bench-results/accuracy.json", "w"), indent=2)
    sys.exit(0)
margin = acc["sbm-sage"] - acc["sbm-mlp"]
out["sage_minus_mlp"] = margin
print(f"sbm: GraphSAGE {acc['sbm-sage']:.4f}, MLP {acc['sbm-mlp']:.4f}")
print(f"ratio: sage_minus_mlp_test_acc {margin:.4f} (target >= 0.10)")
t = [acc[f"trainers-{n}"] for n in (1, 2, 4)]
spread = max(t) - min(t)
out["trainers_spread"] = spread
print(f"trainers: 1 -> {t[0]:.4f}, 2 -> {t[1]:.4f}, 4 -> {t[2]:.4f}")
print(f"ratio: trainer_count_test_acc_spread {spread:.4f} (target <= 0.01)")
json.dump(out, open("bench-results/accuracy.json", "w"), indent=2)
PY
