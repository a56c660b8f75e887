#!/usr/bin/env bash
# Apache Curator 5.x recipes (JUnit 5, see README.md) against the server under test.
#
#   scripts/compat/curator/run.sh                          # Warden (target/release/warden)
#   COMPAT_SERVER=zookeeper scripts/compat/curator/run.sh  # reference: Apache ZooKeeper 3.9.5
#
# Installs the Maven dependencies (Maven Central) into .cache/curator/m2, writes a zoo.cfg in a
# temporary directory, starts the server through scripts/compat/server.sh, runs `mvn test` with
# a hard timeout, stops the server. Exit status 0 iff every test passed. The last line of output
# is always `compat curator: N passed, M failed, K skipped` (from the surefire XML reports; a run
# that breaks down without reports, e.g. a timeout or a build error, counts as 1 failure).
#
# Environment:
#   COMPAT_SERVER          warden (default) | zookeeper          (see scripts/compat/server.sh)
#   WARDEN_BIN             Warden binary (default target/release/warden)
#   WARDEN_CACHE           cache dir (default <repo>/.cache)
#   CURATOR_PORT           client port (default: a free random port)
#   CURATOR_TEST_TIMEOUT   hard limit on `mvn test`, seconds (default 600)
#   CURATOR_TEST           surefire -Dtest filter, e.g. MutexTest or 'LeaderLatchTest#failover*'
#   ZK_JVM_OPTS, ZK_HEAP   passed on to scripts/zookeeper/run.sh (ZK_HEAP defaults to 512m here)
#
# Build output and reports: .cache/curator/target (surefire-reports/ holds one XML and one
# *-output.txt with the client logs per test class). The server's log is printed on failure.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../../.." && pwd)"
CACHE="${WARDEN_CACHE:-$REPO/.cache}"
M2="$CACHE/curator/m2"
BUILD="$CACHE/curator/target"
REPORTS="$BUILD/surefire-reports"
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

finish() {
  local rc=$?
  compat_stop >/dev/null 2>&1 || true
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

command -v mvn >/dev/null || { echo "run.sh: mvn not found (Maven 3.8+ and Java 17 are needed)" >&2; exit 1; }
command -v java >/dev/null || { echo "run.sh: java not found (Java 17 is needed)" >&2; exit 1; }

MVN=(mvn -B -q -Dstyle.color=never "-Dmaven.repo.local=$M2" "-Dcompat.buildDirectory=$BUILD" -f "$HERE/pom.xml")
# Maven 3.8 prints stray ANSI resets even in batch mode; drop them (pipefail keeps mvn's status).
strip_ansi() { sed -u 's/\x1b\[[0-9;]*m//g'; }

# 1. Install: compile and resolve everything `mvn test` needs, including surefire's JUnit
#    platform provider, by running the test phase with no test selected.
echo "== installing Maven dependencies into $M2"
mkdir -p "$M2"
timeout --kill-after=30 "${CURATOR_INSTALL_TIMEOUT:-1200}" "${MVN[@]}" test-compile \
  org.apache.maven.plugins:maven-surefire-plugin:3.5.2:test \
  -Dtest=NoSuchTest -Dsurefire.failIfNoSpecifiedTests=false 2>&1 | strip_ansi

# 2. A zoo.cfg for the server under test.
WORK="$(mktemp -d "${TMPDIR:-/tmp}/curator-compat.XXXXXX")"
SERVER_LOG="$WORK/server.log"
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
PORT="${CURATOR_PORT:-}"
if [[ -z "$PORT" ]]; then
  for _ in $(seq 1 50); do
    candidate=$((20000 + RANDOM % 30000))
    if port_free "$candidate"; then PORT=$candidate; break; fi
  done
  [[ -n "$PORT" ]] || { echo "run.sh: no free port found" >&2; exit 1; }
fi
mkdir -p "$WORK/data"
cat >"$WORK/zoo.cfg" <<CFG
tickTime=1000
dataDir=$WORK/data
clientPort=$PORT
clientPortAddress=127.0.0.1
minSessionTimeout=2000
maxSessionTimeout=60000
4lw.commands.whitelist=ruok,srvr,stat,mntr,conf,cons,envi
znode.container.checkIntervalMs=$CONTAINER_CHECK_MS
CFG
# ZooKeeper reads the container check interval only as a JVM system property.
export ZK_JVM_OPTS="${ZK_JVM_OPTS:-} -Dznode.container.checkIntervalMs=$CONTAINER_CHECK_MS"
export ZK_HEAP="${ZK_HEAP:-512m}"

# 3. Server.
echo "== starting $COMPAT_SERVER on 127.0.0.1:$PORT"
compat_start "$WORK/zoo.cfg" "$SERVER_LOG"

# 4. Tests.
echo "== mvn test (hard timeout ${TEST_TIMEOUT} s)"
rm -rf "$REPORTS"
test_args=("-Dcompat.connect=127.0.0.1:$PORT")
[[ -z "${CURATOR_TEST:-}" ]] || test_args+=("-Dtest=$CURATOR_TEST")
mvn_rc=0
timeout --kill-after=30 "$TEST_TIMEOUT" "${MVN[@]}" test "${test_args[@]}" 2>&1 | strip_ansi || mvn_rc=$?

# 5. Count (surefire's XML reports: one <testsuite tests= failures= errors= skipped=> per class).
sum_attr() {
  local total=0 f v
  for f in "$REPORTS"/TEST-*.xml; do
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
COUNTED=1

if [[ $mvn_rc -eq 124 || $mvn_rc -eq 137 ]]; then
  echo "run.sh: mvn test hit the ${TEST_TIMEOUT} s timeout; unfinished test classes have no report" >&2
fi
if [[ $mvn_rc -ne 0 && $FAILED -eq 0 ]]; then
  echo "run.sh: mvn test exited with $mvn_rc without a failing test in the reports: counted as 1 failure" >&2
  FAILED=1
fi
if [[ $FAILED -gt 0 ]]; then
  echo "failed tests (reports in $REPORTS):"
  for f in "$REPORTS"/TEST-*.xml; do
    [[ -e "$f" ]] || continue
    # testcase lines followed by a <failure or <error element: print class#name and the message.
    awk '
      /<testcase / { match($0, /name="[^"]*"/); name = substr($0, RSTART + 6, RLENGTH - 7);
                     match($0, /classname="[^"]*"/); cls = substr($0, RSTART + 11, RLENGTH - 12) }
      /<(failure|error)[ >]/ { msg = ""; if (match($0, /message="[^"]*"/)) msg = substr($0, RSTART + 9, RLENGTH - 10);
                               printf "  %s#%s: %s\n", cls, name, substr(msg, 1, 400) }
    ' "$f"
  done
fi
if [[ $mvn_rc -ne 0 || $FAILED -gt 0 || $PASSED -eq 0 ]]; then
  exit 1
fi
exit 0
