#!/usr/bin/env bash
# Run kazoo 2.11.0's own test suite (the kazoo/tests package, 493 tests) against the server
# under test, in two pytest runs (see README.md in this directory): "standalone", every test
# against one standalone server started from a zoo.cfg; then "ensemble", the tests that need
# several servers and a slice of the rest against a 3-server ensemble (server.N lines + myid).
#
#   scripts/compat/kazoo/run.sh [extra pytest args, e.g. -k test_lock or -x; given to both runs]
#
# Environment:
#   COMPAT_SERVER   warden (default: $WARDEN_BIN server --zoo-cfg CFG, built if missing) or
#                   zookeeper (Apache ZooKeeper 3.9.5 via scripts/zookeeper/run.sh)
#   WARDEN_BIN      default <repo>/target/release/warden
#   KAZOO_COMPAT_RUNS        which runs: "standalone ensemble" (default), "standalone", "ensemble"
#   KAZOO_COMPAT_ENSEMBLE_SELECT  the ensemble run's selection (node-id prefixes/suffixes; "all"
#                   for the whole suite); default ENSEMBLE_SELECT below
#   KAZOO_COMPAT_TIME_LIMIT  hard limit for the standalone pytest run in seconds (default 1200)
#   KAZOO_COMPAT_ENSEMBLE_TIME_LIMIT  the same for the ensemble run (default 900)
#   KAZOO_COMPAT_PORT        first client port tried (default 20000; TLS port = it + 4; server
#                   i+1 of an ensemble at it + 10i)
#   KAZOO_COMPAT_KEEP=1      keep each server's directory (zoo.cfg, data, server.log)
#   ZK_HEAP, ZK_JVM_OPTS, ZK_LOG_LEVEL  passed on to scripts/zookeeper/run.sh (ZK_HEAP default
#                   512m here)
#   PYTHON          interpreter for the venv (default python3; 3.11 tested)
#
# Installs, idempotently, a venv with exactly the packages in requirements.txt into
# ${WARDEN_CACHE:-<repo>/.cache}/kazoo/venv (PyPI only). Every server process is started by the
# pytest plugin (kazoo_compat_plugin.py), which records its PID; after each run this script
# stops pytest and any server still alive, by PID.
#
# Exit status 0 iff every failed or errored test is listed in known-failures-$COMPAT_SERVER.txt
# and both pytest runs finished (status 0 or 1). The last line printed is always:
# compat kazoo: N passed, M failed, K skipped      (both runs together; M includes known failures)
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
KNOWN="$HERE/known-failures-$COMPAT_SERVER.txt"

# run_pytest NAME SIZE TIME_LIMIT [pytest args...]: one pytest run in $WORK/NAME against a
# cluster of SIZE servers; sets run_status.
#
# kazoo's harness settings: ZOOKEEPER_CLUSTER_SIZE servers. ZOOKEEPER_VERSION only selects the
# harness's ZooKeeper >= 3.5 configuration (4lw whitelist *, reconfigEnabled, the super digest);
# CI is unset so that, as on a developer machine, tests ask the server for its version (`envi`)
# instead of trusting ZOOKEEPER_VERSION, and test_build (a check of kazoo's own CI matrix) skips.
run_pytest() {
  local name="$1" size="$2" limit="$3"
  shift 3
  local dir="$WORK/$name"
  mkdir -p "$dir"
  say "$name run: kazoo 2.11.0's tests against $size $COMPAT_SERVER server(s)" \
    "(time limit ${limit}s; work dir $dir)"
  run_status=0
  (cd "$dir" && exec env -u CI -u ZOOKEEPER_PATH -u ZOOKEEPER_CLASSPATH -u ZOOKEEPER_JAAS_AUTH \
      -u ZOOKEEPER_LOCAL_SESSION_RO -u KRB5_TEST_ENV \
    ZOOKEEPER_VERSION=3.9.5 \
    ZOOKEEPER_CLUSTER_SIZE="$size" \
    ZOOKEEPER_OBSERVER_START_ID=-1 \
    ZOOKEEPER_PORT_OFFSET="${KAZOO_COMPAT_PORT:-20000}" \
    COMPAT_REPO="$REPO" \
    COMPAT_SERVER="$COMPAT_SERVER" \
    KAZOO_COMPAT_SELECT="${KAZOO_COMPAT_SELECT:-}" \
    KAZOO_COMPAT_WORK="$dir" \
    KAZOO_COMPAT_PIDS="$WORK/pids" \
    PYTHONPATH="$HERE" \
    timeout -k 30 "$limit" \
    "$VENV/bin/python" -m pytest -c "$HERE/pytest.ini" -p kazoo_compat_plugin \
      --rootdir "$TESTS" --junitxml="$dir/junit.xml" "$@") &
  PYTEST_PID=$!
  wait "$PYTEST_PID" || run_status=$?
  PYTEST_PID=""
  echo >&2
  cleanup   # servers a killed pytest left behind
  if [[ "$run_status" -eq 124 || "$run_status" -eq 137 ]]; then
    say "$name run hit the ${limit}s time limit; tests that did not finish count as failed"
  fi
}

# The ensemble run against 3 servers: for Warden the whole suite (about 4 minutes); for
# ZooKeeper, whose three JVMs kazoo's harness starts again for each of ~60 test classes, the
# tests that need several servers and a slice of the suite that covers each area (client API,
# connection loss and session expiry, watches, the recipes most used against an ensemble).
# Keys for the plugin's KAZOO_COMPAT_SELECT: a test runs if its node id starts or ends with
# one. KAZOO_COMPAT_ENSEMBLE_SELECT overrides the choice ("all": the whole suite).
ENSEMBLE_SLICE="::test_update_host_list test_connection.py:: test_client.py::TestReconfig::
  test_client.py::TestClient:: test_watchers.py:: test_lock.py:: test_election.py:: test_queue.py::"
if [[ "${COMPAT_SERVER:-warden}" == warden ]]; then ENSEMBLE_SELECT=all; else ENSEMBLE_SELECT="$ENSEMBLE_SLICE"; fi
ENSEMBLE_SELECT="${KAZOO_COMPAT_ENSEMBLE_SELECT:-$ENSEMBLE_SELECT}"
[[ "$ENSEMBLE_SELECT" != all ]] || ENSEMBLE_SELECT=""

status=0
if [[ "${KAZOO_COMPAT_RUNS:-standalone ensemble}" == *standalone* ]]; then
  run_pytest standalone 1 "$TIME_LIMIT" "$TESTS" "$@"
  ((run_status <= 1)) || status=1   # 1: some test failed, counted below
fi
if [[ "${KAZOO_COMPAT_RUNS:-standalone ensemble}" == *ensemble* ]]; then
  KAZOO_COMPAT_SELECT="$ENSEMBLE_SELECT" \
    run_pytest ensemble 3 "${KAZOO_COMPAT_ENSEMBLE_TIME_LIMIT:-900}" "$TESTS" "$@"
  ((run_status <= 1)) || status=1
fi

passed=0 failed=0 skipped=0 new=0
for dir in "$WORK"/standalone "$WORK"/ensemble; do
  [[ -d "$dir" ]] || continue
  read -r p f s n < <("$VENV/bin/python" "$HERE/kazoo_compat_plugin.py" summarize "$dir" "$KNOWN")
  say "$(basename "$dir") run: $p passed, $f failed, $s skipped; results in $dir/junit.xml"
  while read -r kind rest; do
    case "$kind" in
      known) say "  known failure ($(basename "$dir")): $rest" ;;
      new) say "  NEW failure ($(basename "$dir")): $rest" ;;
      fixed) say "  known failure now passes ($(basename "$dir")), remove it from $(basename "$KNOWN"): $rest" ;;
    esac
  done <"$dir/failures.txt"
  passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s)) new=$((new + n))
done
elapsed=$((SECONDS - STARTED))
if ((status != 0)); then
  say "a pytest run ended with a status other than 0 or 1 (time limit, collection or internal error?)"
  new=$((new + 1))
fi
say "$COMPAT_SERVER, wall time ${elapsed}s; failures not in $(basename "$KNOWN"): $new"
echo "compat kazoo: $passed passed, $failed failed, $skipped skipped"
((new == 0))
