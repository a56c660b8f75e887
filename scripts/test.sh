#!/usr/bin/env bash
# Runs every test of the project, from a fresh checkout: formatting, lints, the whole
# workspace's tests (unit, property, golden-vector, model, snapshot, and the integration tests
# that start real processes) and the patched dependencies' own tests (vendor/), then the
# compatibility suites: other projects' clients and test suites (kazoo, go-zookeeper, Curator,
# Curator's own published test suites, zkCli and the C client, ClickHouse) against a real
# `warden server`, and (all but zkCli) against 3-server clusters of them (Curator's own
# suites: a representative part unless CURATOR_SUITES=full);
# then the Debian package (scripts/package/test.sh: built, installed into a throwaway root,
# started as its systemd unit says, upgraded, purged; needs root), then the fault suite's short
# profile (scripts/faults/run.sh: kills, pauses, partitions and damaged disks on a 3-server
# cluster, histories checked with porcupine; needs root).
# Everything installs what it needs itself into .cache/ (ZooKeeper 3.9.5 from Maven Central,
# PyPI, Go and Debian packages; the web console's browser test installs Chromium with apt through
# scripts/console/install-chromium.sh).
#
#   scripts/test.sh                 everything
#   scripts/test.sh --cargo-only    fmt, clippy and cargo test only
#   scripts/test.sh --compat-only   the compatibility suites only
#   scripts/test.sh --package-only  the Debian package's test only
#   scripts/test.sh --faults-only   the fault suite only
set -euo pipefail
cd "$(dirname "$0")/.."

cargo_tests=1
compat=1
package=1
faults=1
case "${1:-}" in
  --cargo-only) compat=0; package=0; faults=0 ;;
  --compat-only) cargo_tests=0; package=0; faults=0 ;;
  --package-only) cargo_tests=0; compat=0; faults=0 ;;
  --faults-only) cargo_tests=0; compat=0; package=0 ;;
  "") ;;
  *) echo "usage: $0 [--cargo-only|--compat-only|--package-only|--faults-only]" >&2; exit 2 ;;
esac

log="$(mktemp)"
# A suite that fails leaves the lines that name what failed in $failures, printed again at the
# end, next to the totals, where a CI log's tail shows them.
failures="$(mktemp)"
trap 'rm -f "$log" "$failures"' EXIT
status=0

if (( cargo_tests )); then
  echo "== cargo fmt"
  cargo fmt --all -- --check
  echo "== cargo clippy"
  cargo clippy --workspace --all-targets --locked -- -D warnings
  echo "== cargo test"
  cargo test --workspace --locked --no-fail-fast 2>&1 | tee -a "$log" || status=$?
  echo "== cargo test, the patched dependencies (vendor/*/PATCHED.md)"
  for manifest in vendor/*/Cargo.toml; do
    cargo test --manifest-path "$manifest" --target-dir target/vendor --no-fail-fast 2>&1 \
      | tee -a "$log" || status=$?
  done
fi

if (( compat || package || faults )); then
  echo "== build the server under test ($(df -h --output=avail . | tail -n 1 | tr -d ' ') of disk free)"
  cargo build --release --locked -p warden
  export WARDEN_BIN="${CARGO_TARGET_DIR:-$PWD/target}/release/warden"
fi
run_suite() {
  local out
  out="$(mktemp)"
  echo "== $1"
  if "$1" 2>&1 | tee "$out"; then :; else
    status=1
    {
      echo "$1:"
      grep -a -E '^not ok|NEW failure|^--- FAIL|^FAILED |^ERROR |FAILED$|verdict: FAIL|^The test binary' "$out" \
        | head -n 15 | cut -c1-300 | sed 's/^/  /'
    } >>"$failures"
  fi
  cat "$out" >>"$log"
  rm -f "$out"
}
if (( compat )); then
  for suite in scripts/compat/*/run.sh; do run_suite "$suite"; done
fi
if (( package )); then
  run_suite scripts/package/test.sh
fi
if (( faults )); then
  run_suite scripts/faults/run.sh
fi
if (( cargo_tests )) && grep -q -E '^test .* FAILED$' "$log"; then
  { echo "cargo test:"; grep -E '^test .* FAILED$' "$log" | head -n 15 | sed 's/^/  /'; } >>"$failures"
fi
if [[ -s "$failures" ]]; then
  echo "== what failed"
  cat "$failures"
fi

# One closing line for the whole run: cargo's "test result:" lines and each suite's last line
# ("compat NAME: N passed, M failed, K skipped"; "package deb: ..."; "faults NAME: N passed, M failed").
awk '/^test result:/ || /^(compat|package|faults) [^:]*: [0-9]+ passed/ {
       for (i = 1; i <= NF; i++) { w = $(i); sub(/[;,]$/, "", w)
         if (w == "passed") p += $(i-1); if (w == "failed") f += $(i-1) } }
     /^(compat|package|faults) [^:]*: [0-9]+ passed/ { print }
     END { printf "total: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
