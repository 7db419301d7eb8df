#!/usr/bin/env bash
# Benchmark (not a test) of TorchScript models in trainer-host: the scripted
# GraphSAGE of examples/models/sage.py (dgld.nn.SAGEConv, the built-in sage's
# architecture) trained with --model-file against the built-in --model sage,
# the same job in both: 2 partitions, dgl-launch --local with 2 simulated
# machines x 1 trainer, hidden 16, fanout 10,25, batch 1000, lr 0.01, no
# evaluation; runs alternate. Prints the epoch time (median of the epochs
# after the first) and
#   ratio: scripted_vs_builtin_epoch_time  (target <= 1.15)
# With --cora DIR (default ../shared/datasets/cora, skipped when absent):
# test accuracy on Cora, 100 epochs, hidden 64, lr 0.01, seeds 0..4, for both,
#   ratio: scripted_minus_builtin_cora_test_acc  (target within +-0.01)
#
# Usage: scripts/bench/models.sh [--nodes N] [--epochs E] [--rounds R] [--cora DIR] [--build DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
nodes=200000
epochs=4
rounds=3
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
    *) echo "models.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ "$epochs" -ge 2 ]] || { echo "models.sh: --epochs must be >= 2 (the first is warm-up)" >&2; exit 2; }
bin="$(realpath "$build")"
for b in partition/dgl-partition launcher/launch/dgl-launch daemons/trainer_host/trainer-host \
         daemons/graph_server/graph-server; do
  [[ -x "$bin/$b" ]] || { echo "models.sh: build first ($bin/$b missing)" >&2; exit 1; }
done
ls "$bin"/python/dgld/_C*.so >/dev/null 2>&1 || { echo "models.sh: the dgld Python package is not built" >&2; exit 1; }
work="$(mktemp -d "${TMPDIR:-/tmp}/dgld-models-bench.XXXXXX")"
trap 'rm -rf "$work"' EXIT

export_sage() {  # <in_feats> <classes> <hidden> <seed> <out>
  PYTHONPATH="$bin/python" /usr/bin/python3 examples/models/export.py --model sage --in-feats "$1" \
    --n-classes "$2" --n-hidden "$3" --seed "$4" --out "$5" >/dev/null
}

# launch <dir> <graph> <metrics> <trainer-host flags...>
launch() {
  local dir="$1" graph="$2" metrics="$3"
  shift 3
  local base=$(( 20000 + RANDOM % 20000 ))
  printf '127.0.0.1 %d\n127.0.0.1 %d\n' "$base" "$((base + 10))" > "$dir/ip_config.txt"
  (cd "$dir" && "$bin/launcher/launch/dgl-launch" --local --no-copy --workspace "$dir" --ip-config ip_config.txt \
     --part-config "parts/$graph.json" --num-servers 1 --num-trainers 1 -- \
     "$bin/daemons/trainer_host/trainer-host" --log-every 0 --no-progress --metrics-out "$metrics" "$@" \
     > "$dir/launch.log" 2>&1) || { echo "models.sh: a job failed:" >&2; tail -20 "$dir/launch.log" >&2; exit 1; }
}

epoch_time() {  # median time_s of epochs[1:]
  /usr/bin/python3 -c 'import json,statistics,sys; e=json.load(open(sys.argv[1]))["epochs"][1:]; print(statistics.median(x["time_s"] for x in e))' "$1"
}
test_acc() { /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["test_acc"])' "$1"; }

mkdir -p bench-results "$work/speed"
echo "partitioning an SBM graph of $nodes nodes into 2 parts..."
"$bin/partition/dgl-partition" --log-level warn \
  --generate "sbm:nodes=$nodes,avg_degree=20,classes=47,feat_dim=100,seed=1" \
  --num-parts 2 --graph-name g --output "$work/speed/parts" >/dev/null
export_sage 100 47 16 1 "$work/speed/sage.pt"
flags=(--num-epochs "$epochs" --eval-every -1 --lr 0.01 --seed 1)
builtin=(); scripted=()
for ((r = 1; r <= rounds; r++)); do
  echo "round $r/$rounds: --model sage..."
  launch "$work/speed" g metrics-builtin.json --model sage "${flags[@]}"
  builtin+=("$(epoch_time "$work/speed/metrics-builtin.json")")
  echo "round $r/$rounds: --model-file sage.pt..."
  launch "$work/speed" g metrics-scripted.json --model-file "$work/speed/sage.pt" "${flags[@]}"
  scripted+=("$(epoch_time "$work/speed/metrics-scripted.json")")
done

cora_b=(); cora_s=()
if [[ -d "$cora" ]]; then
  mkdir -p "$work/cora"
  "$bin/partition/dgl-partition" --log-level warn --input "ogb:$(realpath "$cora")" --num-parts 2 \
    --balance-train --graph-name cora --output "$work/cora/parts" >/dev/null
  for seed in 0 1 2 3 4; do
    echo "cora, seed $seed: --model sage and --model-file sage.pt, 100 epochs..."
    export_sage 1433 7 64 "$seed" "$work/cora/sage.pt"
    cflags=(--num-epochs 100 --eval-every 0 --lr 0.01 --num-hidden 64 --seed "$seed")
    launch "$work/cora" cora metrics-builtin.json --model sage "${cflags[@]}"
    cora_b+=("$(test_acc "$work/cora/metrics-builtin.json")")
    launch "$work/cora" cora metrics-scripted.json --model-file "$work/cora/sage.pt" "${cflags[@]}"
    cora_s+=("$(test_acc "$work/cora/metrics-scripted.json")")
  done
else
  echo "models.sh: $cora not found: the Cora comparison is skipped"
fi

/usr/bin/python3 - "$rounds" "${builtin[@]}" "${scripted[@]}" "${#cora_b[@]}" "${cora_b[@]}" "${cora_s[@]}" <<'PY'
import json, statistics, sys
a = sys.argv[1:]
n = int(a[0]); b = [float(x) for x in a[1:1 + n]]; s = [float(x) for x in a[1 + n:1 + 2 * n]]
k = int(a[1 + 2 * n]); cb = [float(x) for x in a[2 + 2 * n:2 + 2 * n + k]]; cs = [float(x) for x in a[2 + 2 * n + k:]]
tb, ts = statistics.median(b), statistics.median(s)
print()
print(f"{'built-in sage':<16} epoch {tb:.3f} s   rounds: {', '.join(f'{x:.3f}' for x in b)}")
print(f"{'scripted sage.pt':<16} epoch {ts:.3f} s   rounds: {', '.join(f'{x:.3f}' for x in s)}")
out = {"builtin_epoch_s": b, "scripted_epoch_s": s, "ratio": ts / tb}
print(f"ratio: scripted_vs_builtin_epoch_time {ts / tb:.3f} (target <= 1.15)")
if k:
    mb, ms = statistics.mean(cb), statistics.mean(cs)
    print(f"cora test accuracy, seeds 0-4: built-in {mb:.4f} ({', '.join(f'{x:.3f}' for x in cb)}), "
          f"scripted {ms:.4f} ({', '.join(f'{x:.3f}' for x in cs)})")
    out.update({"cora_builtin": cb, "cora_scripted": cs})
    print(f"ratio: scripted_minus_builtin_cora_test_acc {ms - mb:+.4f} (target within +-0.01)")
json.dump(out, open("bench-results/models.json", "w"), indent=2)
PY
