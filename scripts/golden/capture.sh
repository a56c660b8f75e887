#!/usr/bin/env bash
# Capture golden vectors: the exact bytes exchanged between a real Apache ZooKeeper 3.9.5 server
# and real clients (ZooKeeper Java client 3.9.5, go-zookeeper v1.0.4, kazoo 2.11.0), recorded by
# scripts/golden/capture_proxy.py, written to crates/proto/tests/golden/*.txt.
#
#   scripts/golden/capture.sh [java|go|kazoo ...]        (default: all three)
#
# Environment:
#   WARDEN_CACHE  cache dir for ZooKeeper, compiled drivers and the kazoo venv (default <repo>/.cache)
#   GOLDEN_OUT    output dir (default <repo>/crates/proto/tests/golden)
#   ZK_HEAP       ZooKeeper heap (default here 512m)
#   KEEP_WORK=1   keep the temp dir (server log, data dir, proxy log) for inspection
#
# Everything listens on 127.0.0.1 only, on free ports. Every process started here is stopped by
# PID on exit. Files are only copied into GOLDEN_OUT when every driver succeeded.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
CACHE="${WARDEN_CACHE:-$REPO/.cache}"
OUT="${GOLDEN_OUT:-$REPO/crates/proto/tests/golden}"
DRIVERS=("$@")
[[ ${#DRIVERS[@]} -gt 0 ]] || DRIVERS=(java go kazoo)

log() { printf 'capture.sh: %s\n' "$*" >&2; }

WORK="$(mktemp -d /tmp/warden-golden.XXXXXX)"
PIDS=()
cleanup() {
  local rc=$?
  for pid in "${PIDS[@]}"; do
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
    fi
  done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
  if [[ "${KEEP_WORK:-0}" == 1 || $rc -ne 0 ]]; then
    log "work dir kept: $WORK"
  else
    rm -rf "$WORK"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

source "$REPO/scripts/lib/ports.sh"

wait_for() { # <seconds> <description> <command...>
  local secs=$1 what=$2; shift 2
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if (( SECONDS >= deadline )); then log "timed out waiting for $what"; return 1; fi
    sleep 0.2
  done
}

# ---------------------------------------------------------------- ZooKeeper
ZK_HOME="$("$REPO/scripts/zookeeper/install.sh")"
ZK_PORT="$(free_port)"
mkdir -p "$WORK/data" "$WORK/out"
cat > "$WORK/zoo.cfg" <<EOF
tickTime=2000
initLimit=10
syncLimit=5
dataDir=$WORK/data
clientPort=$ZK_PORT
clientPortAddress=127.0.0.1
4lw.commands.whitelist=*
admin.enableServer=false
maxClientCnxns=0
EOF
log "starting ZooKeeper 3.9.5 on 127.0.0.1:$ZK_PORT"
ZK_HEAP="${ZK_HEAP:-512m}" ZK_JVM_OPTS="-Dzookeeper.extendedTypesEnabled=true" \
  "$REPO/scripts/zookeeper/run.sh" "$WORK/zoo.cfg" > "$WORK/zookeeper.log" 2>&1 &
PIDS+=($!)
ruok() { [[ "$("$REPO/scripts/zookeeper/4lw.sh" ruok "$ZK_PORT")" == imok ]]; }
serving() { "$REPO/scripts/zookeeper/4lw.sh" srvr "$ZK_PORT" | grep -q '^Mode: standalone'; }
wait_for 90 "ZooKeeper to answer ruok" ruok
wait_for 60 "ZooKeeper to serve requests" serving
"$REPO/scripts/zookeeper/4lw.sh" srvr "$ZK_PORT" | head -1 >&2

# ---------------------------------------------------------------- proxy
python3 "$HERE/capture_proxy.py" \
  --upstream "127.0.0.1:$ZK_PORT" --out-dir "$WORK/out" --port-file "$WORK/ports" \
  --header "golden vector: bytes between a real ZooKeeper server and a real client, recorded by scripts/golden/capture_proxy.py" \
  --header "format: 'C <hex>' client->server frame, 'S <hex>' server->client frame, payload without the 4-byte length;" \
  --header "        frames in the order they crossed the proxy; '# reconnect' starts a new TCP connection (next C is a ConnectRequest)" \
  --header "server: Apache ZooKeeper 3.9.5 standalone (ZooKeeperServerMain), tickTime=2000, -Dzookeeper.extendedTypesEnabled=true" \
  --header "reproduce: scripts/golden/capture.sh (see docs/golden-vectors.md)" \
  > "$WORK/proxy.log" 2>&1 &
PIDS+=($!)
wait_for 20 "proxy port file" test -s "$WORK/ports"
read -r PROXY_PORT CONTROL_PORT < "$WORK/ports"
log "proxy on 127.0.0.1:$PROXY_PORT, control 127.0.0.1:$CONTROL_PORT"

ctl() { # send one control command to the proxy
  python3 - "$CONTROL_PORT" "$*" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30)
s.sendall((sys.argv[2] + "\n").encode())
f = s.makefile()
line = f.readline().strip()
print(line)
sys.exit(0 if line.startswith("OK") else 1)
PY
}

# ---------------------------------------------------------------- drivers
run_java() {
  local classes="$CACHE/golden/java-classes"
  local src="$HERE/java/GoldenDriver.java"
  if [[ ! -f "$classes/GoldenDriver.class" || "$src" -nt "$classes/GoldenDriver.class" ]]; then
    log "compiling the Java driver"
    rm -rf "$classes"; mkdir -p "$classes"
    timeout 300 javac -nowarn -d "$classes" -cp "$ZK_HOME/lib/*" "$src"
  fi
  log "running the Java driver"
  timeout 600 java -Xmx256m \
    -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -Dorg.slf4j.simpleLogger.logFile=System.err \
    -Dzookeeper.sasl.client=false \
    -cp "$ZK_HOME/lib/*:$classes" GoldenDriver \
    "127.0.0.1:$PROXY_PORT" "127.0.0.1:$ZK_PORT" "$CONTROL_PORT" ${JAVA_SCENARIOS:-} \
    > "$WORK/java-driver.log" 2> "$WORK/java-driver.err" || {
      log "Java driver failed; see $WORK/java-driver.log and .err"; tail -30 "$WORK/java-driver.err" >&2; return 1; }
}

run_go() {
  local bin="$CACHE/golden/go-driver"
  log "building the Go driver (go-zookeeper v1.0.4)"
  mkdir -p "$CACHE/golden"
  ( cd "$HERE/go" && GOFLAGS=-mod=readonly timeout 600 go build -o "$bin" . )
  log "running the Go driver"
  timeout 300 "$bin" -proxy "127.0.0.1:$PROXY_PORT" -direct "127.0.0.1:$ZK_PORT" -control "$CONTROL_PORT" \
    > "$WORK/go-driver.log" 2>&1 || {
      log "Go driver failed; see $WORK/go-driver.log"; tail -30 "$WORK/go-driver.log" >&2; return 1; }
}

run_kazoo() {
  local venv="$CACHE/venv-kazoo"
  if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c 'import kazoo, sys; from importlib.metadata import version; sys.exit(version("kazoo") != "2.11.0")' 2>/dev/null; then
    log "creating the kazoo venv"
    rm -rf "$venv"
    python3 -m venv "$venv"
    timeout 600 "$venv/bin/pip" install -q "kazoo==2.11.0" >&2
  fi
  log "running the kazoo driver"
  timeout 300 "$venv/bin/python" "$HERE/kazoo_driver.py" \
    --proxy "127.0.0.1:$PROXY_PORT" --direct "127.0.0.1:$ZK_PORT" --control "$CONTROL_PORT" \
    > "$WORK/kazoo-driver.log" 2>&1 || {
      log "kazoo driver failed; see $WORK/kazoo-driver.log"; tail -30 "$WORK/kazoo-driver.log" >&2; return 1; }
}

for d in "${DRIVERS[@]}"; do
  case "$d" in
    java) run_java ;;
    go) run_go ;;
    kazoo) run_kazoo ;;
    *) log "unknown driver $d"; exit 2 ;;
  esac
done

ctl QUIT >/dev/null || true
sleep 0.3

# ---------------------------------------------------------------- sanity check and copy
python3 "$HERE/zkdecode.py" --check "$WORK/out"/*.txt
mkdir -p "$OUT"
cp "$WORK/out"/*.txt "$OUT/"
log "wrote: $(cd "$WORK/out" && ls *.txt | tr '\n' ' ')"
log "into $OUT"
