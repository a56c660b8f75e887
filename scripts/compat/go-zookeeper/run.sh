#!/usr/bin/env bash
# Run go-zookeeper's own test suite (github.com/go-zookeeper/zk v1.0.4) against the server under
# test.
#
#   scripts/compat/go-zookeeper/run.sh [extra test flags, e.g. -test.run 'TestIntegration_Multi$']
#
# COMPAT_SERVER=warden (default) or zookeeper, as in scripts/compat/server.sh; WARDEN_BIN as
# there. The suite starts its own servers through bin/zkServer.sh in this directory (see there):
# standalone servers and, for 7 tests, 3-server ensembles (server.N lines + myid). Every test
# runs against both servers. Tests known to fail against Warden (features not there yet) are
# listed with their reason in known-failures-warden.txt: they still run and count as failed,
# but only a failure not in that list makes the exit status non-zero.
#
# Installs into <repo>/.cache/go-zookeeper (module source from the Go module proxy, checked
# against a pinned hash; GOMODCACHE, GOCACHE, GOPATH and TMPDIR all under it), builds the test
# binary, runs it with a hard timeout, kills every server it left running, and prints as its
# last line `compat go-zookeeper: N passed, M failed, K skipped` (top-level tests; K includes
# the tests left out with -skip, unless extra test flags were given). Exits 0 iff every failed
# test is a known failure of the server under test (none for zookeeper).
# Logs of the last run: .cache/go-zookeeper/last-run/ (test.out = verbose test output with the
# servers' stderr, test.json = the same through test2json, stderr.txt = the client library's
# log and the servers' stdout). One run at a time: a second run would reuse that directory.
set -euo pipefail

MODULE=github.com/go-zookeeper/zk
VERSION=v1.0.4
# go.sum hash of the module zip, as on sum.golang.org.
MODULE_SUM="h1:DPzxraQx7OrPyXq2phlGlNSIyWEsAox0RJmjTseMV6I="
ZK_REFERENCE_VERSION=3.9.5
# Hard limits: the test binary's own -test.timeout (panics with a stack dump), and a kill
# shortly after that in case it hangs anyway.
TEST_TIMEOUT="${GOZK_TEST_TIMEOUT:-13m}"
KILL_AFTER="${GOZK_KILL_AFTER:-14m}"

# Tests left out for both servers (-skip), each with the reason neither can pass it. None today:
# the 7 multi-server tests run against 3-server ensembles of either server.
EXCLUDED_TESTS=()

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../../.." && pwd)"
CACHE="$REPO/.cache/go-zookeeper"
SRC="$CACHE/src/zk@$VERSION"
RUN_DIR="$CACHE/last-run"

COMPAT_SERVER="${COMPAT_SERVER:-warden}"
export COMPAT_SERVER

command -v go >/dev/null || { echo "run.sh: go not found" >&2; exit 1; }

export GOMODCACHE="$CACHE/gomodcache"
export GOCACHE="$CACHE/gocache"
export GOPATH="$CACHE/gopath"
export GOFLAGS="-buildvcs=false"
export GOTOOLCHAIN=local
export GOSUMDB=off            # the hash is checked against MODULE_SUM below instead
export GOWORK=off
export CGO_ENABLED=0
mkdir -p "$CACHE"

# --- install ------------------------------------------------------------------------------
# The module as downloaded (read-only, in GOMODCACHE); `go mod download` is a no-op once it is
# there. Its hash is checked every run.
info="$(cd "$CACHE" && go mod download -json "$MODULE@$VERSION")"
dir="$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"$info")"
sum="$(sed -n 's/^[[:space:]]*"Sum": "\(.*\)",\{0,1\}$/\1/p' <<<"$info")"
if [[ "$sum" != "$MODULE_SUM" ]]; then
  echo "run.sh: $MODULE@$VERSION has hash '$sum', expected $MODULE_SUM" >&2
  exit 1
fi
[[ -f "$dir/go.mod" ]] || { echo "run.sh: go mod download gave no module dir: $info" >&2; exit 1; }

# A writable copy, made afresh each run, with one change to the test harness (see
# compat_srvr_test.go): waitForStart checks `srvr` with a regexp that also takes the build date
# format of ZooKeeper >= 3.7.
rm -rf "$SRC"
mkdir -p "$(dirname "$SRC")"
cp -R "$dir" "$SRC"
chmod -R u+w "$SRC"
harness="$SRC/server_help_test.go"
needle='_, ok := FLWSrvr(serverAddrs, time.Second)'
if [[ "$(grep -cF "$needle" "$harness")" != 1 ]]; then
  echo "run.sh: $harness does not call FLWSrvr as expected; cannot patch waitForStart" >&2
  exit 1
fi
sed -i 's/_, ok := FLWSrvr(serverAddrs, time.Second)/ok := compatSrvrOK(serverAddrs, time.Second)/' "$harness"
cp "$HERE/compat_srvr_test.go" "$HERE/compat_tls_test.go" "$SRC/"

if [[ "$COMPAT_SERVER" == zookeeper ]]; then
  "$REPO/scripts/zookeeper/install.sh" >/dev/null
elif [[ "$COMPAT_SERVER" == warden ]]; then
  # shellcheck source=../server.sh
  source "$REPO/scripts/compat/server.sh"
  WARDEN_BIN="$(compat_warden_bin)"
  export WARDEN_BIN
else
  echo "run.sh: COMPAT_SERVER must be warden or zookeeper, not '$COMPAT_SERVER'" >&2
  exit 2
fi

rm -rf "$RUN_DIR"
mkdir -p "$RUN_DIR/tmp" "$RUN_DIR/pids"
(cd "$SRC" && go test -c -vet=off -o "$RUN_DIR/zk.test" .)

# --- run ------------------------------------------------------------------------------------
TEST_PID=""
cleanup() {
  local pid
  if [[ -n "$TEST_PID" ]] && kill -0 "$TEST_PID" 2>/dev/null; then
    # `timeout` passes SIGTERM on to the test binary.
    kill -TERM "$TEST_PID" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$TEST_PID" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$TEST_PID" 2>/dev/null || true
  fi
  # Servers started by the harness (zkServer.sh records its PID, which becomes the server's).
  for f in "$RUN_DIR"/pids/*; do
    [[ -f "$f" ]] || continue
    pid="$(basename "$f")"
    # Only if that PID still runs a server on the config it recorded (PIDs get reused).
    if kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$(cat "$f")"; then
      echo "run.sh: killing server $pid left running ($(cat "$f"))" >&2
      kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$f"
  done
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

skip_args=()
excluded=("${EXCLUDED_TESTS[@]}")
if ((${#excluded[@]} > 0)); then
  skip_args=(-test.skip "^($(IFS='|'; echo "${excluded[*]}"))\$")
fi
# Known failures of the server under test: "TestName  reason" lines (# comments).
KNOWN_FILE="$HERE/known-failures-$COMPAT_SERVER.txt"
declare -A known=()
if [[ -f "$KNOWN_FILE" ]]; then
  while read -r name reason; do
    [[ -z "$name" || "$name" == \#* ]] && continue
    known[$name]="$reason"
  done <"$KNOWN_FILE"
fi

export ZOOKEEPER_BIN_PATH="$HERE/bin"
export GOZK_PID_DIR="$RUN_DIR/pids"
# requireMinimumZkVersion skips the reconfig tests unless ZK_VERSION is set.
export ZK_VERSION="${ZK_VERSION:-$ZK_REFERENCE_VERSION}"
export TMPDIR="$RUN_DIR/tmp"

echo "run.sh: running $MODULE@$VERSION tests against COMPAT_SERVER=$COMPAT_SERVER" \
  "(timeout $TEST_TIMEOUT; output in $RUN_DIR)" >&2
start=$SECONDS
set +e
# The test binary is run directly (not via `go test`), so the only process between it and us
# is `timeout`, the backstop if -test.timeout does not end it (--foreground: it signals the test
# binary alone, not a process group; the servers are killed by PID in cleanup).
(cd "$SRC" && exec timeout --foreground -s KILL "$KILL_AFTER" "$RUN_DIR/zk.test" \
  -test.v=test2json -test.count=1 -test.timeout "$TEST_TIMEOUT" "${skip_args[@]}" "$@" \
  >"$RUN_DIR/test.out" 2>"$RUN_DIR/stderr.txt") &
TEST_PID=$!
wait "$TEST_PID"
rc=$?
set -e
TEST_PID=""
elapsed=$((SECONDS - start))
cleanup   # now, so that nothing is printed after the summary line

go tool test2json -t -p "$MODULE" <"$RUN_DIR/test.out" >"$RUN_DIR/test.json" || true

# --- count (top-level tests) -----------------------------------------------------------------
# Each test2json line: {"Time":...,"Action":"pass","Package":...,"Test":"TestX",...}
awk '
  match($0, /"Action":"[a-z]+"/) {
    action = substr($0, RSTART + 10, RLENGTH - 11)
    if (!match($0, /"Test":"[^"]*"/)) next
    test = substr($0, RSTART + 8, RLENGTH - 9)
    if (index(test, "/")) next
    if (action == "run") { if (!(test in result)) { order[++n] = test; result[test] = "" } }
    else if (action == "pass" || action == "fail" || action == "skip") result[test] = action
  }
  END { for (i = 1; i <= n; i++) print (result[order[i]] == "" ? "fail" : result[order[i]]), order[i] }
' "$RUN_DIR/test.json" >"$RUN_DIR/results.txt"

# A test that never started because the binary died (a panic, the timeout) counts as failed;
# only when the whole suite was asked for (no extra test flags).
if (($# == 0)); then
  "$RUN_DIR/zk.test" -test.list '.*' | grep '^Test' >"$RUN_DIR/all-tests.txt" || true
  while read -r name; do
    [[ " ${excluded[*]} " == *" $name "* ]] && continue
    grep -qE "^[a-z]+ $name\$" "$RUN_DIR/results.txt" || echo "fail $name (did not run)" >>"$RUN_DIR/results.txt"
  done <"$RUN_DIR/all-tests.txt"
fi

passed=$(grep -c '^pass ' "$RUN_DIR/results.txt" || true)
failed=$(grep -c '^fail ' "$RUN_DIR/results.txt" || true)
skipped=$(grep -c '^skip ' "$RUN_DIR/results.txt" || true)

echo
if ((skipped > 0)); then
  echo "Skipped by the suite:"
  awk '$1 == "skip" { print "  " $2 }' "$RUN_DIR/results.txt"
fi
if ((${#excluded[@]} > 0 && $# == 0)); then
  echo "Left out (-test.skip; neither server can pass them, see README.md):"
  printf '  %s\n' "${excluded[@]}"
  skipped=$((skipped + ${#excluded[@]}))
fi
unknown_failed=0
if ((failed > 0)); then
  echo "Failed (with the first lines the test itself logged; all in $RUN_DIR/test.out):"
  while read -r _ name rest; do
    if [[ -n "${known[$name]+x}" ]]; then
      echo "  $name${rest:+ $rest} -- known failure: ${known[$name]}"
    else
      echo "  $name${rest:+ $rest} -- NEW failure (not in $(basename "$KNOWN_FILE"))"
      unknown_failed=$((unknown_failed + 1))
    fi
    # The test's own t.Log/t.Fatal lines (file_test.go:NN: ...), not the servers' [ZKERR] lines.
    awk -v t="$name" '
      index($0, "\"Action\":\"output\"") && (index($0, "\"Test\":\"" t "\"") || index($0, "\"Test\":\"" t "/")) {
        if (!match($0, /"Output":".*"}$/)) next
        out = substr($0, RSTART + 10, RLENGTH - 12)
        gsub(/\\t/, " ", out); gsub(/\\n/, "", out); gsub(/\\"/, "\"", out)
        if (out ~ /_test\.go:[0-9]+: / && out !~ /\[ZKERR\]/) { sub(/^ +/, "", out); print "      " substr(out, 1, 300); if (++k == 6) exit }
      }' "$RUN_DIR/test.json"
  done < <(grep '^fail ' "$RUN_DIR/results.txt")
fi
panic_line="$(cat "$RUN_DIR/stderr.txt" "$RUN_DIR/test.out" | grep -a -m1 '^panic: ' | cut -c1-300 || true)"
if [[ -n "$panic_line" ]]; then
  echo "The test binary died: $panic_line (stack in $RUN_DIR/stderr.txt)"
fi
if ((rc != 0 && failed == 0)); then
  echo "The test binary exited with status $rc without a failing test (see $RUN_DIR/test.out):"
  tail -n 20 "$RUN_DIR/test.out"
  failed=1
  unknown_failed=1
fi
for name in "${!known[@]}"; do
  if grep -qE "^pass $name\$" "$RUN_DIR/results.txt"; then
    echo "Known failure now passes (remove it from $(basename "$KNOWN_FILE")): $name"
  fi
done
echo "Test time: ${elapsed}s (exit status $rc); logs in $RUN_DIR"
echo "Failures not in $(basename "$KNOWN_FILE"): $unknown_failed"
echo "compat go-zookeeper: $passed passed, $failed failed, $skipped skipped"
((unknown_failed == 0))
