#!/usr/bin/env bash
# Benchmark (not a test): training on N = 2, 4, 8 emulated machines over
# shaped links (scripts/cluster_emu.py), one table per run with ratios to
# N = 2; see scripts/bench/scaleout.py --help. Root only (network namespaces).
set -euo pipefail
cd "$(dirname "$0")/../.."
exec python3 scripts/bench/scaleout.py "$@"
