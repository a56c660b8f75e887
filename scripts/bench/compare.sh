#!/usr/bin/env bash
# Warden against ZooKeeper 3.9.5 on this machine: throughput, latency, CPU efficiency, memory,
# restart time and disk, written to a markdown report with PNG plots. See README.md
# ("Benchmarks") and `scripts/bench/compare.sh --help`.
#
#   scripts/bench/compare.sh --quick          # a few minutes
#   scripts/bench/compare.sh                  # the full comparison (1,000,000 znodes, 30 s runs)
#
# The work is done by compare.py (Python's standard library); this wrapper only gives it
# matplotlib (venv.sh; without it the plots are skipped).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
source "$HERE/venv.sh"
exec "$PYTHON" "$HERE/compare.py" "$@"
