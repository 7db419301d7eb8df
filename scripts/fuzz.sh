#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz (clang, -Dfuzz=true: ASan and
# UBSan on, in build-fuzz/) and runs each for SECONDS (default 60), one after
# another, over its seed corpus tests/fuzz/corpus/<target> (read only; what a
# run discovers goes to build-fuzz/fuzz-corpus/<target>). Prints executions,
# coverage and findings per target; a crashing, leaking, hanging or
# out-of-memory input is kept as build-fuzz/findings/<target>/crash-* (or
# leak-, timeout-, oom-) and makes the script exit 1.
#
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]   targets: frame ip_config part_config partition graph_server
#        scripts/fuzz.sh --make-corpus           rewrite the seed corpora (tests/fuzz/make_corpus.cpp)
# Environment: FUZZ_BUILD_DIR (build-fuzz), FUZZ_JOBS (ninja -j, default 2),
#              FUZZ_NICE (10), FUZZ_FLAGS (more libFuzzer flags),
#              FUZZ_NO_BUILD=1 (run the targets as built, without ninja).
# A finding replays with: build-fuzz/tests/fuzz/fuzz_<target> FILE
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${FUZZ_BUILD_DIR:-build-fuzz}
ALL_TARGETS=(frame ip_config part_config partition graph_server)

if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ is missing (scripts/setup.sh installs clang and libclang-rt-14-dev)" >&2
  exit 2
fi
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  CC=clang CXX=clang++ meson setup "$BUILD_DIR" -Dfuzz=true --buildtype=debugoptimized >/dev/null
fi
if [ -z "${FUZZ_NO_BUILD:-}" ]; then
  nice -n "${FUZZ_NICE:-10}" ninja -C "$BUILD_DIR" -j "${FUZZ_JOBS:-2}" >/dev/null
fi

if [ "${1:-}" = "--make-corpus" ]; then
  exec "$BUILD_DIR/tests/fuzz/fuzz_make_corpus" tests/fuzz/corpus
fi

SECONDS_EACH=60
if [ $# -gt 0 ] && [[ "$1" =~ ^[0-9]+$ ]]; then
  SECONDS_EACH=$1
  shift
fi
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=("${ALL_TARGETS[@]}")

failed=0
for t in "${TARGETS[@]}"; do
  bin="$BUILD_DIR/tests/fuzz/fuzz_$t"
  if [ ! -x "$bin" ]; then
    echo "fuzz: no target '$t' (targets: ${ALL_TARGETS[*]})" >&2
    exit 2
  fi
  work="$BUILD_DIR/fuzz-corpus/$t"
  findings="$BUILD_DIR/findings/$t"
  log="$BUILD_DIR/fuzz-$t.log"
  mkdir -p "$work" "$findings"
  # Scratch files (the partition target rewrites its files every run) in
  # memory when /dev/shm is there.
  scratch=$(mktemp -d "$( [ -d /dev/shm ] && echo /dev/shm || echo "${TMPDIR:-/tmp}")/dgld-fuzz-tmp.XXXXXX")
  rc=0
  # shellcheck disable=SC2086
  TMPDIR="$scratch" nice -n "${FUZZ_NICE:-10}" "$bin" -max_total_time="$SECONDS_EACH" -print_final_stats=1 \
    -timeout=10 -rss_limit_mb=2048 -max_len=65536 -artifact_prefix="$findings/" ${FUZZ_FLAGS:-} \
    "$work" "tests/fuzz/corpus/$t" >"$log" 2>&1 &
  pid=$!
  wait $pid || rc=$?
  # Shared memory of a graph-server target that did not exit normally.
  rm -f /dev/shm/dgld.fuzz-"$pid".* 2>/dev/null || true
  rm -rf "$scratch"
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)
  if [ -z "$execs" ]; then  # a crash ends the run before the final stats
    execs=$(grep -oE '^#[0-9]+' "$log" | tail -n1 | tr -d '#')
  fi
  cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+' "$log" | tail -n1)
  n_findings=$(find "$findings" -type f | wc -l)
  if [ $rc -ne 0 ]; then
    failed=1
    echo "fuzz: $t: FAILED after ${execs:-?} executions (${cov:-no coverage line}); log $log:"
    grep -E 'ERROR: |runtime error|fuzz invariant|SUMMARY|Test unit written' "$log" | head -n 8 | sed 's/^/  /'
  else
    echo "fuzz: $t: ${execs:-?} executions in ${SECONDS_EACH} s, ${cov:-no coverage line}, findings kept: $n_findings"
  fi
done
exit $failed
