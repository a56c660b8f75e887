#!/usr/bin/env bash
# Run kazoo 2.11.0's own test suite (the kazoo/tests package, 493 tests) against the server
# under test, one standalone server started from a zoo.cfg (see README.md in this directory).
#
#   scripts/compat/kazoo/run.sh [extra pytest args, e.g. -k test_lock or -x]
#
# Environment:
#   COMPAT_SERVER   warden (default: $WARDEN_BIN server --zoo-cfg CFG, built if missing) or
#                   zookeeper (Apache ZooKeeper 3.9.5 via scripts/zookeeper/run.sh)
#   WARDEN_BIN      default <repo>/target/release/warden
#   KAZOO_COMPAT_TIME_LIMIT  hard limit for the whole pytest run in seconds (default 1200)
#   KAZOO_COMPAT_PORT        first client port tried (default 20000; TLS port = it + 4)
#   KAZOO_COMPAT_KEEP=1      keep each server's directory (zoo.cfg, data, server.log)
#   ZK_HEAP, ZK_JVM_OPTS, ZK_LOG_LEVEL  passed on to scripts/zookeeper/run.sh (ZK_HEAP default
#                   512m here)
#   PYTHON          interpreter for the venv (default python3; 3.11 tested)
#
# Installs, idempotently, a venv with exactly the packages in requirements.txt into
# ${WARDEN_CACHE:-<repo>/.cache}/kazoo/venv (PyPI only). Every server process is started by the
# pytest plugin (kazoo_compat_plugin.py), which records its PID; on exit this script stops
# pytest and any server still alive, by PID.
#
# Exit status 0 iff no test failed or errored (and pytest itself finished cleanly). The last
# line printed is always: compat kazoo: N passed, M failed, K skipped
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../../.." && pwd)"
# shellcheck source=../server.sh
source "$REPO/scripts/compat/server.sh"

CACHE="${WARDEN_CACHE:-$REPO/.cache}/kazoo"
VENV="$CACHE/venv"
WORK="$CACHE/run-$COMPAT_SERVER"
TIME_LIMIT="${KAZOO_COMPAT_TIME_LIMIT:-1200}"
PYTEST_PID=""
STARTED=$SECONDS
export PYTHONDONTWRITEBYTECODE=1   # nothing written under scripts/

say() { echo "compat kazoo: $*" >&2; }

stop_pid() {   # SIGTERM, SIGKILL after 10 s
  local pid="$1"
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
}

cleanup() {
  if [[ -n "$PYTEST_PID" ]] && kill -0 "$PYTEST_PID" 2>/dev/null; then
    stop_pid "$PYTEST_PID"
    wait "$PYTEST_PID" 2>/dev/null || true
  fi
  # Servers the plugin started ("pid zoo.cfg-path" lines), if still running that zoo.cfg.
  if [[ -f "$WORK/pids" ]]; then
    local pid cfg
    while read -r pid cfg; do
      [[ -n "$pid" && -r "/proc/$pid/cmdline" ]] || continue
      if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$cfg"; then
        say "stopping server pid $pid left running"
        stop_pid "$pid"
      fi
    done <"$WORK/pids"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- install ---------------------------------------------------------------------------------
install_venv() {
  local python="${PYTHON:-python3}" want
  command -v "$python" >/dev/null || { say "$python not found"; return 1; }
  want="$("$python" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])') $(sha256sum "$HERE/requirements.txt" | cut -d' ' -f1)"
  if [[ -x "$VENV/bin/python" && -f "$VENV/.installed" && "$(cat "$VENV/.installed")" == "$want" ]]; then
    return 0
  fi
  say "installing the kazoo test environment into $VENV"
  rm -rf "$VENV"
  mkdir -p "$CACHE"
  "$python" -m venv "$VENV"
  # --no-deps: requirements.txt is the complete, pinned environment. Binary wheels only, except
  # pure-sasl (pure Python, published as an sdist only).
  timeout 900 "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps \
    --only-binary :all: --no-binary pure-sasl -r "$HERE/requirements.txt" >&2
  "$VENV/bin/python" -c 'import kazoo.testing.common, kazoo.tests, pytest, pytest_timeout, gevent, eventlet, puresasl, objgraph' >&2
  echo "$want" >"$VENV/.installed"
}
install_venv

case "$COMPAT_SERVER" in
  warden)
    WARDEN_BIN="$(compat_warden_bin)"
    export WARDEN_BIN
    [[ -x "$WARDEN_BIN" ]] || { say "no warden binary at $WARDEN_BIN"; exit 1; }
    ;;
  zookeeper)
    "$REPO/scripts/zookeeper/install.sh" >/dev/null
    export ZK_HEAP="${ZK_HEAP:-512m}"
    ;;
  *) say "COMPAT_SERVER must be warden or zookeeper, not '$COMPAT_SERVER'"; exit 2 ;;
esac

# --- run -------------------------------------------------------------------------------------
rm -rf "$WORK"
mkdir -p "$WORK"
# kazoo/tests inside the venv; also pytest's rootdir, so node ids read test_client.py::...
TESTS="$("$VENV/bin/python" -c 'import os, kazoo.tests; print(os.path.dirname(kazoo.tests.__file__))')"
cd "$WORK"
say "running kazoo 2.11.0's tests against $COMPAT_SERVER (time limit ${TIME_LIMIT}s; work dir $WORK)"

# kazoo's harness settings: one server (ZOOKEEPER_CLUSTER_SIZE=1). ZOOKEEPER_VERSION only
# selects the harness's ZooKeeper >= 3.5 configuration (4lw whitelist *, reconfigEnabled, the
# super digest); CI is unset so that, as on a developer machine, tests ask the server for its
# version (`envi`) instead of trusting ZOOKEEPER_VERSION, and test_build (a check of kazoo's
# own CI matrix) skips.
status=0
env -u CI -u ZOOKEEPER_PATH -u ZOOKEEPER_CLASSPATH -u ZOOKEEPER_JAAS_AUTH \
    -u ZOOKEEPER_LOCAL_SESSION_RO -u KRB5_TEST_ENV \
  ZOOKEEPER_VERSION=3.9.5 \
  ZOOKEEPER_CLUSTER_SIZE=1 \
  ZOOKEEPER_OBSERVER_START_ID=-1 \
  ZOOKEEPER_PORT_OFFSET="${KAZOO_COMPAT_PORT:-20000}" \
  COMPAT_REPO="$REPO" \
  COMPAT_SERVER="$COMPAT_SERVER" \
  KAZOO_COMPAT_WORK="$WORK" \
  KAZOO_COMPAT_PIDS="$WORK/pids" \
  PYTHONPATH="$HERE" \
  timeout -k 30 "$TIME_LIMIT" \
  "$VENV/bin/python" -m pytest -c "$HERE/pytest.ini" -p kazoo_compat_plugin \
    --rootdir "$TESTS" --junitxml="$WORK/junit.xml" "$TESTS" "$@" &
PYTEST_PID=$!
wait "$PYTEST_PID" || status=$?
PYTEST_PID=""
echo >&2
cleanup   # servers a killed pytest left behind; before the summary so it stays the last line

read -r passed failed skipped < <("$VENV/bin/python" "$HERE/kazoo_compat_plugin.py" summarize "$WORK")
elapsed=$((SECONDS - STARTED))
if [[ "$status" -eq 124 || "$status" -eq 137 ]]; then
  say "pytest hit the ${TIME_LIMIT}s time limit; tests that did not finish count as failed"
elif [[ "$status" -ne 0 && "$failed" -eq 0 ]]; then
  say "pytest exited with status $status without a failing test (collection or internal error?)"
fi
say "$COMPAT_SERVER, wall time ${elapsed}s, results in $WORK/junit.xml"
echo "compat kazoo: $passed passed, $failed failed, $skipped skipped"
if [[ "$status" -eq 0 && "$failed" -eq 0 ]]; then
  exit 0
fi
exit 1
