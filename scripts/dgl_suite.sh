#!/usr/bin/env bash
# Runs DGL's own distributed test suite (tests/distributed of a DGL checkout
# the user points at: a fetched copy of github.com/dmlc/dgl, never committed
# here) against dgld, through the `dgl` alias package of tests/dgl_alias
# (dgl.X is dgld.X; DGL's test files unchanged), with DGL's tests/backend on
# the path as its tests expect (it imports dgl.backend). Prints one line per
# test file (passed / failed / skipped / not applicable), the totals over the
# applicable items, then the first line of every failure.
#
# DGL's tests load Cora with CitationGraphDataset("cora") and no path:
# DGL_DOWNLOAD_DIR is kept when set, else ../shared/datasets when it holds a
# cora copy (dgld.data reads DGL's download or OGB's raw layout; nothing is
# downloaded). They also write their partitions to the fixed /tmp/dist_graph,
# which is removed before and after the run (a failed test leaves it, and the
# next run's partition_graph would find stale files there).
#
# Not applicable (counted apart, with the reason): the items that test DGL's
# own Python RPC layer and Python KVStore internals, which dgld replaces with
# its daemons (test_rpc.py; test_new_kvstore.py's test_kv_store and
# test_kv_multi_role).
#
# Each item has --item-timeout seconds (default 180; pytest-timeout, Debian's
# python3-pytest-timeout, which scripts/setup.sh installs), the run --timeout.
#
# Usage: scripts/dgl_suite.sh DGL_CHECKOUT [--build DIR] [--timeout S] [--item-timeout S] [-- PYTEST_ARGS...]
#   e.g. scripts/dgl_suite.sh /work/distdgl/dgl -- -k test_dist_tensor
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
[[ $# -ge 1 && $1 != -h && $1 != --help ]] || { sed -n '2,28p' "$0"; exit 2; }
dgl_src=$(realpath "$1"); shift
build=build
timeout_s=1800
item_timeout_s=180
extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --timeout) timeout_s="$2"; shift 2 ;;
    --item-timeout) item_timeout_s="$2"; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "dgl_suite.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
suite="$dgl_src/tests/distributed"
[[ -d $suite && -d $dgl_src/tests/backend ]] || {
  echo "dgl_suite.sh: $dgl_src has no tests/distributed and tests/backend (a DGL checkout is needed)" >&2; exit 2; }
ls "$build"/python/dgld/_C*.so >/dev/null 2>&1 || { echo "dgl_suite.sh: build first ($build/python/dgld missing)" >&2; exit 1; }
build=$(realpath "$build")

# DGL's tests write into the current directory and /tmp: run them in a
# scratch directory of their own, removed at the end.
work=$(mktemp -d "${TMPDIR:-/tmp}/dgld-dgl-suite.XXXXXX")
rm -rf /tmp/dist_graph
trap 'rm -rf "$work" /tmp/dist_graph' EXIT
if [[ -z ${DGL_DOWNLOAD_DIR:-} && -d ../shared/datasets/cora ]]; then
  export DGL_DOWNLOAD_DIR=$(realpath ../shared/datasets)
fi
not_applicable=(
  "test_rpc.py::DGL's Python RPC layer (dgld's daemons speak their own protocol, docs/formats.md)"
  "test_new_kvstore.py::test_kv_store::DGL's Python KVStore server internals (dgld's KVStore is the graph-server)"
  "test_new_kvstore.py::test_kv_multi_role::DGL's Python KVStore server internals (dgld's KVStore is the graph-server)"
)
deselect=()
for na in "${not_applicable[@]}"; do
  item=${na%%::DGL*}; item=${item%%::dgld*}
  case $item in
    *::*) deselect+=(--deselect "$item") ;;  # node ids are relative to --rootdir
    *) deselect+=(--ignore "$suite/$item") ;;
  esac
done

echo "DGL's tests/distributed from $dgl_src ($(git -C "$dgl_src" describe --tags 2>/dev/null || echo 'version unknown')) against dgld ($build)"
rc=0
(cd "$work" && PYTHONPATH="$repo/tests/dgl_alias:$dgl_src/tests:$build/python" DGLBACKEND=pytorch \
   DGLD_BUILD_ROOT="$build" OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE \
   timeout "$timeout_s" /usr/bin/python3 -m pytest -p no:cacheprovider -q -rN --junitxml="$work/junit.xml" \
     --continue-on-collection-errors --timeout="$item_timeout_s" --rootdir="$suite" "${deselect[@]}" "$suite" \
     "${extra[@]}" > "$work/pytest.log" 2>&1) || rc=$?
if [[ ! -s $work/junit.xml ]]; then
  echo "dgl_suite.sh: pytest wrote no results (exit $rc):" >&2; tail -30 "$work/pytest.log" >&2; exit 1
fi
python3 - "$work/junit.xml" "${not_applicable[@]}" <<'PY'
import collections, sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
na = [a.split("::") for a in sys.argv[2:]]
files = collections.OrderedDict()
failures = []
for case in root.iter("testcase"):
    cls = case.get("classname", "")
    # A file that failed to be collected has no class: its name is the file's.
    f = (cls.split(".")[0] if cls else case.get("name", "").split(".")[-1]) + ".py"
    c = files.setdefault(f, collections.Counter())
    res = "passed"
    for child in case:
        if child.tag in ("failure", "error"):
            res = "failed"
            text = child.get("message") or ""
            if not cls:  # a collection error: the exception line of its traceback
                lines = [l for l in (child.text or "").splitlines() if l.startswith("E ")]
                text = lines[-1][1:].strip() if lines else text
            msg = text.strip().splitlines()
            failures.append(f"{f}::{case.get('name')}: {msg[0][:200] if msg else child.tag}")
        elif child.tag == "skipped":
            res = "skipped"
    c[res] += 1
for parts in na:
    f = parts[0]
    files.setdefault(f, collections.Counter())["not applicable"] += 1 if len(parts) == 3 else 0
tot = collections.Counter()
print(f"{'file':<34} {'passed':>7} {'failed':>7} {'skipped':>8}")
for f, c in files.items():
    print(f"{f:<34} {c['passed']:>7} {c['failed']:>7} {c['skipped']:>8}")
    tot.update(c)
print(f"{'total (applicable items)':<34} {tot['passed']:>7} {tot['failed']:>7} {tot['skipped']:>8}")
print("not applicable (not run):")
for parts in na:
    print(f"  {'::'.join(parts[:-1])}: {parts[-1]}")
if failures:
    print("failures (first line each):")
    for f in failures:
        print("  " + f)
PY
