#!/usr/bin/env bash
# Benchmark (not a test): a job on 3 emulated machines and a spare survives a
# killed trainer and a lost machine (dgl-launch --max-restarts); test accuracy
# against an undisturbed run and the cost of each restart. See
# scripts/bench/restart.py --help. Root only (network namespaces).
set -euo pipefail
cd "$(dirname "$0")/../.."
exec python3 scripts/bench/restart.py "$@"
