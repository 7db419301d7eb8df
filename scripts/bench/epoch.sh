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
# graph, beside the DistDGL figures measured on this kind of machine
# (docs/dgl-reference: 4.06 s/epoch one machine, 3.37 s two machines).
#
#
# --dgl-config: instead, the configuration DistDGL was measured in (issue 16,
# docs/dgl-reference.md): a 200,000-node graph with 4.09 M directed edges,
# 100-dim features, 47 classes; 2 machines x 1 trainer (2 graph-servers and
# 2 trainer-hosts on this machine), no sampler processes, GraphSAGE hidden
# 16, fanout 10,25, batch 1000, lr 0.01, 10 epochs, epochs 2-10 averaged,
# and layer-wise evaluation of every node after the last (as DistDGL's
# train_dist.py), inside the measured peak memory.
# Runs alternate the fused kernels and the index_add reference (--kernels),
# print every phase, and end with the ratio of their compute time (target
# <= 0.5) and the fused run's epoch time (target <= 1.0 s on a quiet
# 2-core machine). Every run also records each process's peak resident
# memory (VmHWM, polled): ratio lines give the trainer's and the
# graph-server's against their targets (500 and 250 MiB) and against the
# bytes of a partition's files. --baseline-build DIR adds, in every round,
# the fused run with DIR's binaries (a build of an earlier commit), and the
# ratios of this build's epoch time and peak memory over it.
# --python (with --dgl-config) adds, in every round, the same job trained by
# examples/python/train_dist.py (DGL's script: its own layer-wise inference
# with DGL's batch_size_eval of 100000) under dgl-launch --local, and with
# --baseline-build also by DIR's package and example; ratio lines give the
# Python trainer's peak and epoch (and over the baseline's).
#
# Usage: scripts/bench/epoch.sh [--nodes N] [--epochs E] [--rounds R] [--build DIR]
#        scripts/bench/epoch.sh --dgl-config [--python] [--rounds R] [--build DIR] [--baseline-build DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
nodes=1000000
epochs=2
rounds=1
build=build
baseline=""
dgl_config=0
python=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --nodes) nodes="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --baseline-build) baseline="$2"; shift 2 ;;
    --dgl-config) dgl_config=1; shift ;;
    --python) python=1; shift ;;
    -h|--help) sed -n '2,42p' "$0"; exit 0 ;;
    *) echo "epoch.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ "$epochs" -ge 2 ]] || { echo "epoch.sh: --epochs must be >= 2 (the first is warm-up)" >&2; exit 2; }
part="$build/partition/dgl-partition"
server="$build/daemons/graph_server/graph-server"
trainer="$build/daemons/trainer_host/trainer-host"
for b in "$part" "$server" "$trainer"; do
  [[ -x "$b" ]] || { echo "epoch.sh: build first ($b missing)" >&2; exit 1; }
done
if [[ $python == 1 ]]; then
  [[ $dgl_config == 1 ]] || { echo "epoch.sh: --python goes with --dgl-config" >&2; exit 2; }
  for d in "$build" $baseline; do
    [[ -x "$d/launcher/launch/dgl-launch" ]] && ls "$d"/python/dgld/_C*.so >/dev/null 2>&1 || {
      echo "epoch.sh: --python needs dgl-launch and the dgld package built in $d" >&2; exit 1; }
  done
fi
if [[ -n "$baseline" ]]; then
  [[ $dgl_config == 1 ]] || { echo "epoch.sh: --baseline-build goes with --dgl-config" >&2; exit 2; }
  for b in "$baseline/daemons/graph_server/graph-server" "$baseline/daemons/trainer_host/trainer-host"; do
    [[ -x "$b" ]] || { echo "epoch.sh: --baseline-build: $b missing" >&2; exit 1; }
  done
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/dgld-epoch-bench.XXXXXX")"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

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

source scripts/bench/lib/peaks.sh

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
# of --dgl-config, evaluation after the last epoch. Writes "0 0 <trainer0>
# <trainer1>" peak KiB to $1.rss (the servers are not polled here).
run_python() {
  local metrics="$1" b script; b="$(realpath "$2")"; script="$(realpath "$3")"
  local base=$(( 20000 + RANDOM % 20000 ))
  printf '127.0.0.1 %d\n127.0.0.1 %d\n' "$base" "$((base + 10))" > "$work/ip_config.txt"
  (cd "$work" && exec "$b/launcher/launch/dgl-launch" --local --no-copy --workspace "$work" --ip-config ip_config.txt \
     --part-config d2/g.json --num-servers 1 --num-trainers 1 --extra-envs "PYTHONPATH=$b/python" \
     --extra-envs OMP_NUM_THREADS=1 -- /usr/bin/python3 "$script" --graph_name g --ip_config ip_config.txt \
     --part_config d2/g.json --num_epochs 10 --eval_every 0 --lr 0.01 --log_every 0 --seed 1 --num_hidden 16 \
     --fan_out 10,25 --batch_size 1000 --metrics_out "$metrics" > "$work/python.log" 2>&1) &
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

if [[ $dgl_config == 1 ]]; then
  gen="sbm:nodes=200000,avg_degree=21.2,classes=47,feat_dim=100,seed=1"
  echo "partitioning the DistDGL benchmark graph (200000 nodes, ~4.09 M edges) into 2 parts..."
  "$part" --log-level warn --generate "$gen" --num-parts 2 --graph-name g --output "$work/d2" | sed -n 2,3p
  model=(--num-epochs 10 --eval-every 0 --lr 0.01 --log-every 0 --no-progress --seed 1 --num-hidden 16
         --fan-out 10,25 --batch-size 1000)
  runs=()
  kinds=(fused reference)
  [[ -n "$baseline" ]] && kinds+=(baseline)
  [[ $python == 1 ]] && kinds+=(python)
  [[ $python == 1 && -n "$baseline" ]] && kinds+=(python-baseline)
  example=examples/python/train_dist.py
  baseline_example="$baseline/../examples/python/train_dist.py"
  [[ -f "$baseline_example" ]] || baseline_example=$example
  for ((r = 1; r <= rounds; r++)); do
    for k in "${kinds[@]}"; do
      case $k in
        python) what="examples/python/train_dist.py" ;;
        python-baseline) what="the Python example with $baseline's package" ;;
        *) what="${k/baseline/fused kernels of $baseline}" ;;
      esac
      echo "round $r/$rounds: 2 servers + 2 trainers, $what..."
      if [[ $k == python ]]; then
        run_python "$work/dgl-$k-$r.json" "$build" "$example"
      elif [[ $k == python-baseline ]]; then
        run_python "$work/dgl-$k-$r.json" "$baseline" "$baseline_example"
      elif [[ $k == baseline ]]; then
        run_server="$baseline/daemons/graph_server/graph-server" run_trainer="$baseline/daemons/trainer_host/trainer-host" \
          run_distributed "$work/dgl-$k-$r.json" "$work/d2/g.json" --kernels fused
      else
        run_distributed "$work/dgl-$k-$r.json" "$work/d2/g.json" --kernels "$k"
      fi
      runs+=("$k:$work/dgl-$k-$r.json")
    done
  done
  part_bytes=$(cat "$work"/d2/part0/* | wc -c)
  mkdir -p bench-results
  python3 - "$part_bytes" "${runs[@]}" <<'PY'
import json, statistics, sys
phases = ["time_s", "sample_s", "fetch_s", "compute_s", "allreduce_s", "wait_s"]
part_bytes = int(sys.argv[1])
by, rss = {}, {}
for arg in sys.argv[2:]:
    kind, path = arg.split(":", 1)
    epochs = json.load(open(path))["epochs"][1:]  # epochs 2..10
    by.setdefault(kind, []).append({p: statistics.mean(e.get(p, 0.0) for e in epochs) for p in phases})
    s0, s1, t0, t1 = (int(x) * 1024 for x in open(path + ".rss").read().split())
    rss.setdefault(kind, []).append({"server": max(s0, s1), "trainer": max(t0, t1)})
print()
print(f"{'kernels':<11}" + "".join(f"{p[:-2]:>11}" for p in phases) + "   (s per epoch, mean of epochs 2-10, median of rounds)")
med, mem = {}, {}
mib = 1 << 20
for kind, runs in by.items():
    med[kind] = {p: statistics.median(r[p] for r in runs) for p in phases}
    mem[kind] = {w: statistics.median(r[w] for r in rss[kind]) for w in ("server", "trainer")}
    print(f"{kind:<11}" + "".join(f"{med[kind][p]:>11.3f}" for p in phases))
print("DistDGL 1.1.3, same configuration (issue 16): epoch 2.68-5.96 s, forward+backward+update 0.95-1.37 s")
print()
print(f"{'run':<11}{'server MiB':>12}{'trainer MiB':>13}   (peak RSS, the larger of the two processes, median of rounds;"
      f" partition 0's files: {part_bytes / mib:.0f} MiB)")
for kind in by:
    server = f"{mem[kind]['server'] / mib:>12.0f}" if mem[kind]["server"] else f"{'-':>12}"
    print(f"{kind:<11}{server}{mem[kind]['trainer'] / mib:>13.0f}")
print("DistDGL 1.1.3, same configuration (issue 29): graph-server 483 MiB, trainer 984 MiB")
ratio = med["fused"]["compute_s"] / med["reference"]["compute_s"]
json.dump({"runs": by, "median": med, "compute_ratio": ratio, "peak_rss_bytes": mem, "partition_bytes": part_bytes},
          open("bench-results/epoch-dgl-config.json", "w"), indent=2)
print(f"ratio: dgl_config_compute_fused_over_index_add {ratio:.2f} (target <= 0.5)")
print(f"ratio: dgl_config_epoch_s {med['fused']['time_s']:.2f} (target <= 1.0)")
print(f"ratio: dgl_config_trainer_peak_rss_mib {mem['fused']['trainer'] / mib:.0f} (target <= 500)")
print(f"ratio: dgl_config_server_peak_rss_mib {mem['fused']['server'] / mib:.0f} (target <= 250)")
print(f"ratio: dgl_config_trainer_peak_rss_over_partition_bytes {mem['fused']['trainer'] / part_bytes:.2f}")
print(f"ratio: dgl_config_server_peak_rss_over_partition_bytes {mem['fused']['server'] / part_bytes:.2f}")
if "baseline" in by:
    print(f"ratio: dgl_config_epoch_over_baseline {med['fused']['time_s'] / med['baseline']['time_s']:.2f} (target <= 1.0)")
    print(f"ratio: dgl_config_trainer_peak_rss_over_baseline {mem['fused']['trainer'] / mem['baseline']['trainer']:.2f}")
    print(f"ratio: dgl_config_server_peak_rss_over_baseline {mem['fused']['server'] / mem['baseline']['server']:.2f}")
if "python" in by:
    print(f"ratio: dgl_config_python_epoch_s {med['python']['time_s']:.2f}")
    print(f"ratio: dgl_config_python_trainer_peak_rss_mib {mem['python']['trainer'] / mib:.0f} (target <= 500)")
if "python-baseline" in by:
    print(f"ratio: dgl_config_python_epoch_over_baseline "
          f"{med['python']['time_s'] / med['python-baseline']['time_s']:.2f} (target <= 1.0)")
    print(f"ratio: dgl_config_python_trainer_peak_rss_over_baseline "
          f"{mem['python']['trainer'] / mem['python-baseline']['trainer']:.2f}")
PY
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
print(f"{'single process, 200k-node graph':<40} {ref:>9.2f}   (DistDGL 1.1.3 measured on this kind of machine: 4.06 one machine, 3.37 two)")
json.dump({"nodes": nodes, "single_epoch_s": single, "distributed_epoch_s": dist,
           "ratio": d / s, "reference_200k_single_epoch_s": ref},
          open("bench-results/epoch.json", "w"), indent=2)
print(f"ratio: distributed_over_single_epoch {d / s:.2f} (target <= 1.15)")
PY
