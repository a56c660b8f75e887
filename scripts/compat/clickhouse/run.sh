#!/usr/bin/env bash
# Compatibility test: two real ClickHouse 18.16 servers (Debian 12's clickhouse-server package)
# replicate a ReplicatedMergeTree table, and run ON CLUSTER DDL, through the server under test:
# first through one standalone server, then through a 3-server ensemble (all three in
# ClickHouse's <zookeeper> section), whose leader is then killed with SIGKILL, by PID, in the
# middle of a series of INSERTs; every inserted row must be there afterwards.
#
#   scripts/compat/clickhouse/run.sh
#
# Environment:
#   COMPAT_SERVER     warden (default) | zookeeper   (see scripts/compat/server.sh)
#   WARDEN_BIN        the warden binary (default target/release/warden)
#   CH_MODES          which runs: "standalone ensemble" (default), "standalone" or "ensemble"
#   CH_TIMEOUT        hard limit for the whole run (both modes) in seconds (default 600)
#   CH_WAIT           how long each replication check polls, seconds (default 60)
#   CH_LOG_LEVEL      ClickHouse log level (default debug)
#   CH_KEEP=1         keep the temporary directory (configs, logs, data) and print its path
#   CH_CAPTURE=DIR    put scripts/golden/capture_proxy.py between ClickHouse and the server
#                     under test, record the frames into DIR and print which requests were sent
#   ZK_HEAP           heap of the reference ZooKeeper (default here 256m)
#
# Prints `ok - ...` / `not ok - ...` per check; the last line is always
# `compat clickhouse: N passed, M failed, 0 skipped`; exits 0 iff nothing failed.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../../.." && pwd)"

# --------------------------------------------------------------------------------------------
# Outer process: temp dir, hard timeout, summary line, last-resort cleanup.
# --------------------------------------------------------------------------------------------
if [[ "${1:-}" != "--inner" ]]; then
  LIMIT="${CH_TIMEOUT:-600}"
  CH_DIR="$(mktemp -d "${TMPDIR:-/tmp}/compat-clickhouse.XXXXXX")"
  export CH_DIR
  : >"$CH_DIR/pids"
  echo "0 0" >"$CH_DIR/counts"
  outer_cleanup() {
    # Anything the inner script could not stop (it was SIGKILLed, say): kill by PID.
    local pid
    while read -r pid; do
      if [[ -n "$pid" ]]; then kill -9 "$pid" 2>/dev/null || true; fi
    done <"$CH_DIR/pids"
    if [[ "${CH_KEEP:-0}" != 1 ]]; then rm -rf "$CH_DIR"; fi
  }
  trap outer_cleanup EXIT
  start=$SECONDS
  extra_failed=0
  for mode in ${CH_MODES:-standalone ensemble}; do
    rc=0
    left=$((LIMIT - (SECONDS - start)))
    if ((left <= 0)); then
      echo "not ok - [$mode] run started within the hard limit of ${LIMIT} s"
      extra_failed=$((extra_failed + 1))
      continue
    fi
    # timeout (without --foreground) signals its whole process group on expiry: the inner
    # script, the ClickHouse servers and the servers under test all get SIGTERM, then SIGKILL
    # 20 s later.
    failed_before="$(cut -d' ' -f2 "$CH_DIR/counts")"
    timeout --kill-after=20 "$left" "$0" --inner "$mode" || rc=$?
    read -r passed failed <"$CH_DIR/counts"
    if [[ $rc -eq 124 || $rc -eq 137 ]]; then
      echo "not ok - [$mode] finished within the hard limit of ${LIMIT} s"
      extra_failed=$((extra_failed + 1))
    elif [[ $rc -ne 0 && $failed -eq $failed_before ]]; then
      echo "not ok - [$mode] the test script itself ran to completion (it exited with status $rc)"
      extra_failed=$((extra_failed + 1))
    fi
  done
  read -r passed failed <"$CH_DIR/counts"
  failed=$((failed + extra_failed))
  if [[ "${CH_KEEP:-0}" == 1 ]]; then echo "# kept $CH_DIR (configs, logs, data)"; fi
  echo "# wall time $((SECONDS - start)) s"
  echo "compat clickhouse: $passed passed, $failed failed, 0 skipped"
  [[ $failed -eq 0 ]]
  exit
fi

# --------------------------------------------------------------------------------------------
# Inner process: the scenario, in one mode (standalone | ensemble), in $CH_DIR/<mode>.
# --------------------------------------------------------------------------------------------
: "${CH_DIR:?run scripts/compat/clickhouse/run.sh without arguments}"
MODE="${2:-standalone}"
case "$MODE" in standalone | ensemble) ;; *) echo "unknown mode '$MODE'" >&2; exit 2 ;; esac
RUN_DIR="$CH_DIR/$MODE"
mkdir -p "$RUN_DIR"
export ZK_HEAP="${ZK_HEAP:-256m}"
WAIT="${CH_WAIT:-60}"
# shellcheck source=../server.sh
source "$REPO/scripts/compat/server.sh"

# Counts carry on from the previous mode's.
read -r PASSED FAILED <"$CH_DIR/counts"
ok() {
  PASSED=$((PASSED + 1))
  echo "ok - [$MODE] $*"
  echo "$PASSED $FAILED" >"$CH_DIR/counts"
}
not_ok() {
  FAILED=$((FAILED + 1))
  echo "not ok - [$MODE] $*"
  echo "$PASSED $FAILED" >"$CH_DIR/counts"
}
comment() { sed 's/^/#   /'; }

declare -A CH_PID=() TCP=() HTTP=() INTERSERVER=()
stop_clickhouse() {
  local node pid
  for node in "${!CH_PID[@]}"; do
    kill "${CH_PID[$node]}" 2>/dev/null || true
  done
  for node in "${!CH_PID[@]}"; do
    pid="${CH_PID[$node]}"
    for _ in $(seq 1 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    unset "CH_PID[$node]"
  done
  if [[ -n "${PROXY_PID:-}" ]]; then
    kill "$PROXY_PID" 2>/dev/null || true
    wait "$PROXY_PID" 2>/dev/null || true
    PROXY_PID=""
  fi
}
# The ensemble's servers (ensemble mode), by id; their zoo.cfgs, to recognise them by PID.
declare -A COORD_PID=() COORD_CFG=() COORD_PORT=()
coord_runs() { tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline" | grep -qF -- "$2"; }
stop_coord() {   # SIGTERM, SIGKILL after 10 s, by PID; skips servers a check killed already
  local id pid
  for id in "${!COORD_PID[@]}"; do
    coord_runs "${COORD_PID[$id]}" "${COORD_CFG[$id]}" && kill "${COORD_PID[$id]}" 2>/dev/null
  done
  for id in "${!COORD_PID[@]}"; do
    pid="${COORD_PID[$id]}"
    for _ in $(seq 1 100); do coord_runs "$pid" "${COORD_CFG[$id]}" || break; sleep 0.1; done
    coord_runs "$pid" "${COORD_CFG[$id]}" && kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    unset "COORD_PID[$id]"
  done
  return 0
}
cleanup() {
  set +e
  stop_clickhouse
  stop_coord
  # compat_stop's `wait` returns the server's exit status (143 after SIGTERM), which would trip
  # set -e inside it; called as the left side of `||`, errexit is off for its whole body.
  compat_stop || true
}
trap cleanup EXIT
trap 'exit 143' TERM INT

# ---- installation ----------------------------------------------------------------------------
CH_SERVER_BIN=""
for c in clickhouse-server /usr/sbin/clickhouse-server /usr/bin/clickhouse-server; do
  if command -v "$c" >/dev/null 2>&1; then CH_SERVER_BIN="$(command -v "$c")"; break; fi
done
if [[ -z "$CH_SERVER_BIN" ]] || ! command -v clickhouse-client >/dev/null 2>&1; then
  echo "# installing clickhouse-server and clickhouse-client (Debian package)"
  export DEBIAN_FRONTEND=noninteractive
  apt_opts=(-o DPkg::Lock::Timeout=300 -o Acquire::Retries=3)
  if [[ -z "$(apt-cache policy clickhouse-server 2>/dev/null | sed -n 's/^ *Candidate: *//p' | grep -v '(none)')" ]]; then
    apt-get "${apt_opts[@]}" update -qq
  fi
  # The package's postinst starts and enables the system service (ports 8123/9000/9009). We never
  # use it: a policy-rc.d that forbids starting services (the Debian mechanism for exactly this)
  # keeps it from running on a CI machine, unless the machine already has its own policy-rc.d.
  made_policy=""
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    made_policy=1
  fi
  install_rc=0
  apt-get "${apt_opts[@]}" install -y -qq --no-install-recommends clickhouse-server clickhouse-client \
    >"$CH_DIR/apt.log" 2>&1 || install_rc=$?
  if [[ -n "$made_policy" ]]; then rm -f /usr/sbin/policy-rc.d; fi
  if [[ $install_rc -ne 0 ]]; then
    not_ok "apt-get install clickhouse-server clickhouse-client"
    tail -n 30 "$CH_DIR/apt.log" | comment
    exit 1
  fi
  CH_SERVER_BIN="$(command -v clickhouse-server || echo /usr/sbin/clickhouse-server)"
fi
# If the package's postinst did start the system service, it listens on the default ports only;
# we never use it and never touch it.
echo "# $(clickhouse-client --version 2>&1 | head -n1); server binary $CH_SERVER_BIN"

# ---- the ensemble's four-letter words -----------------------------------------------------------
srvr_mode() {   # srvr_mode ID: the server's Mode (leader, follower...), empty if it does not serve
  FLW_TIMEOUT=2 "$REPO/scripts/zookeeper/4lw.sh" srvr "${COORD_PORT[$1]}" 127.0.0.1 2>/dev/null \
    | sed -n 's/^Mode: //p'
}
wait_ensemble() {   # wait_ensemble SECONDS: until every live server of the ensemble has a Mode
  local deadline=$((SECONDS + $1)) id all
  while :; do
    all=1
    for id in "${!COORD_PID[@]}"; do
      coord_runs "${COORD_PID[$id]}" "${COORD_CFG[$id]}" || continue
      [[ -n "$(srvr_mode "$id")" ]] || all=0
    done
    ((all)) && return 0
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
}
leader_id() {   # the id of the server whose srvr says Mode: leader (empty if none)
  local id
  for id in "${!COORD_PID[@]}"; do
    coord_runs "${COORD_PID[$id]}" "${COORD_CFG[$id]}" || continue
    if [[ "$(srvr_mode "$id")" == leader ]]; then echo "$id"; return; fi
  done
}

# ---- free ports --------------------------------------------------------------------------------
source "$REPO/scripts/lib/ports.sh"

for node in a b; do
  take_port TCP[$node]
  take_port HTTP[$node]
  take_port INTERSERVER[$node]
done

# ---- server under test -------------------------------------------------------------------------
if [[ "$MODE" == standalone ]]; then
  take_port ZK_PORT
  mkdir -p "$RUN_DIR/coord/data"
  cat >"$RUN_DIR/coord/zoo.cfg" <<EOF
tickTime=2000
dataDir=$RUN_DIR/coord/data
clientPort=$ZK_PORT
clientPortAddress=127.0.0.1
maxClientCnxns=0
EOF
  COORD_LOG="$RUN_DIR/coord/server.log"
  echo "# server under test: $COMPAT_SERVER on 127.0.0.1:$ZK_PORT"
  if compat_start "$RUN_DIR/coord/zoo.cfg" "$COORD_LOG"; then
    echo "$COMPAT_PID" >>"$CH_DIR/pids"
    ok "$COMPAT_SERVER listens on 127.0.0.1:$ZK_PORT"
  else
    [[ -n "$COMPAT_PID" ]] && echo "$COMPAT_PID" >>"$CH_DIR/pids"
    not_ok "$COMPAT_SERVER listens on 127.0.0.1:$ZK_PORT"
    tail -n 40 "$COORD_LOG" 2>/dev/null | comment
    exit 1
  fi
  ZK_NODES=("127.0.0.1:$ZK_PORT")
else
  # Three servers, the same server.N lines in every zoo.cfg, a myid in each data directory.
  declare -A QUORUM=() ELECTION=()
  servers=""
  for id in 1 2 3; do
    take_port COORD_PORT[$id]
    take_port QUORUM[$id]
    take_port ELECTION[$id]
    servers+="server.$id=127.0.0.1:${QUORUM[$id]}:${ELECTION[$id]}"$'\n'
  done
  ZK_NODES=()
  for id in 1 2 3; do
    dir="$RUN_DIR/coord-$id"
    mkdir -p "$dir/data"
    echo "$id" >"$dir/data/myid"
    cat >"$dir/zoo.cfg" <<EOF
tickTime=2000
initLimit=10
syncLimit=5
dataDir=$dir/data
clientPort=${COORD_PORT[$id]}
clientPortAddress=127.0.0.1
maxClientCnxns=0
4lw.commands.whitelist=srvr,stat,mntr,ruok,conf
$servers
EOF
    COORD_CFG[$id]="$dir/zoo.cfg"
    case "$COMPAT_SERVER" in
      warden) "$(compat_warden_bin)" server --zoo-cfg "$dir/zoo.cfg" >"$dir/server.log" 2>&1 & ;;
      zookeeper) "$REPO/scripts/zookeeper/run.sh" "$dir/zoo.cfg" >"$dir/server.log" 2>&1 & ;;
    esac
    COORD_PID[$id]=$!
    echo "${COORD_PID[$id]}" >>"$CH_DIR/pids"
    ZK_NODES+=("127.0.0.1:${COORD_PORT[$id]}")
  done
  COORD_LOG="$RUN_DIR/coord-*/server.log"
  echo "# servers under test: a 3-server $COMPAT_SERVER ensemble on ${ZK_NODES[*]}"
  if wait_ensemble 60; then
    ok "the 3-server $COMPAT_SERVER ensemble serves (every server answers srvr with a Mode)"
  else
    not_ok "the 3-server $COMPAT_SERVER ensemble serves within 60 s"
    for id in 1 2 3; do tail -n 20 "$RUN_DIR/coord-$id/server.log" 2>/dev/null | comment; done
    exit 1
  fi
fi

# ---- optional capture of the ZooKeeper traffic (CH_CAPTURE=DIR) ------------------------------
PROXY_PID=""
if [[ -n "${CH_CAPTURE:-}" && "$MODE" == standalone ]]; then
  mkdir -p "$CH_CAPTURE"
  CH_CAPTURE="$(cd "$CH_CAPTURE" && pwd)"
  python3 "$REPO/scripts/golden/capture_proxy.py" --upstream "127.0.0.1:$ZK_PORT" \
    --out-dir "$CH_CAPTURE" --port-file "$CH_DIR/proxy.ports" \
    --header "ClickHouse 18.16 (scripts/compat/clickhouse/run.sh) against $COMPAT_SERVER" \
    2>"$CH_DIR/proxy.log" &
  PROXY_PID=$!
  echo "$PROXY_PID" >>"$CH_DIR/pids"
  for _ in $(seq 1 100); do [[ -s "$CH_DIR/proxy.ports" ]] && break; sleep 0.1; done
  read -r proxy_listen proxy_control <"$CH_DIR/proxy.ports"
  exec 4<>"/dev/tcp/127.0.0.1/$proxy_control"
  echo "SCENARIO clickhouse" >&4
  read -r -t 10 reply <&4 || true
  exec 4>&-
  echo "# capturing ClickHouse's ZooKeeper traffic into $CH_CAPTURE (proxy on 127.0.0.1:$proxy_listen: $reply)"
  ZK_NODES=("127.0.0.1:$proxy_listen")
fi

# ---- ClickHouse configuration ------------------------------------------------------------------
zookeeper_nodes() {   # ClickHouse's <node> elements for ZK_NODES (host:port)
  local i=0 hp
  for hp in "${ZK_NODES[@]}"; do
    i=$((i + 1))
    printf '        <node index="%d">\n            <host>%s</host>\n            <port>%s</port>\n        </node>\n' \
      "$i" "${hp%:*}" "${hp##*:}"
  done
}

write_config() {
  local node=$1 dir="$RUN_DIR/ch-$1"
  mkdir -p "$dir/data" "$dir/tmp" "$dir/user_files" "$dir/format_schemas" "$dir/log"
  cat >"$dir/users.xml" <<'EOF'
<?xml version="1.0"?>
<yandex>
    <profiles>
        <default>
            <max_memory_usage>2000000000</max_memory_usage>
            <max_threads>2</max_threads>
            <!-- These two are read from the default profile when the server starts. -->
            <background_pool_size>4</background_pool_size>
            <background_schedule_pool_size>8</background_schedule_pool_size>
            <!-- ON CLUSTER waits at most this long for every host (default 180). -->
            <distributed_ddl_task_timeout>90</distributed_ddl_task_timeout>
        </default>
    </profiles>
    <users>
        <default>
            <password></password>
            <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
            <profile>default</profile>
            <quota>default</quota>
        </default>
    </users>
    <quotas>
        <default>
            <interval>
                <duration>3600</duration>
                <queries>0</queries>
                <errors>0</errors>
                <result_rows>0</result_rows>
                <read_rows>0</read_rows>
                <execution_time>0</execution_time>
            </interval>
        </default>
    </quotas>
</yandex>
EOF
  cat >"$dir/config.xml" <<EOF
<?xml version="1.0"?>
<yandex>
    <logger>
        <level>${CH_LOG_LEVEL:-debug}</level>
        <log>$dir/log/server.log</log>
        <errorlog>$dir/log/server.err.log</errorlog>
        <size>200M</size>
        <count>1</count>
        <console>0</console>
    </logger>
    <listen_host>127.0.0.1</listen_host>
    <http_port>${HTTP[$node]}</http_port>
    <tcp_port>${TCP[$node]}</tcp_port>
    <interserver_http_port>${INTERSERVER[$node]}</interserver_http_port>
    <!-- The address the other replica fetches parts from (default: this machine's FQDN). -->
    <interserver_http_host>127.0.0.1</interserver_http_host>

    <max_connections>256</max_connections>
    <keep_alive_timeout>3</keep_alive_timeout>
    <max_concurrent_queries>20</max_concurrent_queries>
    <uncompressed_cache_size>16777216</uncompressed_cache_size>
    <mark_cache_size>16777216</mark_cache_size>

    <path>$dir/data/</path>
    <tmp_path>$dir/tmp/</tmp_path>
    <user_files_path>$dir/user_files/</user_files_path>
    <format_schema_path>$dir/format_schemas/</format_schema_path>
    <users_config>$dir/users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <mlock_executable>false</mlock_executable>
    <builtin_dictionaries_reload_interval>3600</builtin_dictionaries_reload_interval>

    <zookeeper>
$(zookeeper_nodes)
        <session_timeout_ms>30000</session_timeout_ms>
    </zookeeper>

    <macros>
        <shard>01</shard>
        <replica>$node</replica>
    </macros>

    <remote_servers>
        <compat>
            <shard>
                <internal_replication>true</internal_replication>
                <replica><host>127.0.0.1</host><port>${TCP[a]}</port></replica>
                <replica><host>127.0.0.1</host><port>${TCP[b]}</port></replica>
            </shard>
        </compat>
    </remote_servers>

    <distributed_ddl>
        <path>/clickhouse/task_queue/ddl</path>
    </distributed_ddl>
</yandex>
EOF
}

ch() { # ch <node> <sql> [clickhouse-client options...]
  local node=$1 sql=$2
  shift 2
  timeout 120 clickhouse-client --host 127.0.0.1 --port "${TCP[$node]}" \
    --connect_timeout=5 --receive_timeout=90 --send_timeout=90 "$@" --query "$sql"
}

start_clickhouse() {
  local node=$1 dir="$RUN_DIR/ch-$1"
  write_config "$node"
  "$CH_SERVER_BIN" --config-file="$dir/config.xml" >"$dir/log/stdout.log" 2>&1 &
  CH_PID[$node]=$!
  echo "${CH_PID[$node]}" >>"$CH_DIR/pids"
}

wait_clickhouse() {
  local node=$1 dir="$RUN_DIR/ch-$1" deadline=$((SECONDS + 90))
  while ((SECONDS < deadline)); do
    if ! kill -0 "${CH_PID[$node]}" 2>/dev/null; then
      not_ok "clickhouse $node starts (it exited)"
      tail -n 30 "$dir/log/stdout.log" "$dir/log/server.err.log" 2>/dev/null | comment
      return 1
    fi
    if [[ "$(ch "$node" "SELECT 1" 2>/dev/null)" == 1 ]]; then
      ok "clickhouse $node answers on 127.0.0.1:${TCP[$node]} (pid ${CH_PID[$node]})"
      return 0
    fi
    sleep 0.5
  done
  not_ok "clickhouse $node answers within 90 s"
  tail -n 30 "$dir/log/server.err.log" 2>/dev/null | comment
  return 1
}

# exec_ok <description> <node> <sql>: the statement succeeds.
exec_ok() {
  local desc=$1 node=$2 sql=$3 out
  if out="$(ch "$node" "$sql" 2>&1)"; then
    ok "$desc"
    return 0
  fi
  not_ok "$desc"
  printf '%s\n' "$out" | tail -n 20 | comment
  return 1
}

# expect <description> <node> <sql> <expected output> [seconds to poll]
expect() {
  local desc=$1 node=$2 sql=$3 want=$4 wait=${5:-0} out deadline
  deadline=$((SECONDS + wait))
  while :; do
    out="$(ch "$node" "$sql" 2>&1)" || true
    if [[ "$out" == "$want" ]]; then
      ok "$desc"
      return 0
    fi
    ((SECONDS < deadline)) || break
    sleep 0.5
  done
  not_ok "$desc"
  {
    echo "query on $node: $sql"
    echo "expected:"
    printf '%s\n' "$want" | sed 's/^/  /'
    echo "got:"
    printf '%s\n' "$out" | tail -n 20 | sed 's/^/  /'
  } | comment
  return 1
}

# on_cluster_ok <description> <node> <ON CLUSTER statement>: the statement succeeds and its
# result (host, port, status, error, num_hosts_remaining, num_hosts_active) has one row per
# replica of the cluster, each with status 0.
on_cluster_ok() {
  local desc=$1 node=$2 sql=$3 out got want
  want="$(printf '127.0.0.1\t%s\t0\n' "${TCP[a]}" "${TCP[b]}" | sort)"
  if out="$(ch "$node" "$sql" --format TSV 2>&1)"; then
    got="$(printf '%s\n' "$out" | cut -f1-3 | sort)"
    if [[ "$got" == "$want" ]]; then
      ok "$desc"
      return 0
    fi
  fi
  not_ok "$desc"
  {
    echo "query on $node: $sql"
    echo "expected (host, port, status):"
    printf '%s\n' "$want" | sed 's/^/  /'
    echo "got:"
    printf '%s\n' "$out" | tail -n 20 | sed 's/^/  /'
  } | comment
  return 1
}

# Waits until the node's replication queue of the table is empty (SYSTEM SYNC REPLICA).
# A failure here is only reported: the checks that follow poll anyway.
sync_replica() {
  local out
  if ! out="$(ch "$1" "SYSTEM SYNC REPLICA $2" 2>&1)"; then
    echo "# SYSTEM SYNC REPLICA $2 on $1 failed:"
    printf '%s\n' "$out" | tail -n 5 | comment
  fi
}

# ---- the scenario ------------------------------------------------------------------------------
scenario() {
  start_clickhouse a
  start_clickhouse b
  wait_clickhouse a || return 1
  wait_clickhouse b || return 1
  echo "# $(ch a 'SELECT version()' 2>&1)"

  local node
  for node in a b; do
    expect "clickhouse $node reads the coordination service (system.zookeeper at /)" "$node" \
      "SELECT count() > 0 FROM system.zookeeper WHERE path = '/'" 1 "$WAIT"
  done

  local cols="id UInt32, v String"
  for node in a b; do
    exec_ok "CREATE TABLE t ReplicatedMergeTree on $node" "$node" \
      "CREATE TABLE t ($cols) ENGINE = ReplicatedMergeTree('/clickhouse/tables/01/t', '{replica}') ORDER BY id" \
      || return 1
  done
  expect "both replicas registered (system.zookeeper .../replicas)" a \
    "SELECT name FROM system.zookeeper WHERE path = '/clickhouse/tables/01/t/replicas' ORDER BY name" \
    $'a\nb' "$WAIT"
  for node in a b; do
    expect "system.replicas on $node: writable, 2 of 2 replicas active" "$node" \
      "SELECT is_readonly, is_session_expired, total_replicas, active_replicas FROM system.replicas WHERE table = 't'" \
      $'0\t0\t2\t2' "$WAIT"
  done

  # INSERT on A -> B.
  exec_ok "INSERT 3 rows on a" a "INSERT INTO t VALUES (1, 'one'), (2, 'two'), (3, 'three')"
  expect "the rows inserted on a are on a" a "SELECT count(), sum(id) FROM t" $'3\t6'
  expect "the rows inserted on a replicate to b" b "SELECT count(), sum(id) FROM t" $'3\t6' "$WAIT"

  # INSERT on B -> A.
  exec_ok "INSERT 2 rows on b" b "INSERT INTO t VALUES (4, 'four'), (5, 'five')"
  expect "the rows inserted on b replicate to a" a \
    "SELECT groupArray(id), groupArray(v) FROM (SELECT id, v FROM t ORDER BY id)" \
    "[1,2,3,4,5]	['one','two','three','four','five']" "$WAIT"

  # Deduplication of identical blocks (the block hashes live in the coordination service).
  exec_ok "repeat the identical INSERT block on a" a "INSERT INTO t VALUES (1, 'one'), (2, 'two'), (3, 'three')"
  exec_ok "repeat a's INSERT block on b" b "INSERT INTO t VALUES (1, 'one'), (2, 'two'), (3, 'three')"
  exec_ok "repeat b's INSERT block on a" a "INSERT INTO t VALUES (4, 'four'), (5, 'five')"
  sync_replica a t
  sync_replica b t
  for node in a b; do
    expect "duplicates dropped on $node: still 5 rows" "$node" "SELECT count(), sum(id) FROM t" $'5\t15'
  done
  expect "two block ids recorded in .../blocks" a \
    "SELECT count() FROM system.zookeeper WHERE path = '/clickhouse/tables/01/t/blocks'" 2
  # A different block is not a duplicate.
  exec_ok "INSERT a different block on a" a "INSERT INTO t VALUES (6, 'six')"
  expect "the new block replicates to b" b "SELECT count(), sum(id) FROM t" $'6\t21' "$WAIT"

  # OPTIMIZE FINAL: one merge, replicated as a log entry.
  sync_replica a t
  sync_replica b t
  exec_ok "OPTIMIZE TABLE t FINAL on a" a "OPTIMIZE TABLE t FINAL"
  for node in a b; do
    expect "one active part on $node after the merge" "$node" \
      "SELECT count(), sum(rows) FROM system.parts WHERE database = currentDatabase() AND table = 't' AND active" \
      $'1\t6' "$WAIT"
  done

  # ALTER ADD COLUMN on A -> B.
  exec_ok "ALTER TABLE t ADD COLUMN on a" a "ALTER TABLE t ADD COLUMN w UInt32 DEFAULT id * 10"
  expect "the new column is on b" b \
    "SELECT name, type, default_kind FROM system.columns WHERE database = currentDatabase() AND table = 't' AND name = 'w'" \
    "w	UInt32	DEFAULT" "$WAIT"
  expect "the new column reads on b" b "SELECT sum(w) FROM t" 210 "$WAIT"
  exec_ok "INSERT with the new column on b" b "INSERT INTO t (id, v, w) VALUES (7, 'seven', 700)"
  expect "that row replicates to a" a "SELECT v, w FROM t WHERE id = 7" "seven	700" "$WAIT"

  # A mutation (ALTER ... DELETE) issued on A applies on both replicas.
  exec_ok "ALTER TABLE t DELETE WHERE id IN (2, 4) on a" a "ALTER TABLE t DELETE WHERE id IN (2, 4)"
  for node in a b; do
    expect "the mutation is done on $node (system.mutations)" "$node" \
      "SELECT count(), sum(is_done) FROM system.mutations WHERE database = currentDatabase() AND table = 't'" \
      $'1\t1' "$WAIT"
    expect "the mutation's effect on $node" "$node" \
      "SELECT groupArray(id) FROM (SELECT id FROM t ORDER BY id)" "[1,3,5,6,7]" "$WAIT"
  done

  # ON CLUSTER DDL through the distributed DDL queue.
  on_cluster_ok "CREATE TABLE t2 ON CLUSTER compat on a: both hosts report status 0" a \
    "CREATE TABLE t2 ON CLUSTER compat (k UInt64, s String) ENGINE = ReplicatedMergeTree('/clickhouse/tables/01/t2', '{replica}') ORDER BY k"
  for node in a b; do
    expect "t2 exists on $node" "$node" \
      "SELECT engine FROM system.tables WHERE database = currentDatabase() AND name = 't2'" \
      ReplicatedMergeTree "$WAIT"
  done
  expect "the DDL queue holds the task" a \
    "SELECT count() FROM system.zookeeper WHERE path = '/clickhouse/task_queue/ddl'" 1
  exec_ok "INSERT into t2 on b" b "INSERT INTO t2 VALUES (42, 'answer')"
  expect "t2's row replicates to a" a "SELECT k, s FROM t2" "42	answer" "$WAIT"
  on_cluster_ok "DROP TABLE t2 ON CLUSTER compat on b: both hosts report status 0" b \
    "DROP TABLE t2 ON CLUSTER compat"
  for node in a b; do
    expect "t2 is gone on $node" "$node" \
      "SELECT count() FROM system.tables WHERE database = currentDatabase() AND name = 't2'" 0 "$WAIT"
  done

  # Nothing went wrong behind the scenes.
  for node in a b; do
    expect "replica $node of t: not read-only, empty queue, no lag" "$node" \
      "SELECT is_readonly, queue_size, absolute_delay, active_replicas FROM system.replicas WHERE table = 't'" \
      $'0\t0\t0\t2' "$WAIT"
  done
}

# ---- ensemble only: the leader killed during INSERTs ------------------------------------------
# insert_retrying NODE SQL: retries the INSERT (90 s at most) until ClickHouse acknowledges it.
# Retrying the same block is safe: a block that did get in is deduplicated by its hash.
RETRIES=0
insert_retrying() {
  local node=$1 sql=$2 deadline=$((SECONDS + 90)) out
  while :; do
    if out="$(ch "$node" "$sql" 2>&1)"; then return 0; fi
    RETRIES=$((RETRIES + 1))
    if ((SECONDS >= deadline)); then
      echo "# INSERT on $node not acknowledged within 90 s: $sql"
      printf '%s\n' "$out" | tail -n 5 | comment
      return 1
    fi
    sleep 0.5
  done
}

failover() {
  local rows=60 kill_at=20 i node leader new_leader acked=0 want
  for node in a b; do
    exec_ok "CREATE TABLE f ReplicatedMergeTree on $node" "$node" \
      "CREATE TABLE f (id UInt32, node String) ENGINE = ReplicatedMergeTree('/clickhouse/tables/01/f', '{replica}') ORDER BY id" \
      || return 1
  done
  leader="$(leader_id)"
  [[ -n "$leader" ]] || { not_ok "the ensemble has a leader before the kill"; return 1; }
  for ((i = 1; i <= rows; i++)); do
    node=$( ((i % 2)) && echo a || echo b)
    if ((i == kill_at)); then
      # The SIGKILL lands while this INSERT (and the next ones) are under way.
      (sleep 0.05; kill -9 "${COORD_PID[$leader]}") &
      echo "# INSERT $i of $rows: SIGKILL to the leader, server $leader (pid ${COORD_PID[$leader]})"
    fi
    insert_retrying "$node" "INSERT INTO f VALUES ($i, '$node')" && acked=$((acked + 1))
  done
  wait "$!" 2>/dev/null || true
  if ! coord_runs "${COORD_PID[$leader]}" "${COORD_CFG[$leader]}"; then
    ok "the leader (server $leader) was killed with SIGKILL during INSERT $kill_at of $rows"
  else
    not_ok "the leader (server $leader) was killed with SIGKILL"
  fi
  if [[ $acked == "$rows" ]]; then
    ok "all $rows INSERTs acknowledged ($RETRIES retried attempts across the failover)"
  else
    not_ok "all $rows INSERTs acknowledged (only $acked; $RETRIES retried attempts)"
  fi
  new_leader="$(leader_id)"
  if [[ -n "$new_leader" && "$new_leader" != "$leader" ]]; then
    ok "a new leader among the two remaining servers (server $new_leader)"
  else
    not_ok "a new leader among the two remaining servers (srvr: '${new_leader}')"
  fi
  want="$rows	$((rows * (rows + 1) / 2))"
  for node in a b; do
    expect "every inserted row is on $node, once" "$node" "SELECT count(), sum(id) FROM f" "$want" "$WAIT"
    expect "replica $node of f: writable, 2 of 2 active, empty queue" "$node" \
      "SELECT is_readonly, queue_size, active_replicas FROM system.replicas WHERE table = 'f'" \
      $'0\t0\t2' "$WAIT"
  done
  expect "each row is the one inserted on the replica it was sent to" a \
    "SELECT countIf(node = if(id % 2 = 1, 'a', 'b')) FROM f" "$rows" "$WAIT"
}

scenario || true
if [[ "$MODE" == ensemble ]]; then
  failover || true
fi
stop_clickhouse

if [[ -n "${CH_CAPTURE:-}" ]]; then
  decoded="$CH_DIR/capture.decoded"
  python3 "$REPO/scripts/golden/zkdecode.py" "$CH_CAPTURE"/clickhouse*.txt >"$decoded" 2>&1 || true
  echo "# ZooKeeper requests ClickHouse sent (count, op), from $CH_CAPTURE:"
  sed -n 's/^C xid=[-0-9]* \([A-Za-z0-9]*([-0-9]*)\).*/\1/p; s/^C \(ConnectRequest\).*/\1/p' "$decoded" \
    | sort | uniq -c | sort -rn | comment
  echo "# replies with an error (count, op, error):"
  sed -n 's/^S xid=[-0-9]* zxid=[^ ]* err=\(-[0-9]*\) \([A-Za-z]*\) reply to \([^ ]*\).*/\3 \2(\1)/p' "$decoded" \
    | sort | uniq -c | sort -rn | comment
fi

if ((FAILED > 0)); then
  echo "# --- failure: log tails ---"
  for node in a b; do
    for f in "$RUN_DIR/ch-$node/log/server.err.log" "$RUN_DIR/ch-$node/log/stdout.log"; do
      if [[ -s "$f" ]]; then
        echo "# $node: tail of $f"
        tail -n 40 "$f" | comment
      fi
    done
  done
  for f in $COORD_LOG; do
    echo "# tail of the $COMPAT_SERVER log ($f)"
    tail -n 40 "$f" 2>/dev/null | comment
  done
fi
((FAILED == 0))
