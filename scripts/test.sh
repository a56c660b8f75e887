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
cargo test --workspace --locked
