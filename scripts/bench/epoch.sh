#!/usr/bin/env bash
# Benchmark (not a test): the epoch time of distributed GraphSAGE training
# against a single process training the same model with the same sampler over
# the whole graph in memory, measured side by side in one run (runs
# alternate, so background load hits both). Target: distributed <= 1.15x.
#   single:      trainer-host --standalone, the 1-partition copy of the graph,
#                --num-threads 2 (this machine's cores)
#   distributed: 2 partitions, 2 graph-servers and 2 trainer-hosts on this
#                machine (1 thread each), gradients averaged over Gloo
# GraphSAGE as DGL's example (2 layers, hidden 16, fanout 10,25, batch 1000),
# lr 0.01, on an SBM graph (avg degree 20, 100-dim features, 47 classes).
# The epoch time of a run is the median of its epochs after the first.
# Also printed, for reference: the same single-process run on a 200 k-node
# graph, beside historical DistDGL 1.1.3 figures measured earlier on this
# kind of machine (4.06 s/epoch one machine, 3.37 s two; not measured by
# this script: --dgl-config --distdgl measures DistDGL itself).
#
# --dgl-config: instead, the configuration DistDGL was measured in (issue 16,
# docs/performance.md): a 200,000-node graph with 4.09 M directed edges,
# 100-dim features, 47 classes; 2 machines x 1 trainer (2 graph-servers and
# 2 trainer-hosts on this machine), no sampler processes, and one of two
# models (--model; `both` runs the example's rounds, then the paper's, each
# with its own table and ratio lines):
#   example  DGL's example model (the default): GraphSAGE 2 layers, hidden
#            16, fanout 10,25, batch 1000, lr 0.01, 10 epochs, and layer-wise
#            evaluation of every node after the last (as DistDGL's
#            train_dist.py), inside the measured peak memory
#   paper    DistDGL's paper model: 3 layers, hidden 256, fanout 15,10,5,
#            batch 1000, lr 0.003, dropout 0.5, 3 epochs, no evaluation
# (dropout is 0.5 in both: every trainer's default). A run's epoch time and
# phases are the means of its epochs after the first (2-10, 2-3); a kind's,
# the median over rounds. Each round runs every kind once, alternating:
#   fused      trainer-host, fused kernels
#   reference  (example model) the index_add path (--kernels reference):
#              ratio of their compute time (target <= 0.5) and the fused
#              run's epoch time (target <= 1.0 s on a quiet 2-core machine)
#   baseline   --baseline-build DIR: the fused run with DIR's binaries (a
#              build of an earlier commit): ratios of this build's epoch time
#              and peak memory over it
#   python     --python: the same job trained by examples/python/train_dist.py
#              (DGL's script: its own layer-wise inference with DGL's
#              batch_size_eval of 100000) under dgl-launch --local; with
#              --baseline-build also by DIR's package and example
#              (python-baseline)
#   distdgl    --distdgl DIR: DistDGL itself, DGL 1.1.3's
#              examples/pytorch/graphsage/dist/train_dist.py from DIR (a DGL
#              checkout with its C++ library built, DGL importable with
#              DGLBACKEND=pytorch PYTHONPATH=DIR/python /usr/bin/python3), on
#              the same graph partitioned by DGL's own partition_graph (METIS;
#              the graph goes to DGL through dgl-partition --to-chunks and
#              scripts/bench/lib/dgl_partition_chunks.py), 1 server and 1
#              trainer per machine as DGL's launch.py starts them, each
#              machine in its own network namespace with a private /dev/shm
#              (scripts/bench/lib/distdgl.sh): needs root. Its epoch figures
#              are rank 0's log lines ("sample" is its sample+data_copy).
#              A run over 20 minutes is an error.
# Every run records each trainer's peak resident memory (VmHWM, polled), and
# the graph-servers' (not for python runs). The table gives, per kind, the
# phases per epoch and, for trainer-host, the model step's GFLOP/s and its
# share of the GEMM peak trainer-host measured (peak_fraction), and the
# feature bytes gathered per second of fetch; memcpy's bandwidth (one thread,
# 256 MiB, best of 5) is measured once for comparison. Ratio lines, for the
# example model: compute fused over index_add, epoch, the trainer's and the
# graph-server's peak against their targets (500 and 250 MiB) and against
# a partition's bytes, and over the baseline; for the paper model:
# paper_model_step_peak_fraction (target >= 0.5) and the peaks for
# reference; for both, <model>_gather_over_memcpy (for reference), and with
# --python / --distdgl: trainer-host over the script (target <= 0.95), over
# DistDGL (example <= 0.15, paper <= 0.35), the script over DistDGL (paper
# <= 0.40), the example script's peak over DistDGL's trainer's (<= 0.6).
# Without --distdgl, historical DistDGL figures (issues 16 and 29) are
# printed under the example model's tables, labelled as such.
#
# Usage: scripts/bench/epoch.sh [--nodes N] [--epochs E] [--rounds R] [--build DIR]
#        scripts/bench/epoch.sh --dgl-config [--model example|paper|both] [--python]
#                               [--distdgl DGL_DIR] [--rounds R] [--build DIR] [--baseline-build DIR]
# e.g.   scripts/bench/epoch.sh --dgl-config --model both --python --distdgl /work/distdgl/dgl
set -euo pipefail
cd "$(dirname "$0")/../.."
nodes=1000000
epochs=2
rounds=1
build=build
baseline=""
dgl_config=0
python=0
models=example
distdgl=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --nodes) nodes="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --baseline-build) baseline="$2"; shift 2 ;;
    --dgl-config) dgl_config=1; shift ;;
    --model) models="$2"; shift 2 ;;
    --python) python=1; shift ;;
    --distdgl) distdgl="$2"; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ {print; next} NR > 1 {exit}' "$0"; exit 0 ;;
    *) echo "epoch.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ "$epochs" -ge 2 ]] || { echo "epoch.sh: --epochs must be >= 2 (the first is warm-up)" >&2; exit 2; }
case $models in
  example|paper) ;;
  both) models="example paper" ;;
  *) echo "epoch.sh: --model is example, paper or both" >&2; exit 2 ;;
esac
if [[ $dgl_config == 0 && ( $python == 1 || -n $baseline || -n $distdgl || $models != example ) ]]; then
  echo "epoch.sh: --model, --python, --baseline-build and --distdgl go with --dgl-config" >&2; exit 2
fi
part="$build/partition/dgl-partition"
server="$build/daemons/graph_server/graph-server"
trainer="$build/daemons/trainer_host/trainer-host"
for b in "$part" "$server" "$trainer"; do
  [[ -x "$b" ]] || { echo "epoch.sh: build first ($b missing)" >&2; exit 1; }
done
if [[ $python == 1 ]]; then
  for d in "$build" $baseline; do
    [[ -x "$d/launcher/launch/dgl-launch" ]] && ls "$d"/python/dgld/_C*.so >/dev/null 2>&1 || {
      echo "epoch.sh: --python needs dgl-launch and the dgld package built in $d" >&2; exit 1; }
  done
fi
if [[ -n "$baseline" ]]; then
  for b in "$baseline/daemons/graph_server/graph-server" "$baseline/daemons/trainer_host/trainer-host"; do
    [[ -x "$b" ]] || { echo "epoch.sh: --baseline-build: $b missing" >&2; exit 1; }
  done
fi

source scripts/bench/lib/peaks.sh
source scripts/bench/lib/distdgl.sh
if [[ -n $distdgl ]]; then
  distdgl=$(realpath "$distdgl")
  distdgl_check "$distdgl" || { echo "epoch.sh: --distdgl $distdgl cannot run DistDGL (above)" >&2; exit 1; }
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/dgld-epoch-bench.XXXXXX")"
pids=()
cleanup() {
  distdgl_stop
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
# A signal ends the script through exit, so that the EXIT trap stops everything.
trap 'exit 130' INT
trap 'exit 143' TERM

gen="sbm:nodes=${nodes},avg_degree=20,classes=47,feat_dim=100,seed=1"
if [[ $dgl_config == 0 ]]; then
  echo "partitioning an SBM graph of ${nodes} nodes into 1 and 2 parts..."
  "$part" --log-level warn --generate "$gen" --num-parts 1 --graph-name g --output "$work/p1" >/dev/null
  "$part" --log-level warn --generate "$gen" --num-parts 2 --graph-name g --output "$work/p2" >/dev/null
fi

model=(--num-epochs "$epochs" --eval-every -1 --lr 0.01 --log-every 0 --no-progress --seed 1)

# Median of epochs[1:] time_s of a metrics file.
epoch_time() {
  python3 - "$1" <<'PY'
import json, statistics, sys
e = json.load(open(sys.argv[1]))["epochs"][1:]
print(f"{statistics.median(x['time_s'] for x in e):.3f}")
PY
}

run_single() {  # $1 config, $2 metrics
  OMP_NUM_THREADS=2 "$trainer" --standalone --part-config "$1" --num-threads 2 "${model[@]}" \
    --metrics-out "$2" --log-level warn
}

# $1 metrics, $2 partition config (default: the 2-part one), then extra trainer
# flags. Binaries: $run_server / $run_trainer (default: this build's). Writes
# "<server0> <server1> <trainer0> <trainer1>" peak KiB to $1.rss.
run_distributed() {
  local metrics="$1" config="${2:-$work/p2/g.json}"
  local server="${run_server:-$server}" trainer="${run_trainer:-$trainer}"
  shift; [[ $# -gt 0 ]] && shift
  local base=$(( 20000 + RANDOM % 20000 ))
  printf '127.0.0.1 %d\n127.0.0.1 %d\n' "$base" "$((base + 10))" > "$work/ip_config.txt"
  local servers=() m
  for m in 0 1; do
    "$server" --part-config "$config" --ip-config "$work/ip_config.txt" --server-id "$m" \
      --num-clients 2 --log-level warn > "$work/server$m.log" 2>&1 &
    servers+=("$!"); pids+=("$!")
  done
  local trainers=() r
  for r in 0 1; do
    OMP_NUM_THREADS=1 "$trainer" --ip-config "$work/ip_config.txt" --part-config "$config" \
      --machine-id "$r" --rank "$r" --num-trainers 2 --num-threads 1 "${model[@]}" "$@" \
      --metrics-out "$metrics" --log-level warn > "$work/trainer$r.log" 2>&1 &
    trainers+=("$!"); pids+=("$!")
  done
  # The trainers' peaks are polled while they run (their last reading is
  # within 0.2 s of the end); the servers' are read before they are stopped.
  local peaks; peaks=$(watch_peaks "${trainers[@]}")
  local rc=0
  for p in "${trainers[@]}"; do wait "$p" || rc=1; done
  echo "$(peak_kib "${servers[0]}") $(peak_kib "${servers[1]}") $peaks" > "$metrics.rss"
  for p in "${servers[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  if [[ $rc != 0 ]]; then
    echo "epoch.sh: a distributed trainer failed:" >&2; tail -5 "$work"/trainer*.log >&2; exit 1
  fi
}

# $1 metrics, $2 build dir, $3 example script: examples/python/train_dist.py
# on $work/d2 (2 machines x 1 trainer, dgl-launch --local), the model flags
# of $py_model. Writes "0 0 <trainer0> <trainer1>" peak KiB to $1.rss (the
# servers are not polled here).
run_python() {
  local metrics="$1" b script; b="$(realpath "$2")"; script="$(realpath "$3")"
  local base=$(( 20000 + RANDOM % 20000 ))
  printf '127.0.0.1 %d\n127.0.0.1 %d\n' "$base" "$((base + 10))" > "$work/ip_config.txt"
  (cd "$work" && exec "$b/launcher/launch/dgl-launch" --local --no-copy --workspace "$work" --ip-config ip_config.txt \
     --part-config d2/g.json --num-servers 1 --num-trainers 1 --extra-envs "PYTHONPATH=$b/python" \
     --extra-envs OMP_NUM_THREADS=1 -- /usr/bin/python3 "$script" --graph_name g --ip_config ip_config.txt \
     --part_config d2/g.json "${py_model[@]}" --log_every 0 --seed 1 \
     --metrics_out "$metrics" > "$work/python.log" 2>&1) &
  local launcher=$! trainers=() p
  pids+=("$launcher")
  while [[ ${#trainers[@]} -lt 2 ]] && kill -0 "$launcher" 2>/dev/null; do
    trainers=()
    for p in $(pgrep -f -- "--graph_name g --ip_config ip_config.txt --part_config d2/g.json" || true); do
      [[ $(cat "/proc/$p/comm" 2>/dev/null) == python3 ]] && trainers+=("$p")
    done
    sleep 0.1
  done
  local peaks="0 0"
  [[ ${#trainers[@]} -eq 2 ]] && peaks=$(watch_peaks "${trainers[@]}")
  if ! wait "$launcher"; then
    echo "epoch.sh: the Python job failed:" >&2; tail -20 "$work/python.log" >&2; exit 1
  fi
  echo "0 0 $peaks" > "$metrics.rss"
}

# $1 metrics: DistDGL's train_dist.py on $work/dgl2 (DGL's partitions of the
# graph), the model flags of $dgl_model; rank 0's epochs go to $1 as
# {"epochs": [...]}, the peaks (KiB) of its servers and trainers to $1.rss.
distdgl_timeout_s=1200
run_distdgl() {
  local metrics="$1" out="${1%.json}"
  distdgl_run "$distdgl" "$work/dgl2/g.json" "$out" "$distdgl_timeout_s" --graph_name g "${dgl_model[@]}" \
    --log_every 1000000
  distdgl_metrics "$out" "$metrics"
  cp "$out/peaks" "$metrics.rss"
}

# GB/s (1e9 bytes) of copying 256 MiB in one thread, best of 5: what the
# trainers' feature gathering (one thread each) is compared with. 0 when
# numpy is not there.
memcpy_gb_per_s() {
  /usr/bin/python3 - <<'PY' 2>/dev/null || echo 0
import time
import numpy as np
src = np.ones(256 << 20, np.uint8)
dst = np.empty_like(src)
best = float("inf")
for _ in range(5):
    start = time.perf_counter()
    np.copyto(dst, src)
    best = min(best, time.perf_counter() - start)
print(f"{src.nbytes / best / 1e9:.2f}")
PY
}

# Sets each kind's flags for model $1 (example or paper): $model for
# trainer-host, $py_model for examples/python/train_dist.py, $dgl_model for
# DistDGL's train_dist.py. Dropout is every trainer's default, 0.5. DGL's
# script evaluates after epoch e (from 1) when e % eval_every == 0: 10 is
# after the 10th and last, 1000 never; ours take 0 for "after the last" and
# -1 for never.
set_model() {
  case $1 in
    example)
      model=(--num-epochs 10 --eval-every 0 --lr 0.01 --num-hidden 16 --num-layers 2 --fan-out "10,25")
      py_model=(--num_epochs 10 --eval_every 0 --lr 0.01 --num_hidden 16 --num_layers 2 --fan_out "10,25")
      dgl_model=(--num_epochs 10 --eval_every 10 --lr 0.01 --num_hidden 16 --num_layers 2 --fan_out "10,25") ;;
    paper)
      model=(--num-epochs 3 --eval-every -1 --lr 0.003 --num-hidden 256 --num-layers 3 --fan-out "15,10,5")
      py_model=(--num_epochs 3 --eval_every -1 --lr 0.003 --num_hidden 256 --num_layers 3 --fan_out "15,10,5")
      dgl_model=(--num_epochs 3 --eval_every 1000 --lr 0.003 --num_hidden 256 --num_layers 3 --fan_out "15,10,5") ;;
  esac
  model+=(--batch-size 1000 --log-every 0 --no-progress --seed 1)
  py_model+=(--batch_size 1000)
  dgl_model+=(--batch_size 1000)
}

if [[ $dgl_config == 1 ]]; then
  gen="sbm:nodes=200000,avg_degree=21.2,classes=47,feat_dim=100,seed=1"
  echo "partitioning the DistDGL benchmark graph (200000 nodes, ~4.09 M edges) into 2 parts..."
  "$part" --log-level warn --generate "$gen" --num-parts 2 --graph-name g --output "$work/d2" | sed -n 2,3p
  if [[ -n $distdgl ]]; then
    echo "partitioning the same graph into 2 parts with DGL's partition_graph (METIS) for DistDGL..."
    "$part" --log-level warn --generate "$gen" --to-chunks 1 --graph-name g --output "$work/chunks" >/dev/null
    DGLBACKEND=pytorch PYTHONPATH="$distdgl/python" "$distdgl_python" scripts/bench/lib/dgl_partition_chunks.py \
        "$work/chunks" "$work/dgl2" 2 g > "$work/dgl-partition.log" 2>&1 || {
      echo "epoch.sh: DGL's partition_graph failed:" >&2; tail -20 "$work/dgl-partition.log" >&2; exit 1; }
    rm -rf "$work/chunks"
  fi
  memcpy=$(memcpy_gb_per_s)
  echo "memcpy (one thread, 256 MiB, best of 5): $memcpy GB/s"
  part_bytes=$(cat "$work"/d2/part0/* | wc -c)
  example=examples/python/train_dist.py
  baseline_example="$baseline/../examples/python/train_dist.py"
  [[ -f "$baseline_example" ]] || baseline_example=$example
  mkdir -p bench-results
  for m in $models; do
    set_model "$m"
    runs=()
    kinds=(fused)
    [[ $m == example ]] && kinds+=(reference)  # the index_add path is slow: the example model only
    [[ -n "$baseline" ]] && kinds+=(baseline)
    [[ $python == 1 ]] && kinds+=(python)
    [[ $python == 1 && -n "$baseline" ]] && kinds+=(python-baseline)
    [[ -n $distdgl ]] && kinds+=(distdgl)
    for ((r = 1; r <= rounds; r++)); do
      for k in "${kinds[@]}"; do
        case $k in
          python) what="examples/python/train_dist.py" ;;
          python-baseline) what="the Python example with $baseline's package" ;;
          distdgl) what="DistDGL 1.1.3's train_dist.py" ;;
          *) what="${k/baseline/fused kernels of $baseline}" ;;
        esac
        echo "$m model, round $r/$rounds: 2 servers + 2 trainers, $what..."
        metrics="$work/dgl-$m-$k-$r.json"
        case $k in
          python) run_python "$metrics" "$build" "$example" ;;
          python-baseline) run_python "$metrics" "$baseline" "$baseline_example" ;;
          distdgl) run_distdgl "$metrics" ;;
          baseline)
            run_server="$baseline/daemons/graph_server/graph-server" run_trainer="$baseline/daemons/trainer_host/trainer-host" \
              run_distributed "$metrics" "$work/d2/g.json" --kernels fused ;;
          *) run_distributed "$metrics" "$work/d2/g.json" --kernels "$k" ;;
        esac
        runs+=("$k:$metrics")
      done
    done
    out=bench-results/epoch-dgl-config.json
    [[ $m == paper ]] && out=bench-results/epoch-dgl-config-paper.json
    python3 scripts/bench/lib/dgl_config_summary.py "$m" "$part_bytes" "$memcpy" "$out" "${runs[@]}"
  done
  exit 0
fi

single=(); dist=()
for ((r = 1; r <= rounds; r++)); do
  echo "round $r/$rounds: single process..."
  run_single "$work/p1/g.json" "$work/single$r.json"
  single+=("$(epoch_time "$work/single$r.json")")
  echo "round $r/$rounds: distributed (2 servers, 2 trainers)..."
  run_distributed "$work/dist$r.json"
  dist+=("$(epoch_time "$work/dist$r.json")")
done

echo "reference: single process on a 200000-node graph of the same kind (DistDGL's benchmark size)..."
ref_gen="sbm:nodes=200000,avg_degree=20,classes=47,feat_dim=100,seed=1"
"$part" --log-level warn --generate "$ref_gen" --num-parts 1 --graph-name r --output "$work/r1" >/dev/null
model=(--num-epochs 3 --eval-every -1 --lr 0.01 --log-every 0 --no-progress --seed 1)
run_single "$work/r1/r.json" "$work/ref.json"
ref=$(epoch_time "$work/ref.json")

mkdir -p bench-results
python3 - "$nodes" "$ref" "${#single[@]}" "${single[@]}" "${dist[@]}" <<'PY'
import json, statistics, sys
nodes, ref, n = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
single = [float(x) for x in sys.argv[4:4 + n]]
dist = [float(x) for x in sys.argv[4 + n:4 + 2 * n]]
s, d = statistics.median(single), statistics.median(dist)
print()
print(f"{'run':<40} {'epoch s':>9}")
print(f"{'single process (2 threads)':<40} {s:>9.2f}   rounds: {', '.join(f'{x:.2f}' for x in single)}")
print(f"{'distributed (2 servers, 2 trainers)':<40} {d:>9.2f}   rounds: {', '.join(f'{x:.2f}' for x in dist)}")
print(f"{'single process, 200k-node graph':<40} {ref:>9.2f}   (historical DistDGL 1.1.3 figures on this kind of"
      " machine, not measured here: 4.06 one machine, 3.37 two)")
json.dump({"nodes": nodes, "single_epoch_s": single, "distributed_epoch_s": dist,
           "ratio": d / s, "reference_200k_single_epoch_s": ref},
          open("bench-results/epoch.json", "w"), indent=2)
print(f"ratio: distributed_over_single_epoch {d / s:.2f} (target <= 1.15)")
PY
