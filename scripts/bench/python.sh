#!/usr/bin/env bash
# Benchmark (not a test) of Python training scripts on dgld: the example
# examples/python/train_dist.py (DGL's distributed GraphSAGE API, dgld.nn
# layers, DistributedDataParallel over gloo) against trainer-host, the same
# job in both: 2 partitions, dgl-launch --local with 2 simulated machines x 1
# trainer, GraphSAGE hidden 16, fanout 10,25, batch 1000, lr 0.01, no
# evaluation; runs alternate. Prints training seeds/s (every trainer's seeds
# per second of epoch, the median of the epochs after the first) and
#   ratio: python_vs_trainer_host_seeds_per_s  (target >= 0.8)
# With --cora DIR (default ../shared/datasets/cora, skipped when absent):
# test accuracy on Cora, 100 epochs, hidden 64, lr 0.01, seeds 0..4, for both,
#   ratio: python_minus_trainer_host_cora_test_acc  (target within +-0.01)
#
# Usage: scripts/bench/python.sh [--nodes N] [--epochs E] [--rounds R] [--cora DIR] [--build DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
nodes=1000000
epochs=3
rounds=2
cora=../shared/datasets/cora
build=build
while [[ $# -gt 0 ]]; do
  case "$1" in
    --nodes) nodes="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --cora) cora="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "python.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ "$epochs" -ge 2 ]] || { echo "python.sh: --epochs must be >= 2 (the first is warm-up)" >&2; exit 2; }
bin="$(realpath "$build")"
for b in partition/dgl-partition launcher/launch/dgl-launch daemons/trainer_host/trainer-host \
         daemons/graph_server/graph-server; do
  [[ -x "$bin/$b" ]] || { echo "python.sh: build first ($bin/$b missing)" >&2; exit 1; }
done
ls "$bin"/python/dgld/_C*.so >/dev/null 2>&1 || { echo "python.sh: the dgld Python package is not built" >&2; exit 1; }
example="$(realpath examples/python/train_dist.py)"
work="$(mktemp -d "${TMPDIR:-/tmp}/dgld-python-bench.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# launch <dir> <graph> <metrics> <python|trainer-host> <extra flags...>
launch() {
  local dir="$1" graph="$2" metrics="$3" kind="$4"
  shift 4
  local base=$(( 20000 + RANDOM % 20000 ))
  printf '127.0.0.1 %d\n127.0.0.1 %d\n' "$base" "$((base + 10))" > "$dir/ip_config.txt"
  local cmd
  if [[ $kind == python ]]; then
    cmd=(/usr/bin/python3 "$example" --graph_name "$graph" --ip_config ip_config.txt --part_config "parts/$graph.json"
         --log_every 0 --metrics_out "$metrics")
    local args=("$@")
    for ((i = 0; i < ${#args[@]}; i++)); do  # trainer-host's spellings -> the example's
      case "${args[i]}" in
        --num-epochs) cmd+=(--num_epochs) ;; --num-hidden) cmd+=(--num_hidden) ;; --eval-every) cmd+=(--eval_every) ;;
        --fan-out) cmd+=(--fan_out) ;; --batch-size) cmd+=(--batch_size) ;; *) cmd+=("${args[i]}") ;;
      esac
    done
  else
    cmd=("$bin/daemons/trainer_host/trainer-host" --log-every 0 --no-progress --metrics-out "$metrics" "$@")
  fi
  (cd "$dir" && "$bin/launcher/launch/dgl-launch" --local --no-copy --workspace "$dir" --ip-config ip_config.txt \
     --part-config "parts/$graph.json" --num-servers 1 --num-trainers 1 \
     --extra-envs "PYTHONPATH=$bin/python" -- "${cmd[@]}" > "$dir/launch.log" 2>&1) || {
    echo "python.sh: the $kind job failed:" >&2; tail -20 "$dir/launch.log" >&2; exit 1; }
}

epoch_rate() {  # median seeds/s of epochs[1:]
  python3 -c 'import json,statistics,sys; e=json.load(open(sys.argv[1]))["epochs"][1:]; print(statistics.median(x["seeds_per_s"] for x in e))' "$1"
}

mkdir -p bench-results "$work/speed"
echo "partitioning an SBM graph of $nodes nodes into 2 parts..."
"$bin/partition/dgl-partition" --log-level warn \
  --generate "sbm:nodes=$nodes,avg_degree=20,classes=47,feat_dim=100,seed=1" \
  --num-parts 2 --graph-name g --output "$work/speed/parts" >/dev/null
flags=(--num-epochs "$epochs" --eval-every -1 --lr 0.01 --seed 1)
py=(); th=()
for ((r = 1; r <= rounds; r++)); do
  echo "round $r/$rounds: trainer-host..."
  launch "$work/speed" g metrics-th.json trainer-host "${flags[@]}"
  th+=("$(epoch_rate "$work/speed/metrics-th.json")")
  echo "round $r/$rounds: python3 examples/python/train_dist.py..."
  launch "$work/speed" g metrics-py.json python "${flags[@]}"
  py+=("$(epoch_rate "$work/speed/metrics-py.json")")
done

cora_th=(); cora_py=()
if [[ -d "$cora" ]]; then
  mkdir -p "$work/cora"
  "$bin/partition/dgl-partition" --log-level warn --input "ogb:$(realpath "$cora")" --num-parts 2 \
    --balance-train --graph-name cora --output "$work/cora/parts" >/dev/null
  for seed in 0 1 2 3 4; do
    echo "cora, seed $seed: trainer-host and the example, 100 epochs..."
    cflags=(--num-epochs 100 --eval-every 0 --lr 0.01 --num-hidden 64 --seed "$seed")
    launch "$work/cora" cora metrics-th.json trainer-host "${cflags[@]}"
    cora_th+=("$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["test_acc"])' "$work/cora/metrics-th.json")")
    launch "$work/cora" cora metrics-py.json python "${cflags[@]}"
    cora_py+=("$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["test_acc"])' "$work/cora/metrics-py.json")")
  done
else
  echo "python.sh: $cora not found: the Cora comparison is skipped"
fi

python3 - "$rounds" "${th[@]}" "${py[@]}" "${#cora_th[@]}" "${cora_th[@]}" "${cora_py[@]}" <<'PY'
import json, statistics, sys
a = sys.argv[1:]
n = int(a[0]); th = [float(x) for x in a[1:1 + n]]; py = [float(x) for x in a[1 + n:1 + 2 * n]]
k = int(a[1 + 2 * n]); cth = [float(x) for x in a[2 + 2 * n:2 + 2 * n + k]]; cpy = [float(x) for x in a[2 + 2 * n + k:]]
t, p = statistics.median(th), statistics.median(py)
print()
print(f"{'trainer-host':<14} {t:>10.0f} seeds/s   rounds: {', '.join(f'{x:.0f}' for x in th)}")
print(f"{'python example':<14} {p:>10.0f} seeds/s   rounds: {', '.join(f'{x:.0f}' for x in py)}")
out = {"trainer_host_seeds_per_s": th, "python_seeds_per_s": py, "ratio": p / t}
print(f"ratio: python_vs_trainer_host_seeds_per_s {p / t:.3f} (target >= 0.8)")
if k:
    mt, mp = statistics.mean(cth), statistics.mean(cpy)
    print(f"cora test accuracy, seeds 0-4: trainer-host {mt:.4f} ({', '.join(f'{x:.3f}' for x in cth)}), "
          f"python {mp:.4f} ({', '.join(f'{x:.3f}' for x in cpy)})")
    out.update({"cora_trainer_host": cth, "cora_python": cpy})
    print(f"ratio: python_minus_trainer_host_cora_test_acc {mp - mt:+.4f} (target within +-0.01)")
json.dump(out, open("bench-results/python.json", "w"), indent=2)
PY
