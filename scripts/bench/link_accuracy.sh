#!/usr/bin/env bash
# Benchmark (not a test) of link prediction quality on Cora (docs/link-prediction.md):
# a seeded 85/5/10 link split (dgl-partition --link-split 0.85,0.05,0.1 --seed 0,
# 100 negatives per held-out edge), trainer-host --task link, GraphSAGE encoder +
# dot scorer, hidden 128, lr 0.005, 5 negatives per training edge, fanout 10,10,
# row-normalised features, dropout 0.5, 100 epochs, 1024 training edges per step
# over all trainers (--batch-size 1024 / trainers, so every configuration takes
# the same steps), evaluated every 5 epochs with the weights of the best
# validation ROC-AUC kept (--keep-best auc; --keep-best off: the last epoch's);
# test ROC-AUC and MRR, mean of seeds 0..2, for
#   - 2 partitions x 1 trainer (the reference configuration),
#   - a feature-only MLP encoder (--fan-out 0,0) in the same configuration,
#   - 1 partition x 1 trainer and 2 partitions x 2 trainers (4 trainers).
# Prints
#   ratio: cora_link_test_auc <v> (target >= 0.90)
#   ratio: cora_link_mrr_sage_minus_mlp <v> (target > 0)
#   ratio: cora_link_auc_spread_1_2_4_trainers <v> (target <= 0.01)
#
# Usage: scripts/bench/link_accuracy.sh [--cora DIR] [--epochs E] [--seeds "0 1 2"] [--exclude reverse_id|none]
#                                      [--keep-best auc|mrr|off] [--build DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
cora=../shared/datasets/cora
epochs=100
seeds="0 1 2"
exclude=reverse_id
keep_best=auc
build=build
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cora) cora="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    --seeds) seeds="$2"; shift 2 ;;
    --exclude) exclude="$2"; shift 2 ;;
    --keep-best) keep_best="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "link_accuracy.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ -d "$cora/raw" ]] || { echo "link_accuracy.sh: no Cora dataset at $cora (OGB raw layout); skipped" >&2; exit 0; }
bin="$(realpath "$build")"
for b in partition/dgl-partition launcher/launch/dgl-launch daemons/trainer_host/trainer-host; do
  [[ -x "$bin/$b" ]] || { echo "link_accuracy.sh: build first ($bin/$b missing)" >&2; exit 1; }
done
work="$(mktemp -d "${TMPDIR:-/tmp}/dgld-link-accuracy.XXXXXX")"
trap 'rm -rf "$work"' EXIT
for parts in 1 2; do
  "$bin/partition/dgl-partition" --log-level warn --input "ogb:$(realpath "$cora")" --num-parts "$parts" \
    --graph-name cora --output "$work/p$parts" --link-split 0.85,0.05,0.1 --seed 0 >/dev/null
done
flags=(--task link --scorer dot --num-hidden 128 --lr 0.005 --num-negatives 5 --row-normalize --dropout 0.5
       --num-epochs "$epochs" --log-every 0 --no-progress --exclude "$exclude" --keep-best "$keep_best")
if [[ "$keep_best" == off ]]; then flags+=(--eval-every 0); else flags+=(--eval-every 5); fi
global_batch=1024

# run <name> <parts> <trainers per machine> <seed> <extra flags...>: prints "name seed auc mrr"
run() {
  local name="$1" parts="$2" per="$3" seed="$4"
  shift 4
  local base=$(( 20000 + RANDOM % 20000 ))
  : > "$work/ip_config.txt"
  for ((m = 0; m < parts; m++)); do echo "127.0.0.1 $((base + 10 * m))" >> "$work/ip_config.txt"; done
  (cd "$work" && "$bin/launcher/launch/dgl-launch" --local --no-copy --workspace "$work" --ip-config ip_config.txt \
     --part-config "p$parts/cora.json" --num-trainers "$per" -- "$bin/daemons/trainer_host/trainer-host" \
     "${flags[@]}" --batch-size "$((global_batch / (parts * per)))" --seed "$seed" --metrics-out metrics.json "$@" \
     > "$work/launch.log" 2>&1) || {
    echo "link_accuracy.sh: the $name job failed:" >&2; tail -20 "$work/launch.log" >&2; exit 1; }
  /usr/bin/python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["test"]; print(sys.argv[2], sys.argv[3], m["roc_auc"], m["mrr"])' \
    "$work/metrics.json" "$name" "$seed"
}

results="$work/results.txt"
for seed in $seeds; do
  echo "seed $seed: 2x1 trainers (sage), mlp, 1x1, 2x2..." >&2
  run sage-2 2 1 "$seed" --fan-out 10,10 >> "$results"
  run mlp-2 2 1 "$seed" --fan-out 0,0 >> "$results"
  run sage-1 1 1 "$seed" --fan-out 10,10 >> "$results"
  run sage-4 2 2 "$seed" --fan-out 10,10 >> "$results"
done
mkdir -p bench-results
/usr/bin/python3 - "$results" <<'PY'
import collections, json, statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
by = collections.defaultdict(list)
for name, seed, auc, mrr in rows:
    by[name].append((int(seed), float(auc), float(mrr)))
mean = {k: (statistics.mean(a for _, a, _ in v), statistics.mean(m for _, _, m in v)) for k, v in by.items()}
print()
print(f"{'configuration':<28} {'test AUC':>9} {'test MRR':>9}   per seed (AUC / MRR)")
names = {"sage-2": "SAGE + dot, 2 x 1 trainers", "mlp-2": "MLP + dot, 2 x 1 trainers",
         "sage-1": "SAGE + dot, 1 trainer", "sage-4": "SAGE + dot, 2 x 2 trainers"}
for k in ("sage-2", "mlp-2", "sage-1", "sage-4"):
    if k in by:
        print(f"{names[k]:<28} {mean[k][0]:>9.4f} {mean[k][1]:>9.4f}   " +
              ", ".join(f"{a:.3f}/{m:.3f}" for _, a, m in sorted(by[k])))
spread = max(mean[k][0] for k in ("sage-1", "sage-2", "sage-4")) - min(mean[k][0] for k in ("sage-1", "sage-2", "sage-4"))
print(f"ratio: cora_link_test_auc {mean['sage-2'][0]:.4f} (target >= 0.90)")
print(f"ratio: cora_link_mrr_sage_minus_mlp {mean['sage-2'][1] - mean['mlp-2'][1]:+.4f} (target > 0)")
print(f"ratio: cora_link_auc_spread_1_2_4_trainers {spread:.4f} (target <= 0.01)")
json.dump({k: v for k, v in by.items()}, open("bench-results/link_accuracy.json", "w"), indent=2)
PY
