#!/usr/bin/env bash
# Apache Curator 5.7.1's own published test suites (the curator-recipes and curator-framework
# test-jars, unchanged) against real server processes: every TestingServer and every
# TestingCluster member a test makes is a real `warden server` (or, with COMPAT_SERVER=zookeeper,
# a real ZooKeeper 3.9.5) started from a zoo.cfg; see README.md.
#
#   scripts/compat/curator-suites/run.sh                       # the quick part (a few minutes)
#   CURATOR_SUITES=full scripts/compat/curator-suites/run.sh   # all 87 classes (about an hour)
#   COMPAT_SERVER=zookeeper scripts/compat/curator-suites/run.sh
#   CURATOR_SUITES_TEST='TestLeaderLatch#testWaiting' scripts/compat/curator-suites/run.sh
#
# Installs the Maven dependencies (Maven Central) into .cache/curator/m2 (shared with the
# `curator` suite), runs `mvn test` with a hard timeout, then stops any server a dead test JVM
# left behind (by PID, only while it still runs its zoo.cfg).
# Exit status 0 iff every failed test is listed in known-failures.txt (failures of the harness
# itself, on both servers) or known-failures-$COMPAT_SERVER.txt, and `mvn test` finished.
# The last line printed is always:
#   compat curator-suites: N passed, M failed, K skipped, X known failures, F flaky
# where M counts only failures not listed, X those listed, and F tests that failed and then
# passed when surefire ran them again (as Curator's own build does, 2 reruns).
#
# Environment:
#   COMPAT_SERVER            warden (default) | zookeeper     (scripts/compat/server.sh)
#   WARDEN_BIN               Warden binary (default target/release/warden, built if missing)
#   WARDEN_CACHE             cache dir (default <repo>/.cache)
#   CURATOR_SUITES           quick (default) | full
#   CURATOR_SUITES_TEST      surefire -Dtest filter instead of the quick or full selection
#   CURATOR_SUITES_TIMEOUT   hard limit on `mvn test`, seconds (default 900 quick, 7200 full)
#   CURATOR_SUITES_RERUN     reruns of a failing test (default 2, as Curator's build)
#   CURATOR_SUITES_JVM_ARGS  extra flags for the test JVMs, e.g.
#                            -Dorg.slf4j.simpleLogger.log.org.apache.curator.framework.recipes.leader=debug
#   CURATOR_SUITES_OUT       output directory (default .cache/curator-suites/$COMPAT_SERVER)
#   ZK_HEAP, ZK_LOG_LEVEL    for ZooKeeper servers (defaults 256m, warn)
#
# Output under .cache/curator-suites/SERVER/ (CURATOR_SUITES_OUT): reports/ (surefire XML and each class's client log,
# *-output.txt), run/servers/CLASS-DIR-ID/ (each server's zoo.cfg and log), run/pids, run/mvn.log.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../../.." && pwd)"
CACHE="${WARDEN_CACHE:-$REPO/.cache}"
M2="$CACHE/curator/m2"
OUT="${CURATOR_SUITES_OUT:-$CACHE/curator-suites/${COMPAT_SERVER:-warden}}"
BUILD="$OUT/target"
REPORTS="$OUT/reports"
RUN_DIR="$OUT/run"
MODE="${CURATOR_SUITES:-quick}"

# The quick part (about 5 minutes against Warden): leader election (TestLeaderLatch's basic,
# waiting, callback, watching and lost-connection tests; one class on a 3-server cluster whose
# servers are killed and restarted), locks, barriers, queues, caches, an atomic counter and the
# framework's basic builders.
QUICK="TestLeaderLatch#testWaiting+testBasic+testBasicAlt+testCallbackSanity+testCorrectWatching+testLostConnection,\
TestLeaderSelectorParticipants,TestLeaderLatchCluster,TestInterProcessMutex,\
TestDistributedBarrier,TestDistributedDoubleBarrier,\
TestSimpleDistributedQueue,TestDistributedIdQueue,TestDistributedPriorityQueue,\
TestCuratorCache,TestNodeCache,TestDistributedAtomicLong,\
TestCreate,TestDelete,TestSetData,TestExistsBuilder,TestTransactionsNew,TestNamespaceFacade,TestTtlNodes,TestEnsureContainers"

case "$MODE" in
  quick) SELECTION="$QUICK"; DEFAULT_TIMEOUT=900 ;;
  full) SELECTION=""; DEFAULT_TIMEOUT=7200 ;;
  *) echo "CURATOR_SUITES must be quick or full, not '$MODE'" >&2; exit 2 ;;
esac
[[ -z "${CURATOR_SUITES_TEST:-}" ]] || SELECTION="$CURATOR_SUITES_TEST"
TEST_TIMEOUT="${CURATOR_SUITES_TIMEOUT:-$DEFAULT_TIMEOUT}"

# shellcheck source=../server.sh
source "$REPO/scripts/compat/server.sh"
export COMPAT_SERVER WARDEN_CACHE="$CACHE"
export ZK_HEAP="${ZK_HEAP:-256m}" ZK_LOG_LEVEL="${ZK_LOG_LEVEL:-warn}"

PASSED=0 FAILED=0 SKIPPED=0 KNOWN=0 FLAKY=0 COUNTED=0
STARTED_AT=$SECONDS

# Servers a test JVM left running (it was killed by the timeout, or crashed): by PID, and only
# while that PID still runs the zoo.cfg it was started with.
stop_leftovers() {
  local pid cfg
  [[ -f "$RUN_DIR/pids" ]] || return 0
  while read -r pid cfg; do
    if tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF -- "$cfg"; then
      echo "run.sh: server pid $pid ($cfg) left running: SIGKILL" >&2
      kill -9 "$pid" 2>/dev/null || true
    fi
  done <"$RUN_DIR/pids"
}
finish() {
  local rc=$?
  stop_leftovers
  if [[ "$COUNTED" != 1 ]]; then
    FAILED=$((FAILED > 0 ? FAILED : 1))
    [[ $rc -ne 0 ]] || rc=1
  fi
  echo "took $((SECONDS - STARTED_AT)) s (server: $COMPAT_SERVER, $MODE)"
  echo "compat curator-suites: $PASSED passed, $FAILED failed, $SKIPPED skipped, $KNOWN known failures, $FLAKY flaky"
  exit "$rc"
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# shellcheck source=../maven.sh
source "$REPO/scripts/compat/maven.sh"

# 1. Install (as the curator suite), then the server under test itself (Warden built if
#    missing, ZooKeeper installed), so that no test pays for it.
maven_install
case "$COMPAT_SERVER" in
  warden) WARDEN_BIN="$(compat_warden_bin)"; export WARDEN_BIN ;;
  zookeeper) "$REPO/scripts/zookeeper/install.sh" >/dev/null ;;
  *) echo "COMPAT_SERVER must be warden or zookeeper, not '$COMPAT_SERVER'" >&2; exit 2 ;;
esac

# 2. The tests. Each test class in its own JVM; each of its TestingServers a fresh server process.
rm -rf "$RUN_DIR" "$REPORTS" "$BUILD/surefire-reports"
mkdir -p "$RUN_DIR/tmp" "$RUN_DIR/servers"
echo "== mvn test: Curator 5.7.1's suites ($MODE${CURATOR_SUITES_TEST:+, $CURATOR_SUITES_TEST}) against $COMPAT_SERVER, hard timeout ${TEST_TIMEOUT} s"
test_args=("-Dcompat.server=$COMPAT_SERVER" "-Dcompat.serverCommand=$HERE/server-exec.sh"
  "-Dcompat.runDir=$RUN_DIR" "-Dcompat.rerun=${CURATOR_SUITES_RERUN:-2}" -Dsurefire.failIfNoSpecifiedTests=false
  "-Dcompat.jvmArgs=${CURATOR_SUITES_JVM_ARGS:-}")
[[ -z "$SELECTION" ]] || test_args+=("-Dtest=$SELECTION")
mvn_rc=0
# Maven's own output (stack traces of every failed attempt) goes to run/mvn.log; shown on a breakdown.
timeout --kill-after=30 "$TEST_TIMEOUT" "${MVN[@]}" test "${test_args[@]}" >"$RUN_DIR/mvn.log" 2>&1 || mvn_rc=$?
stop_leftovers
[[ ! -d "$BUILD/surefire-reports" ]] || mv "$BUILD/surefire-reports" "$REPORTS"
mkdir -p "$REPORTS"
if [[ $mvn_rc -eq 124 || $mvn_rc -eq 137 ]]; then
  echo "run.sh: mvn test hit the ${TEST_TIMEOUT} s timeout; unfinished test classes have no report" >&2
fi

# 3. Count, per test case, from surefire's XML (a <failure> or <error> after the reruns is a
#    failure; <flakyFailure>/<flakyError> without one is a flake).
"$HERE/count.py" "$REPORTS" "$HERE/known-failures.txt" "$HERE/known-failures-$COMPAT_SERVER.txt" \
  >"$RUN_DIR/count.txt"
sed -n '/^#/p' "$RUN_DIR/count.txt" | sed 's/^# //'
read -r PASSED FAILED SKIPPED KNOWN FLAKY < <(grep -v '^#' "$RUN_DIR/count.txt" | tail -n 1)
COUNTED=1
if [[ $mvn_rc -ne 0 && $FAILED -eq 0 && $KNOWN -eq 0 ]]; then
  strip_ansi <"$RUN_DIR/mvn.log" | tail -n 30 >&2
  echo "run.sh: mvn test exited with $mvn_rc without a failing test in its reports: counted as 1 failure" >&2
  FAILED=1
fi
if [[ $mvn_rc -eq 124 || $mvn_rc -eq 137 ]]; then
  FAILED=$((FAILED + 1))
fi
# Something must have run; a run of listed failures only is fine.
[[ $FAILED -eq 0 && $((PASSED + KNOWN)) -gt 0 ]]
