#!/usr/bin/env bash
# Apache Curator 5.x recipes (JUnit 5, see README.md) against the server under test.
#
#   scripts/compat/curator/run.sh                          # Warden (target/release/warden)
#   COMPAT_SERVER=zookeeper scripts/compat/curator/run.sh  # reference: Apache ZooKeeper 3.9.5
#
# Installs the Maven dependencies (Maven Central) into .cache/curator/m2, writes a zoo.cfg in a
# temporary directory, starts the server through scripts/compat/server.sh, runs `mvn test` with
# a hard timeout, stops the server: the standalone run (every test class but ClusterFailoverTest).
# Then the cluster run: for each ClusterFailoverTest method, a fresh 3-server ensemble (server.N
# lines + myid), the test (which kills the leader with SIGKILL by PID), every server stopped by
# PID. Exit status 0 iff every test passed. The last line of output is always
# `compat curator: N passed, M failed, K skipped` (from the surefire XML reports of both runs; a
# run that breaks down without reports, e.g. a timeout or a build error, counts as 1 failure).
#
# Environment:
#   COMPAT_SERVER          warden (default) | zookeeper          (see scripts/compat/server.sh)
#   WARDEN_BIN             Warden binary (default target/release/warden)
#   WARDEN_CACHE           cache dir (default <repo>/.cache)
#   CURATOR_PORT           client port (default: a free random port)
#   CURATOR_TEST_TIMEOUT   hard limit on `mvn test`, seconds (default 600)
#   CURATOR_TEST           surefire -Dtest filter for the standalone run, e.g. MutexTest or
#                          'LeaderLatchTest#failover*'
#   CURATOR_RUNS           which runs: "standalone cluster" (default), "standalone" or "cluster"
#   CURATOR_CLUSTER_TESTS  ClusterFailoverTest methods for the cluster run (default: all)
#   ZK_JVM_OPTS, ZK_HEAP   passed on to scripts/zookeeper/run.sh (ZK_HEAP defaults to 512m here)
#
# Build output and reports: .cache/curator/target; reports/standalone and reports/cluster-METHOD
# hold surefire's XML and *-output.txt (client logs) per test class; the cluster servers' logs
# stay in .cache/curator/cluster-logs/METHOD/server-N.log. The standalone server's log is printed
# on failure.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../../.." && pwd)"
CACHE="${WARDEN_CACHE:-$REPO/.cache}"
M2="$CACHE/curator/m2"
BUILD="$CACHE/curator/target"
REPORTS="$BUILD/surefire-reports"
ALL_REPORTS="$BUILD/reports"
CLUSTER_LOGS="$CACHE/curator/cluster-logs"
RUNS="${CURATOR_RUNS:-standalone cluster}"
CLUSTER_TESTS="${CURATOR_CLUSTER_TESTS:-leaderLatchKeepsOneLeaderWhenTheLeaderServerIsKilled lockHeldAcrossTheLeaderServerKill}"
TEST_TIMEOUT="${CURATOR_TEST_TIMEOUT:-600}"
# Must match ContainerTest.CHECK_INTERVAL_MS.
CONTAINER_CHECK_MS=1000

# shellcheck source=../server.sh
source "$REPO/scripts/compat/server.sh"

PASSED=0
FAILED=0
SKIPPED=0
COUNTED=0
WORK=""
SERVER_LOG=""
STARTED_AT=$SECONDS

CLUSTER_PIDS=()
CLUSTER_CFGS=()
# Is PID still the server started on CFG? (A test may have killed it, and its PID be reused.)
runs_cfg() { tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline" | grep -qF -- "$2"; }
cluster_stop() {   # SIGTERM to every server still running, SIGKILL after 10 s; by PID
  local i pid
  for i in "${!CLUSTER_PIDS[@]}"; do
    pid="${CLUSTER_PIDS[i]}"
    runs_cfg "$pid" "${CLUSTER_CFGS[i]}" && kill "$pid" 2>/dev/null || true
  done
  for i in "${!CLUSTER_PIDS[@]}"; do
    pid="${CLUSTER_PIDS[i]}"
    for _ in $(seq 1 100); do runs_cfg "$pid" "${CLUSTER_CFGS[i]}" || break; sleep 0.1; done
    runs_cfg "$pid" "${CLUSTER_CFGS[i]}" && kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  CLUSTER_PIDS=()
  CLUSTER_CFGS=()
}
finish() {
  local rc=$?
  compat_stop >/dev/null 2>&1 || true
  cluster_stop
  if [[ "$COUNTED" != 1 ]]; then
    # Stopped before the tests could be counted (install, server start, or a build error).
    FAILED=$((FAILED > 0 ? FAILED : 1))
    [[ $rc -ne 0 ]] || rc=1
  fi
  if [[ $rc -ne 0 && -n "$SERVER_LOG" && -s "$SERVER_LOG" ]]; then
    echo "--- last lines of the server log ($COMPAT_SERVER) ---" >&2
    tail -n 40 "$SERVER_LOG" >&2 || true
  fi
  [[ -z "$WORK" ]] || rm -rf "$WORK"
  echo "took $((SECONDS - STARTED_AT)) s (server: $COMPAT_SERVER)"
  echo "compat curator: $PASSED passed, $FAILED failed, $SKIPPED skipped"
  exit "$rc"
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# shellcheck source=../maven.sh
source "$REPO/scripts/compat/maven.sh"

# 1. Install.
maven_install

source "$REPO/scripts/lib/ports.sh"
# ZooKeeper reads the container check interval only as a JVM system property.
export ZK_JVM_OPTS="${ZK_JVM_OPTS:-} -Dznode.container.checkIntervalMs=$CONTAINER_CHECK_MS"
export ZK_HEAP="${ZK_HEAP:-512m}"
# zoo.cfg lines both runs share.
common_cfg() {
  cat <<CFG
tickTime=1000
clientPortAddress=127.0.0.1
minSessionTimeout=2000
maxSessionTimeout=60000
4lw.commands.whitelist=ruok,srvr,stat,mntr,conf,cons,envi
znode.container.checkIntervalMs=$CONTAINER_CHECK_MS
CFG
}

WORK="$(mktemp -d "${TMPDIR:-/tmp}/curator-compat.XXXXXX")"
rm -rf "$ALL_REPORTS"
mkdir -p "$ALL_REPORTS"
mvn_failed=0

# run_mvn NAME ARGS...: `mvn test` with a hard timeout; its reports go to $ALL_REPORTS/NAME.
run_mvn() {
  local name="$1" rc=0
  shift
  rm -rf "$REPORTS"
  timeout --kill-after=30 "$TEST_TIMEOUT" "${MVN[@]}" test "$@" 2>&1 | strip_ansi || rc=$?
  if [[ -d "$REPORTS" ]]; then
    mv "$REPORTS" "$ALL_REPORTS/$name"
  fi
  if [[ $rc -eq 124 || $rc -eq 137 ]]; then
    echo "run.sh: mvn test ($name) hit the ${TEST_TIMEOUT} s timeout; unfinished test classes have no report" >&2
  fi
  if [[ $rc -ne 0 ]]; then
    mvn_failed=1
    if [[ ! -d "$ALL_REPORTS/$name" ]] || ! grep -qE '(failures|errors)="[1-9]' "$ALL_REPORTS/$name"/TEST-*.xml 2>/dev/null; then
      echo "run.sh: mvn test ($name) exited with $rc without a failing test in its reports: counted as 1 failure" >&2
      BROKEN=$((BROKEN + 1))
    fi
  fi
}
BROKEN=0

# --- 2. The standalone run ----------------------------------------------------------------------
if [[ "$RUNS" == *standalone* ]]; then
  SERVER_LOG="$WORK/server.log"
  PORT="${CURATOR_PORT:-}"
  [[ -n "$PORT" ]] || take_port PORT
  mkdir -p "$WORK/data"
  { common_cfg; echo "dataDir=$WORK/data"; echo "clientPort=$PORT"; } >"$WORK/zoo.cfg"
  echo "== starting $COMPAT_SERVER on 127.0.0.1:$PORT"
  compat_start "$WORK/zoo.cfg" "$SERVER_LOG"
  echo "== mvn test, standalone (hard timeout ${TEST_TIMEOUT} s)"
  test_args=("-Dcompat.connect=127.0.0.1:$PORT" -DexcludedGroups=cluster)
  [[ -z "${CURATOR_TEST:-}" ]] || test_args+=("-Dtest=$CURATOR_TEST")
  run_mvn standalone "${test_args[@]}"
  compat_stop
fi

# --- 3. The cluster run ---------------------------------------------------------------------------
# cluster_start DIR: 3 servers, each with its zoo.cfg (the same server.N lines) and myid under
# DIR/N; sets CLUSTER_PIDS, CLUSTER_SPEC (id=pid@host:port,...) and CLUSTER_CONNECT; waits (60 s
# at most) until every server answers `srvr` with a Mode, i.e. the ensemble has a leader.
cluster_start() {
  local dir="$1" i ports=() quorum=() election=() servers="" cmd
  for i in 1 2 3; do
    take_port "ports[$i]"; take_port "quorum[$i]"; take_port "election[$i]"
    servers+="server.$i=127.0.0.1:${quorum[i]}:${election[i]}"$'\n'
  done
  CLUSTER_PIDS=() CLUSTER_CFGS=() CLUSTER_SPEC="" CLUSTER_CONNECT=""
  for i in 1 2 3; do
    mkdir -p "$dir/$i/data"
    echo "$i" >"$dir/$i/data/myid"
    { common_cfg; echo "initLimit=10"; echo "syncLimit=5"; echo "dataDir=$dir/$i/data"
      echo "clientPort=${ports[i]}"; printf '%s' "$servers"; } >"$dir/$i/zoo.cfg"
    read -r -a cmd <<<"$(compat_server_command "$dir/$i/zoo.cfg")"
    "${cmd[@]}" >"$dir/server-$i.log" 2>&1 &
    CLUSTER_PIDS[i]=$!
    CLUSTER_CFGS[i]="$dir/$i/zoo.cfg"
    CLUSTER_SPEC+="${CLUSTER_SPEC:+,}$i=${CLUSTER_PIDS[i]}@127.0.0.1:${ports[i]}"
    CLUSTER_CONNECT+="${CLUSTER_CONNECT:+,}127.0.0.1:${ports[i]}"
  done
  local deadline=$((SECONDS + 60)) serving
  while :; do
    serving=0
    for i in 1 2 3; do
      kill -0 "${CLUSTER_PIDS[i]}" 2>/dev/null || { echo "run.sh: server $i exited; its log:" >&2; tail -n 30 "$dir/server-$i.log" >&2; return 1; }
      if FLW_TIMEOUT=2 "$REPO/scripts/zookeeper/4lw.sh" srvr "${ports[i]}" 127.0.0.1 2>/dev/null | grep -q '^Mode: '; then
        serving=$((serving + 1))
      fi
    done
    ((serving < 3)) || return 0
    ((SECONDS < deadline)) || { echo "run.sh: the ensemble in $dir did not serve within 60 s" >&2; return 1; }
    sleep 0.2
  done
}

if [[ "$RUNS" == *cluster* ]]; then
  rm -rf "$CLUSTER_LOGS"
  for method in $CLUSTER_TESTS; do
    echo "== mvn test, ClusterFailoverTest#$method against a 3-server $COMPAT_SERVER ensemble"
    mkdir -p "$CLUSTER_LOGS/$method"
    if cluster_start "$CLUSTER_LOGS/$method"; then
      run_mvn "cluster-$method" "-Dcompat.connect=$CLUSTER_CONNECT" "-Dcompat.cluster=$CLUSTER_SPEC" \
        -Dgroups=cluster "-Dtest=ClusterFailoverTest#$method"
    else
      BROKEN=$((BROKEN + 1))
    fi
    cluster_stop
  done
fi

# --- 4. Count (surefire's XML reports: one <testsuite tests= failures= errors= skipped=> per class).
sum_attr() {
  local total=0 f v
  for f in "$ALL_REPORTS"/*/TEST-*.xml; do
    [[ -e "$f" ]] || continue
    v="$(grep -m1 -o '<testsuite [^>]*' "$f" | grep -o " $1=\"[0-9]*\"" | head -n1 | tr -dc 0-9)"
    total=$((total + ${v:-0}))
  done
  echo "$total"
}
tests="$(sum_attr tests)"
failures="$(sum_attr failures)"
errors="$(sum_attr errors)"
SKIPPED="$(sum_attr skipped)"
FAILED=$((failures + errors))
PASSED=$((tests - FAILED - SKIPPED))
FAILED=$((FAILED + BROKEN))
COUNTED=1

if [[ $FAILED -gt 0 ]]; then
  echo "failed tests (reports in $ALL_REPORTS; cluster servers' logs in $CLUSTER_LOGS):"
  for f in "$ALL_REPORTS"/*/TEST-*.xml; do
    [[ -e "$f" ]] || continue
    # testcase lines followed by a <failure or <error element: print class#name and the message.
    awk -v run="$(basename "$(dirname "$f")")" '
      /<testcase / { match($0, /name="[^"]*"/); name = substr($0, RSTART + 6, RLENGTH - 7);
                     match($0, /classname="[^"]*"/); cls = substr($0, RSTART + 11, RLENGTH - 12) }
      /<(failure|error)[ >]/ { msg = ""; if (match($0, /message="[^"]*"/)) msg = substr($0, RSTART + 9, RLENGTH - 10);
                               printf "  [%s] %s#%s: %s\n", run, cls, name, substr(msg, 1, 400) }
    ' "$f"
  done
fi
if [[ $mvn_failed -ne 0 || $FAILED -gt 0 || $PASSED -eq 0 ]]; then
  exit 1
fi
exit 0
