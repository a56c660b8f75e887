#!/usr/bin/env bash
# Warden against ZooKeeper 3.9.5 on this machine: throughput, latency, CPU efficiency, memory,
# restart time and disk, written to a markdown report with PNG plots. See README.md
# ("Benchmarks") and `scripts/bench/compare.sh --help`.
#
#   scripts/bench/compare.sh --quick          # a few minutes
#   scripts/bench/compare.sh                  # the full comparison (1,000,000 znodes, 30 s runs)
#
# The work is done by compare.py (Python's standard library); this wrapper only gives it
# matplotlib, from PyPI, in a venv under .cache/ (without it the plots are skipped).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
VENV="${WARDEN_CACHE:-$REPO/.cache}/bench-venv"
MATPLOTLIB_VERSION=3.11.2

PYTHON=python3
if [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -c 'import matplotlib' 2>/dev/null; then
  PYTHON="$VENV/bin/python"
elif python3 -m venv "$VENV" >&2 && "$VENV/bin/pip" install -q "matplotlib==$MATPLOTLIB_VERSION" >&2; then
  PYTHON="$VENV/bin/python"
else
  echo "compare.sh: could not install matplotlib into $VENV; the report will have no plots" >&2
fi
exec "$PYTHON" "$HERE/compare.py" "$@"
