#!/usr/bin/env bash
# Benchmark (not a test): ogbn-products scale end to end on this one machine.
# Generates an SBM graph of ogbn-products' size (2,449,029 nodes, ~123.7 M
# directed edges, 100-dim features, 47 classes), then
#   1. partitions it for 2 machines with single-process METIS and (unless
#      --no-distributed) with dgl-partition --distributed --local, 2 ranks;
#   2. trains GraphSAGE, 2 machines x 1 trainer (2 graph-servers and 2
#      trainer-hosts here), for --epochs epochs with layer-wise evaluation at
#      the end, and saves the model;
#   3. trains the same model on the nodes' own features only (--fan-out 0,0
#      and --eval-fan-out 0: no neighbour reaches a node), the baseline the
#      graph must beat;
#   4. runs --infer with the saved model over every node;
# and prints each step's time and every process's peak RSS (VmHWM) against
# the bytes of its partition's files. Results in bench-results/scale.json.
#
# Usage: scripts/bench/scale.sh [--nodes N] [--avg-degree D] [--epochs E] [--build DIR]
#                               [--no-distributed] [--keep]
set -euo pipefail
cd "$(dirname "$0")/../.."
nodes=2449029
avg_degree=50.5
epochs=3
build=build
distributed=1
keep=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --nodes) nodes="$2"; shift 2 ;;
    --avg-degree) avg_degree="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --no-distributed) distributed=0; shift ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "scale.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
part="$build/partition/dgl-partition"
server="$build/daemons/graph_server/graph-server"
trainer="$build/daemons/trainer_host/trainer-host"
for b in "$part" "$server" "$trainer"; do
  [[ -x "$b" ]] || { echo "scale.sh: build first ($b missing)" >&2; exit 1; }
done

work="$(mktemp -d "${TMPDIR:-/tmp}/dgld-scale-bench.XXXXXX")"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [[ $keep -eq 0 ]]; then rm -rf "$work"; else echo "scale.sh: files kept in $work"; fi
}
trap cleanup EXIT
steps="$work/steps.txt"  # "<step> <seconds> <process>=<peak KiB> ..." per line
: > "$steps"
now() { date +%s.%N; }
source scripts/bench/lib/peaks.sh

spec="sbm:nodes=${nodes},avg_degree=${avg_degree},classes=47,feat_dim=100,p_in=0.8,seed=1"
echo "scale.sh: $spec ($build)"

echo "1. dgl-partition, METIS, 2 parts..."
t0=$(now)
"$part" --generate "$spec" --num-parts 2 --output "$work/p2" --graph-name g --stats-json "$work/metis.json" \
  --log-level warn >/dev/null
echo "partition_metis $(echo "$(now) - $t0" | bc) dgl-partition=$(python3 -c "import json; print(json.load(open('$work/metis.json'))['peak_rss_bytes'] // 1024)")" >> "$steps"
if [[ $distributed -eq 1 ]]; then
  echo "1b. dgl-partition --distributed --local, 2 ranks (input written as chunks first)..."
  "$part" --generate "$spec" --to-chunks 2 --output "$work/chunks" --graph-name g --log-level warn >/dev/null
  t0=$(now)
  "$part" --distributed --local --num-parts 2 --chunks "$work/chunks" --output "$work/dist" \
    --stats-json "$work/dist.json" --log-level warn >/dev/null
  echo "partition_distributed $(echo "$(now) - $t0" | bc) $(python3 -c "
import json; d = json.load(open('$work/dist.json'))
print(' '.join(f'rank{r}={b // 1024}' for r, b in enumerate(d['peak_rss_bytes'])))")" >> "$steps"
  rm -rf "$work/chunks" "$work/dist"
fi

# One job on the METIS partitions: $1 step name, then trainer-host flags.
run_job() {
  local name="$1"; shift
  local base=$(( 20000 + RANDOM % 20000 ))
  printf '127.0.0.1 %d\n127.0.0.1 %d\n' "$base" "$((base + 10))" > "$work/ip_config.txt"
  local servers=() trainers=() m r
  for m in 0 1; do
    "$server" --part-config "$work/p2/g.json" --ip-config "$work/ip_config.txt" --server-id "$m" \
      --num-clients 2 --log-level warn > "$work/$name-server$m.log" 2>&1 &
    servers+=("$!"); pids+=("$!")
  done
  local t0; t0=$(now)
  for r in 0 1; do
    OMP_NUM_THREADS=1 "$trainer" --ip-config "$work/ip_config.txt" --part-config "$work/p2/g.json" \
      --machine-id "$r" --rank "$r" --num-trainers 2 --num-threads 1 --no-progress --log-every 0 --seed 1 "$@" \
      --metrics-out "$work/$name.json" > "$work/$name-trainer$r.log" 2>&1 &
    trainers+=("$!"); pids+=("$!")
  done
  local peaks; peaks=($(PEAK_POLL_S=0.5 watch_peaks "${trainers[@]}"))
  local rc=0
  for p in "${trainers[@]}"; do wait "$p" || rc=1; done
  local secs; secs=$(echo "$(now) - $t0" | bc)
  echo "$name $secs server0=$(peak_kib "${servers[0]}") server1=$(peak_kib "${servers[1]}") trainer0=${peaks[0]} trainer1=${peaks[1]}" >> "$steps"
  for p in "${servers[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  if [[ $rc != 0 ]]; then
    echo "scale.sh: step $name failed:" >&2; tail -5 "$work/$name"-trainer*.log >&2; exit 1
  fi
}

model=(--model sage --num-hidden 64 --fan-out 10,25 --batch-size 1000 --lr 0.01 --num-epochs "$epochs" --eval-every 0)
echo "2. GraphSAGE, 2 machines x 1 trainer, $epochs epochs, layer-wise evaluation..."
run_job train "${model[@]}" --save-model "$work/model.pt"
echo "3. the same model on the nodes' own features (--fan-out 0,0, evaluated the same way)..."
run_job features_only "${model[@]/10,25/0,0}" --eval-fan-out 0
echo "4. --infer over every node with the saved model..."
run_job infer --infer --model-file "$work/model.pt" --output-dir "$work/out"

part_bytes=$(cat "$work"/p2/part0/* | wc -c)
mkdir -p bench-results
python3 - "$steps" "$work/train.json" "$work/features_only.json" "$part_bytes" "$nodes" <<'PY'
import json, sys
steps_file, train, base, part_bytes, nodes = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
mib = 1 << 20
rows = []
for line in open(steps_file):
    name, secs, *procs = line.split()
    rows.append({"step": name, "seconds": float(secs),
                 "peak_rss_bytes": {p.split("=")[0]: int(p.split("=")[1]) * 1024 for p in procs}})
t, b = json.load(open(train)), json.load(open(base))
print()
print(f"{'step':<24}{'time s':>9}   peak RSS MiB (partition 0's files: {part_bytes / mib:.0f} MiB)")
for r in rows:
    procs = ", ".join(f"{p} {v / mib:.0f}" for p, v in r["peak_rss_bytes"].items())
    print(f"{r['step']:<24}{r['seconds']:>9.1f}   {procs}")
epochs = [e["time_s"] for e in t["epochs"]]
print(f"GraphSAGE epochs: {', '.join(f'{x:.1f}' for x in epochs)} s; evaluation {t['evals'][-1]['time_s']:.1f} s")
print(f"test accuracy: GraphSAGE {t['test_acc']:.4f}, own features only {b['test_acc']:.4f}")
train_row = next(r for r in rows if r["step"] == "train")["peak_rss_bytes"]
json.dump({"nodes": nodes, "partition_bytes": part_bytes, "steps": rows, "epoch_s": epochs,
           "test_acc": t["test_acc"], "features_only_test_acc": b["test_acc"]},
          open("bench-results/scale.json", "w"), indent=2)
print(f"ratio: scale_test_acc_over_features_only {t['test_acc'] / max(b['test_acc'], 1e-9):.2f} (target > 1)")
print(f"ratio: scale_trainer_peak_rss_over_partition_bytes "
      f"{max(train_row['trainer0'], train_row['trainer1']) / part_bytes:.2f}")
print(f"ratio: scale_server_peak_rss_over_partition_bytes "
      f"{max(train_row['server0'], train_row['server1']) / part_bytes:.2f}")
PY
