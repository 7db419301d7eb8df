#!/usr/bin/env bash
# Benchmark (not a test) of heterogeneous node classification (docs/heterogeneous.md) on the
# generated typed graph: dgl-partition --generate hsbm (20000 papers, 10000 authors, 64 venues,
# 200 topics, 8 classes, 32-dim paper and topic features) --add-reverse; trainer-host --model
# rgcn, 2 layers, hidden 32, embed 32, 4 bases, fanout 10,10 per edge type, lr 0.01, dropout
# 0.5, 20 epochs, 1024 seeds per step over all trainers (--batch-size 1024 / trainers); test
# accuracy of the papers, mean of seeds 0..2, for
#   - 2 partitions x 1 trainer (the reference configuration),
#   - the papers' own features only (--fan-out 0,0 --eval-fan-out 0: an MLP) in the same one,
#   - 1 partition x 1 trainer and 2 partitions x 2 trainers (4 trainers).
# And real data (when Cora is there, ../shared/datasets/cora or --cora DIR): Cora written in
# ogbn-mag's layout by scripts/cora_hetero.py (paper with its 1433 word features, labels and
# the public split; word without features, a learnable embedding; paper:cites:paper in both
# directions, paper:has:word and word:rev-has:paper), 2 partitions x 1 trainer, R-GCN hidden
# 64, embed 64, one weight per relation, fanout 10 per relation per layer, lr 0.01, dropout
# 0.5, batch 70 per trainer, 40 epochs, against the papers' own features; and the Python
# package's typed example (examples/python/train_dist_hetero.py: HeteroGraphConv(SAGEConv)
# over a linear projection of the papers' features and a DistEmbedding of the words, same
# hidden size, fanout, lr, dropout, batch and epochs); mean of the seeds.
# Prints
#   ratio: hetero_rgcn_minus_own_features <v> (target >= 0.10)
#   ratio: hetero_acc_spread_1_2_4_trainers <v> (target <= 0.01)
#   ratio: hetero_cora_rgcn_test_acc <v> (target >= 0.70)
#   ratio: hetero_cora_rgcn_minus_own_features <v> (target >= 0.10)
#   ratio: hetero_cora_python_sage_test_acc <v> (target >= 0.70)
#   ratio: hetero_cora_python_sage_minus_own_features <v> (target >= 0.10)
#
# Usage: scripts/bench/hetero_accuracy.sh [--papers N] [--epochs E] [--seeds "0 1 2"] [--cora DIR]
#                                         [--build DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
papers=20000
epochs=20
seeds="0 1 2"
build=build
cora=../shared/datasets/cora
while [[ $# -gt 0 ]]; do
  case "$1" in
    --papers) papers="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    --seeds) seeds="$2"; shift 2 ;;
    --cora) cora="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "hetero_accuracy.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
bin="$(realpath "$build")"
for b in partition/dgl-partition launcher/launch/dgl-launch daemons/trainer_host/trainer-host; do
  [[ -x "$bin/$b" ]] || { echo "hetero_accuracy.sh: build first ($bin/$b missing)" >&2; exit 1; }
done
work="$(mktemp -d "${TMPDIR:-/tmp}/dgld-hetero-accuracy.XXXXXX")"
trap 'rm -rf "$work"' EXIT
spec="hsbm:papers=${papers},authors=$((papers / 2)),venues=64,topics=200,classes=8,feat_dim=32,seed=1"
for parts in 1 2; do
  "$bin/partition/dgl-partition" --log-level warn --generate "$spec" --add-reverse --num-parts "$parts" \
    --graph-name hsbm --output "$work/p$parts" --seed 0 >/dev/null
done
if [[ -f "$cora/raw/edge.csv.gz" || -f "$cora/raw/edge.csv" ]]; then
  /usr/bin/python3 scripts/cora_hetero.py --cora "$cora" --out "$work/cora-mag" >/dev/null
  "$bin/partition/dgl-partition" --log-level warn --input "ogb:$work/cora-mag" --num-parts 2 --graph-name hsbm \
    --output "$work/cora2" --seed 0 >/dev/null
else
  echo "hetero_accuracy.sh: Cora is not at $cora: skipping the real-data case" >&2
fi
common=(--model rgcn --num-layers 2 --lr 0.01 --dropout 0.5 --eval-every 0 --log-every 0 --no-progress)
global_batch=1024
hsbm_flags=("${common[@]}" --num-hidden 32 --embed-dim 32 --num-bases 4 --num-epochs "$epochs")
cora_flags=("${common[@]}" --num-hidden 64 --embed-dim 64 --num-bases 0 --num-epochs 40 --batch-size 70)

# run <name> <parts> <trainers per machine> <seed> <extra flags...>: prints "name seed test_acc".
# The generated graph's partitions ($work/p<parts>, 1024 seeds a step over all trainers), or
# with name cora-*, Cora's ($work/cora2).
run() {
  local name="$1" parts="$2" per="$3" seed="$4"
  local dir="p$parts" flags=("${hsbm_flags[@]}" --batch-size "$((global_batch / (parts * per)))")
  [[ "$name" == cora-* ]] && { dir=cora2; flags=("${cora_flags[@]}"); }
  shift 4
  local base=$(( 20000 + RANDOM % 20000 ))
  : > "$work/ip_config.txt"
  for ((m = 0; m < parts; m++)); do echo "127.0.0.1 $((base + 10 * m))" >> "$work/ip_config.txt"; done
  (cd "$work" && "$bin/launcher/launch/dgl-launch" --local --no-copy --workspace "$work" --ip-config ip_config.txt \
     --part-config "$dir/hsbm.json" --num-trainers "$per" -- "$bin/daemons/trainer_host/trainer-host" \
     "${flags[@]}" --seed "$seed" --metrics-out metrics.json "$@" \
     > "$work/launch.log" 2>&1) || {
    echo "hetero_accuracy.sh: the $name job failed:" >&2; tail -20 "$work/launch.log" >&2; exit 1; }
  /usr/bin/python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print(sys.argv[2], sys.argv[3], m["test_acc"])' \
    "$work/metrics.json" "$name" "$seed"
}

# run_python <seed>: the Python typed example on Cora's partitions; prints "cora-python seed test_acc".
run_python() {
  local seed="$1" base=$(( 20000 + RANDOM % 20000 ))
  printf '127.0.0.1 %d\n127.0.0.1 %d\n' "$base" "$((base + 10))" > "$work/ip_config.txt"
  (cd "$work" && "$bin/launcher/launch/dgl-launch" --local --no-copy --workspace "$work" --ip-config ip_config.txt \
     --part-config cora2/hsbm.json --num-trainers 1 --extra-envs "PYTHONPATH=$bin/python" -- /usr/bin/python3 \
     "$example" --graph_name hsbm --ip_config ip_config.txt --part_config cora2/hsbm.json --seed "$seed" \
     --num_hidden 64 --fan_out 10,10 --lr 0.01 --dropout 0.5 --batch_size 70 --num_epochs 40 \
     --metrics_out metrics.json > "$work/launch.log" 2>&1) || {
    echo "hetero_accuracy.sh: the Python job failed:" >&2; tail -20 "$work/launch.log" >&2; exit 1; }
  /usr/bin/python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print("cora-python", sys.argv[2], m["test_acc"])' \
    "$work/metrics.json" "$seed"
}
example="$(realpath examples/python/train_dist_hetero.py)"

results="$work/results.txt"
for seed in $seeds; do
  echo "seed $seed: 2x1 trainers (rgcn), own features only, 1x1, 2x2..." >&2
  run rgcn-2 2 1 "$seed" --fan-out 10,10 >> "$results"
  run own-2 2 1 "$seed" --fan-out 0,0 --eval-fan-out 0 >> "$results"
  run rgcn-1 1 1 "$seed" --fan-out 10,10 >> "$results"
  run rgcn-4 2 2 "$seed" --fan-out 10,10 >> "$results"
  if [[ -d "$work/cora2" ]]; then
    echo "seed $seed: Cora as paper/word, 2x1 trainers (rgcn), own features only..." >&2
    run cora-rgcn 2 1 "$seed" --fan-out 10,10 >> "$results"
    run cora-own 2 1 "$seed" --fan-out 0,0 --eval-fan-out 0 >> "$results"
    echo "seed $seed: Cora as paper/word, 2x1 trainers, Python HeteroGraphConv(SAGEConv)..." >&2
    run_python "$seed" >> "$results"
  fi
done
mkdir -p bench-results
/usr/bin/python3 - "$results" <<'PY'
import collections, json, statistics, sys
by = collections.defaultdict(list)
for line in open(sys.argv[1]):
    if line.strip():
        name, seed, acc = line.split()
        by[name].append((int(seed), float(acc)))
mean = {k: statistics.mean(a for _, a in v) for k, v in by.items()}
names = {"rgcn-2": "R-GCN, 2 x 1 trainers", "own-2": "own features only, 2 x 1", "rgcn-1": "R-GCN, 1 trainer",
         "rgcn-4": "R-GCN, 2 x 2 trainers", "cora-rgcn": "Cora paper/word: R-GCN", "cora-own": "Cora: own features",
         "cora-python": "Cora: Python typed SAGE"}
print()
print(f"{'configuration':<28} {'test acc':>9}   per seed")
for k in (k for k in names if k in by):
    print(f"{names[k]:<28} {mean[k]:>9.4f}   " + ", ".join(f"{a:.4f}" for _, a in sorted(by[k])))
spread = max(mean[k] for k in ("rgcn-1", "rgcn-2", "rgcn-4")) - min(mean[k] for k in ("rgcn-1", "rgcn-2", "rgcn-4"))
print(f"ratio: hetero_rgcn_minus_own_features {mean['rgcn-2'] - mean['own-2']:+.4f} (target >= 0.10)")
print(f"ratio: hetero_acc_spread_1_2_4_trainers {spread:.4f} (target <= 0.01)")
if "cora-rgcn" in mean:
    print(f"ratio: hetero_cora_rgcn_test_acc {mean['cora-rgcn']:.4f} (target >= 0.70)")
    print(f"ratio: hetero_cora_rgcn_minus_own_features {mean['cora-rgcn'] - mean['cora-own']:+.4f} (target >= 0.10)")
    print(f"ratio: hetero_cora_python_sage_test_acc {mean['cora-python']:.4f} (target >= 0.70)")
    print(f"ratio: hetero_cora_python_sage_minus_own_features {mean['cora-python'] - mean['cora-own']:+.4f} "
          f"(target >= 0.10)")
json.dump({k: v for k, v in by.items()}, open("bench-results/hetero_accuracy.json", "w"), indent=2)
PY
