#!/usr/bin/env bash
# Chaos soak (issue 50; docs/reliability.md, "Chaos soak"): one job on 4
# emulated machines and a spare for --minutes (default 60) with a fault every
# --fault-every MIN MAX (default 2m 6m). See scripts/bench/soak.py --help.
# Root only (network namespaces).
set -euo pipefail
cd "$(dirname "$0")/../.."
exec /usr/bin/python3 scripts/bench/soak.py "$@"
