#!/usr/bin/env bash
# The main job: generate a graph, partition it with METIS, verify the partitions
# and print the summary. Later stages (launch, training) join as they land.
# Usage: scripts/demo.sh [--dataset gen|ogb:PATH] [--num-parts N] [--nodes N] [--output DIR]
set -euo pipefail
cd "$(dirname "$0")/.."

DATASET=gen
NUM_PARTS=2
NODES=100000
OUT=demo-output
while [ $# -gt 0 ]; do
  case "$1" in
    --dataset) DATASET=$2; shift 2 ;;
    --num-parts) NUM_PARTS=$2; shift 2 ;;
    --nodes) NODES=$2; shift 2 ;;
    --output) OUT=$2; shift 2 ;;
    -h|--help) sed -n '2,5p' "$0"; exit 0 ;;
    *) echo "demo.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
  esac
done

bash scripts/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
[ -f "$BUILD_DIR/build.ninja" ] || meson setup "$BUILD_DIR" --buildtype=release
ninja -C "$BUILD_DIR" -j "$(nproc)"

BIN=$BUILD_DIR/launcher/partition
rm -rf "$OUT/parts"
mkdir -p "$OUT"
if [ "$DATASET" = gen ]; then
  INPUT=(--generate "sbm:nodes=$NODES,classes=47,feat_dim=100,seed=1")
  NAME=sbm
else
  INPUT=(--input "$DATASET")
  NAME=$(basename "${DATASET#ogb:}")
fi
echo "== partitioning $NAME into $NUM_PARTS parts with METIS"
"$BIN/dgl-partition" "${INPUT[@]}" --num-parts "$NUM_PARTS" --part-method metis \
  --graph-name "$NAME" --output "$OUT/parts" --stats-json "$OUT/partition-stats.json"
echo "== verifying $OUT/parts/$NAME.json"
"$BIN/dgl-partition" --verify "$OUT/parts/$NAME.json"
echo "== serving: one graph-server per partition on loopback; a client pulls features and samples"
base=$(( 30000 + RANDOM % 20000 ))
: > "$OUT/ip_config.txt"
for ((m = 0; m < NUM_PARTS; m++)); do echo "127.0.0.1 $((base + 10 * m))" >> "$OUT/ip_config.txt"; done
if [ "$NUM_PARTS" = 2 ]; then
  "$BUILD_DIR/tests/bench/bench_server" --part-config "$OUT/parts/$NAME.json" --ip-config "$OUT/ip_config.txt" \
    --seconds 1 --log-level warn --json "$OUT/server-check.json"
fi
echo "== training GraphSAGE in standalone mode (one process, whole graph) for 3 epochs"
rm -rf "$OUT/whole"
"$BIN/dgl-partition" "${INPUT[@]}" --num-parts 1 --graph-name "$NAME" --output "$OUT/whole" --log-level warn >/dev/null
"$BUILD_DIR/daemons/trainer_host/trainer-host" --standalone --part-config "$OUT/whole/$NAME.json" \
  --num-epochs 3 --eval-every 3 --metrics-out "$OUT/metrics.json"
echo "== done: partitions in $OUT/parts, statistics in $OUT/partition-stats.json, metrics in $OUT/metrics.json"
