#!/usr/bin/env bash
# The main job, end to end on this machine: installs what dgld needs, builds,
# generates a graph (a stochastic block model, ~100 k nodes, fixed seed),
# partitions it with METIS, checks the partitions, launches a job with
# dgl-launch --local (one graph-server and one trainer per partition, each
# partition a simulated machine on loopback), trains GraphSAGE, evaluates, and
# prints a table of the epochs and the final test accuracy. Writes
# metrics.json and a plot (training.png) under the output directory.
#
# Usage: scripts/demo.sh [--dataset gen|ogb:PATH] [--num-parts N] [--nodes N]
#                        [--epochs E] [--num-samplers K] [--output DIR] [--python]
#   --dataset ogb:../shared/datasets/cora   Cora instead of the generated graph
#   --python    train with examples/python/train_dist.py (DGL's Python API on
#               the dgld package) instead of trainer-host
set -euo pipefail
cd "$(dirname "$0")/.."

DATASET=gen
NUM_PARTS=2
NODES=100000
EPOCHS=10
SAMPLERS=0
OUT=demo-output
PYTHON=0
while [ $# -gt 0 ]; do
  case "$1" in
    --dataset) DATASET=$2; shift 2 ;;
    --num-parts) NUM_PARTS=$2; shift 2 ;;
    --nodes) NODES=$2; shift 2 ;;
    --epochs) EPOCHS=$2; shift 2 ;;
    --num-samplers) SAMPLERS=$2; shift 2 ;;
    --output) OUT=$2; shift 2 ;;
    --python) PYTHON=1; shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "demo.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
  esac
done

bash scripts/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
[ -f "$BUILD_DIR/build.ninja" ] || meson setup "$BUILD_DIR" --buildtype=release
# The programs only (the tests build with scripts/test.sh).
TARGETS=(partition/dgl-partition launcher/launch/dgl-launch daemons/graph_server/graph-server
         daemons/sampler_worker/sampler-worker daemons/trainer_host/trainer-host)
if [ "$PYTHON" = 1 ]; then
  TARGETS+=("python/dgld/_C$(/usr/bin/python3 -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')")
fi
ninja -C "$BUILD_DIR" -j "$(nproc)" "${TARGETS[@]}"
BIN=$(realpath "$BUILD_DIR")
PART=$BIN/partition/dgl-partition
LAUNCH=$BIN/launcher/launch/dgl-launch
TRAINER=$BIN/daemons/trainer_host/trainer-host

mkdir -p "$OUT"
OUT=$(realpath "$OUT")
rm -rf "$OUT/parts" "$OUT/dgld-logs"
TRAIN_ARGS=(--num-epochs "$EPOCHS" --eval-every 5 --log-every 0)
if [ "$DATASET" = gen ]; then
  INPUT=(--generate "sbm:nodes=$NODES,avg_degree=20,classes=47,feat_dim=100,seed=1")
  NAME=sbm
  TRAIN_ARGS+=(--lr 0.01)
else
  INPUT=(--input "$DATASET")
  NAME=$(basename "${DATASET#ogb:}")
  # Cora-sized graphs: one batch per epoch, so more epochs and the settings
  # of the GCN paper (scripts/bench/accuracy.sh reaches 0.80 with them).
  TRAIN_ARGS+=(--lr 0.01 --num-hidden 64 --weight-decay 5e-4 --row-normalize)
fi

echo "== 1. partitioning $NAME into $NUM_PARTS parts with METIS"
"$PART" "${INPUT[@]}" --num-parts "$NUM_PARTS" --part-method metis --balance-train \
  --graph-name "$NAME" --output "$OUT/parts" --stats-json "$OUT/partition-stats.json"
echo "== 2. verifying $OUT/parts/$NAME.json"
"$PART" --verify "$OUT/parts/$NAME.json"

base=$(( 30000 + RANDOM % 20000 ))
: > "$OUT/ip_config.txt"
for ((m = 0; m < NUM_PARTS; m++)); do echo "127.0.0.1 $((base + 10 * m))" >> "$OUT/ip_config.txt"; done
echo "== 3. training GraphSAGE: dgl-launch --local, $NUM_PARTS simulated machines (ip_config: $OUT/ip_config.txt),"
echo "      1 graph-server and 1 trainer each, $SAMPLERS sampler-worker(s) per trainer, $EPOCHS epochs"
rm -f "$OUT/metrics.json"
if [ "$PYTHON" = 1 ]; then
  # The same flags in the spelling of DGL's example.
  CMD=(/usr/bin/python3 "$(realpath examples/python/train_dist.py)" --graph_name "$NAME" --ip_config ip_config.txt
       --part_config "parts/$NAME.json" --metrics_out metrics.json)
  for ((i = 0; i < ${#TRAIN_ARGS[@]}; i++)); do
    a=${TRAIN_ARGS[i]}
    case "$a" in
      --weight-decay|--row-normalize) echo "   (--python: $a is trainer-host's, not the example's; left out)"
                                      [ "$a" = --weight-decay ] && i=$((i + 1)) ;;
      --*) CMD+=("$(echo "${a#--}" | tr - _ | sed 's/^/--/')") ;;
      *) CMD+=("$a") ;;
    esac
  done
  echo "      with the Python example: ${CMD[*]}"
else
  CMD=("$TRAINER" "${TRAIN_ARGS[@]}" --metrics-out metrics.json)
fi
(cd "$OUT" && "$LAUNCH" --local --no-copy --workspace "$OUT" --ip-config ip_config.txt \
   --part-config "parts/$NAME.json" --num-servers 1 --num-trainers 1 --num-samplers "$SAMPLERS" \
   --extra-envs "PYTHONPATH=$BIN/python" -- "${CMD[@]}")

echo "== 4. results"
python3 - "$OUT/metrics.json" "$OUT/training.dat" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
evals = {e["epoch"]: e for e in m["evals"]}
print(f"{m['graph_name']}: {m['model']}, {m['num_trainers']} trainers, {m['num_parameters']} parameters")
print(f"{'epoch':>5} {'loss':>8} {'train acc':>9} {'val acc':>8} {'test acc':>8} {'time s':>7} {'seeds/s':>9}")
with open(sys.argv[2], "w") as dat:
    for e in m["epochs"]:
        ev = evals.get(e["epoch"])
        val = f"{ev['val_acc']:.4f}" if ev else ""
        test = f"{ev['test_acc']:.4f}" if ev else ""
        print(f"{e['epoch']:>5} {e['loss']:>8.4f} {e['train_acc']:>9.4f} {val:>8} {test:>8} "
              f"{e['time_s']:>7.2f} {e['seeds_per_s']:>9.0f}")
        dat.write(f"{e['epoch']} {e['loss']} {e['train_acc']} {ev['val_acc'] if ev else 'NaN'}\n")
print(f"final test accuracy: {m['test_acc']:.4f} (validation {m['val_acc']:.4f}), "
      f"{m['total_time_s']:.1f} s of training")
PY
if command -v gnuplot >/dev/null; then
  gnuplot <<GP
set terminal pngcairo size 900,420 noenhanced
set output "$OUT/training.png"
set multiplot layout 1,2 title "$NAME: GraphSAGE, $NUM_PARTS partitions"
set xlabel "epoch"; set grid; set key bottom right
set title "loss"; plot "$OUT/training.dat" using 1:2 with linespoints title "training loss"
set title "accuracy"; set yrange [0:1]
plot "$OUT/training.dat" using 1:3 with linespoints title "train", \
     "$OUT/training.dat" using 1:4 with points pt 7 ps 1.5 title "validation"
unset multiplot
GP
  PLOT="a plot in $OUT/training.png, "
else
  PLOT=""
fi
echo "== done: metrics in $OUT/metrics.json, ${PLOT}partitions in $OUT/parts, logs in $OUT/dgld-logs"
