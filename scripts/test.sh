#!/usr/bin/env bash
# Installs what dgld needs, builds it, and runs the whole test suite.
# Usage: scripts/test.sh [extra `meson test` arguments, e.g. --suite common]
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  meson setup "$BUILD_DIR" --buildtype=release
fi
JOBS=${JOBS:-$(nproc)}
ninja -C "$BUILD_DIR" -j "$JOBS"
rc=0
meson test -C "$BUILD_DIR" --print-errorlogs --num-processes "$JOBS" "$@" || rc=$?
# One plain closing line counted from meson's own log.
python3 - "$BUILD_DIR/meson-logs/testlog.json" <<'PY'
import json, sys
counts = {"passed": 0, "failed": 0, "skipped": 0}
for line in open(sys.argv[1]):
    r = json.loads(line).get("result", "")
    if r in ("OK", "EXPECTEDFAIL"): counts["passed"] += 1
    elif r == "SKIP": counts["skipped"] += 1
    else: counts["failed"] += 1
print(f"tests: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
PY
exit $rc
