#!/usr/bin/env bash
# Benchmark (not a test) of dgl-partition: partitions a generated graph of
# ogbn-products size (2,449,029 nodes, ~62M undirected edges, 100-dim features,
# 47 classes) into 2 and 4 parts and reports, from each run's --stats-json:
#   - the METIS call alone and the whole tool (target: whole <= 1.3 x METIS);
#   - peak RSS against the input size, int64 CSR (indptr + indices) plus float32
#     features (target: <= 2.5 x), overall and outside the METIS call.
#
# Usage: scripts/bench/partition.sh [--nodes N] [--avg-degree D] [--parts "2 4"]
#                                   [--build DIR] [--json] [--keep]
#   --json  also writes bench-results/partition-<nodes>.json
#   --keep  keeps the partitions (under $TMPDIR) instead of deleting them
#
# scripts/bench/partition.sh --distributed [--ranks R] [--nodes N] [--avg-degree D] [--scotch-edge-fraction F]
#                                         [--build DIR]
#   the same graph partitioned by single-process METIS into R parts and by
#   dgl-partition --distributed --local (R ranks of PT-Scotch, from --to-chunks R);
#   prints the distributed edge cut against METIS's (target <= 1.3 x) and every
#   rank's peak RSS against its share of the input, int64 CSR plus float32
#   features (target <= 2.5 x). docs/distributed-partitioning.md
set -euo pipefail

cd "$(dirname "$0")/../.."
nodes=2449029
avg_degree=50.5
parts="2 4"
build=""
write_json=0
keep=0
distributed=0
ranks=4
fraction=auto
while [[ $# -gt 0 ]]; do
  case "$1" in
    --nodes) nodes="$2"; shift 2 ;;
    --avg-degree) avg_degree="$2"; shift 2 ;;
    --parts) parts="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --json) write_json=1; shift ;;
    --keep) keep=1; shift ;;
    --distributed) distributed=1; shift ;;
    --ranks) ranks="$2"; shift 2 ;;
    --scotch-edge-fraction) fraction="$2"; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "partition.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

tool=""
for d in ${build:-build build-*}; do
  if [[ -x "$d/partition/dgl-partition" ]]; then tool="$d/partition/dgl-partition"; break; fi
done
if [[ -z "$tool" ]]; then
  echo "partition.sh: no dgl-partition found (build first, or pass --build DIR)" >&2
  exit 1
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/dgld-partition-bench.XXXXXX")"
cleanup() { if [[ $keep -eq 0 ]]; then rm -rf "$work"; else echo "partitions kept in $work"; fi; }
trap cleanup EXIT

spec="sbm:nodes=${nodes},avg_degree=${avg_degree},classes=47,feat_dim=100,p_in=0.8,seed=1"
if [[ $distributed -eq 1 ]]; then
  echo "distributed partitioning benchmark: $spec, $ranks ranks ($tool)"
  "$tool" --generate "$spec" --num-parts "$ranks" --output "$work/metis" --graph-name bench \
    --stats-json "$work/metis.json" --log-level warn >/dev/null
  "$tool" --generate "$spec" --to-chunks "$ranks" --output "$work/chunks" --graph-name bench --log-level warn >/dev/null
  "$tool" --distributed --local --num-parts "$ranks" --chunks "$work/chunks" --output "$work/dist" \
    --scotch-edge-fraction "$fraction" --stats-json "$work/dist.json" --log-level warn
  python3 - "$work/metis.json" "$work/dist.json" "$nodes" "$ranks" <<'PY'
import json, os, sys
metis, dist, nodes, ranks = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3], int(sys.argv[4])
mib = 2.0 ** 20
cut_ratio = dist["edge_cut"] / max(1, metis["edge_cut"])
print(f"edge cut: METIS {metis['edge_cut']} ({100 * metis['edge_cut_fraction']:.2f}%), PT-Scotch {dist['edge_cut']} "
      f"({100 * dist['edge_cut'] / max(1, dist['num_edges']):.2f}%)")
for r, (rss, share) in enumerate(zip(dist["peak_rss_bytes"], dist["share_bytes"])):
    print(f"  rank {r}: peak rss {rss / mib:.0f} MiB, its share of the input {share / mib:.0f} MiB -> {rss / share:.2f} x")
print(f"single-process METIS peak rss {metis['peak_rss_bytes'] / mib:.0f} MiB for the whole input "
      f"{metis['input_bytes'] / mib:.0f} MiB; distributed: PT-Scotch {dist['scotch_s']:.2f} s on "
      f"{100 * dist['scotch_edge_fraction']:.1f}% of the edges, total {dist['total_s']:.2f} s")
os.makedirs("bench-results", exist_ok=True)
json.dump({"benchmark": "partition-distributed", "nodes": nodes, "ranks": ranks, "metis": metis, "distributed": dist,
           "edge_cut_vs_metis": cut_ratio, "rank_rss_vs_share": dist["max_rss_over_share"]},
          open(f"bench-results/partition-distributed-{nodes}.json", "w"), indent=2)
print(f"ratio: distributed_edge_cut_vs_metis {cut_ratio:.3f} (target 1.3)")
print(f"ratio: distributed_rank_rss_vs_share {dist['max_rss_over_share']:.2f} (target 2.5)")
PY
  exit 0
fi
echo "dgl-partition benchmark: $spec, parts: $parts ($tool)"
stats_files=()
for p in $parts; do
  echo "== $p parts"
  "$tool" --generate "$spec" --num-parts "$p" --output "$work/p$p" --graph-name bench \
    --stats-json "$work/stats-$p.json" --log-level warn
  stats_files+=("$work/stats-$p.json")
done

python3 - "$write_json" "$nodes" "${stats_files[@]}" <<'EOF'
import json, os, sys, time
write_json, nodes, files = sys.argv[1] == "1", sys.argv[2], sys.argv[3:]
runs, worst_time, worst_rss = [], 0.0, 0.0
for f in files:
    s = json.load(open(f))
    t, mib = s["time_s"], 2.0 ** 20
    time_ratio = t["total"] / t["metis"] if t["metis"] > 0 else float("inf")
    rss_ratio = s["peak_rss_bytes"] / s["input_bytes"]
    outside_ratio = s["peak_rss_outside_metis_bytes"] / s["input_bytes"]
    parts = len(s["parts"])
    print(f"parts {parts}: nodes {s['num_nodes']} edges {s['num_edges']} edge cut {100 * s['edge_cut_fraction']:.2f}%")
    print(f"  time: metis {t['metis']:.2f} s, whole tool {t['total']:.2f} s (load/generate {t['load']:.2f}, "
          f"features {t['features']:.2f}, write {t['write']:.2f}) -> {time_ratio:.2f} x metis; "
          f"without generating the input {(t['total'] - t['load']) / t['metis']:.2f} x")
    print(f"  memory: peak {s['peak_rss_bytes'] / mib:.0f} MiB (METIS call {s['metis_peak_rss_bytes'] / mib:.0f} MiB, "
          f"everything else {s['peak_rss_outside_metis_bytes'] / mib:.0f} MiB), input {s['input_bytes'] / mib:.0f} MiB "
          f"-> {rss_ratio:.2f} x input ({outside_ratio:.2f} x outside METIS)")
    worst_time, worst_rss = max(worst_time, time_ratio), max(worst_rss, rss_ratio)
    runs.append({"parts": parts, "stats": s, "time_ratio": time_ratio, "rss_ratio": rss_ratio,
                 "rss_ratio_outside_metis": outside_ratio})
if write_json:
    os.makedirs("bench-results", exist_ok=True)
    out = f"bench-results/partition-{nodes}.json"
    json.dump({"benchmark": "partition", "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "runs": runs,
               "partition_time_vs_metis": worst_time, "peak_rss_vs_input": worst_rss}, open(out, "w"), indent=2)
    print(f"results written to {out}")
print(f"ratio: partition_time_vs_metis {worst_time:.2f} (target 1.3)")
print(f"ratio: peak_rss_vs_input {worst_rss:.2f} (target 2.5)")
EOF
