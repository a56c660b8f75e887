#!/usr/bin/env bash
# ClickHouse's keeper-bench-suite for Warden and ZooKeeper 3.9.5 on this machine: server sizes
# (cgroup limits) x clients x requests, repeated, memory and CPU sampled every second. As root;
# see README.md ("Benchmarks") and `scripts/bench/suite.sh --help`.
#
#   sudo scripts/bench/suite.sh --quick --warden-bin target/release/warden   # a few minutes
#
# The work is done by suite.py; this wrapper only gives it matplotlib (venv.sh).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
source "$HERE/venv.sh"
exec "$PYTHON" "$HERE/suite.py" "$@"
