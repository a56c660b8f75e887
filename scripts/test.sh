#!/usr/bin/env bash
# Runs every test of the project, from a fresh checkout: formatting, lints, and the whole
# workspace's tests (unit, property, golden-vector, model, snapshot, and the integration tests
# that start real processes; those install what they need themselves, e.g. ZooKeeper 3.9.5 from
# Maven Central into .cache/).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== cargo test"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
status=0
cargo test --workspace --locked --no-fail-fast 2>&1 | tee "$log" || status=$?
# One closing line for the whole run: cargo's last line belongs to whichever crate ran last
# (often a doc-test target with nothing in it).
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i) ~ /^passed;?$/) p += $(i-1); if ($(i) ~ /^failed;?$/) f += $(i-1) } }
     END { printf "total: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
