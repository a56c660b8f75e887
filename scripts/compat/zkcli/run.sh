#!/usr/bin/env bash
# Compatibility test: scripted sessions with ZooKeeper's own command-line clients against the
# server under test, outputs checked line by line:
#   - the Java zkCli (org.apache.zookeeper.ZooKeeperMain from the ZooKeeper 3.9.5 jars that
#     scripts/zookeeper/install.sh installs), interactive sessions fed through a FIFO plus
#     one-shot invocations (`ZooKeeperMain -server H:P cmd args`), and its `config` and
#     `reconfig` against a 3-server ensemble of the server under test (plus a spare to add);
#   - the C client's shell `cli_mt` (Debian 12's zookeeper-bin package, ZooKeeper 3.8.0,
#     /usr/lib/zookeeper/bin/cli_mt), fed through a FIFO.
#
#   scripts/compat/zkcli/run.sh
#
# Environment:
#   COMPAT_SERVER     warden (default) | zookeeper   (see scripts/compat/server.sh)
#   WARDEN_BIN        the warden binary (default target/release/warden)
#   ZKCLI_TIMEOUT     hard limit for the whole run in seconds (default 300)
#   ZKCLI_WAIT        how long one step waits for a client's answer, seconds (default 20)
#   ZKCLI_KEEP=1      keep the temporary directory (zoo.cfg, server and client logs) and print
#                     its path (it is also kept when a check failed)
#   CLI_MT            path of cli_mt (default: from the zookeeper-bin package, installed if missing)
#   ZK_HEAP           heap of the reference ZooKeeper (default here 256m)
#   ZKCLI_SECTIONS    which parts run (default "single sasl tls cluster"): `single` is the
#                     one-server sessions of both clients, `sasl` zkCli with a JAAS Client section
#                     (DIGEST-MD5) and `sasl:` ACLs, `tls` zkCli over TLS
#                     (zookeeper.client.secure=true, PKCS#12 and JKS stores made with openssl
#                     and keytool) with `x509:` ACLs, `cluster` zkCli's config and reconfig
#                     against a 3-server ensemble of the server under test (plus a spare to add)
#
# Prints `ok - ...` / `not ok - ...` per check and `# ...` comments; the last line is always
# `compat zkcli: N passed, M failed, 0 skipped`; exits 0 iff nothing failed.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../../.." && pwd)"

# --------------------------------------------------------------------------------------------
# Outer process: temp dir, hard timeout, summary line, last-resort cleanup.
# --------------------------------------------------------------------------------------------
if [[ "${1:-}" != "--inner" ]]; then
  LIMIT="${ZKCLI_TIMEOUT:-300}"
  ZKCLI_DIR="$(mktemp -d "${TMPDIR:-/tmp}/compat-zkcli.XXXXXX")"
  export ZKCLI_DIR
  : >"$ZKCLI_DIR/pids"
  echo "0 0" >"$ZKCLI_DIR/counts"
  start=$SECONDS
  rc=0
  # timeout (without --foreground) signals its whole process group on expiry: the inner script,
  # the clients and the server under test all get SIGTERM, then SIGKILL 20 s later.
  timeout --kill-after=20 "$LIMIT" "$0" --inner || rc=$?
  read -r passed failed <"$ZKCLI_DIR/counts"
  if [[ $rc -eq 124 || $rc -eq 137 ]]; then
    echo "not ok - finished within the hard limit of ${LIMIT} s"
    failed=$((failed + 1))
  elif [[ $rc -ne 0 ]]; then
    echo "not ok - the test script itself ran to completion (it exited with status $rc)"
    failed=$((failed + 1))
  fi
  # Anything the inner script could not stop (it was SIGKILLed, say): kill by PID.
  while read -r pid; do
    [[ -n "$pid" ]] && kill -9 "$pid" 2>/dev/null || true
  done <"$ZKCLI_DIR/pids"
  if [[ "${ZKCLI_KEEP:-0}" == 1 || $failed -ne 0 ]]; then
    echo "# kept $ZKCLI_DIR"
  else
    rm -rf "$ZKCLI_DIR"
  fi
  echo "# wall time $((SECONDS - start)) s"
  echo "compat zkcli: $passed passed, $failed failed, 0 skipped"
  [[ $failed -eq 0 ]]
  exit
fi

# --------------------------------------------------------------------------------------------
# Inner process: the scenario.
# --------------------------------------------------------------------------------------------
: "${ZKCLI_DIR:?run scripts/compat/zkcli/run.sh without arguments}"
export ZK_HEAP="${ZK_HEAP:-256m}"
WAIT="${ZKCLI_WAIT:-20}"
# shellcheck source=../server.sh
source "$REPO/scripts/compat/server.sh"

PASSED=0
FAILED=0
ok() {
  PASSED=$((PASSED + 1))
  echo "ok - $*"
  echo "$PASSED $FAILED" >"$ZKCLI_DIR/counts"
}
not_ok() {
  FAILED=$((FAILED + 1))
  echo "not ok - $*"
  echo "$PASSED $FAILED" >"$ZKCLI_DIR/counts"
}
comment() { awk '{ print "#   " $0 }'; }

# OUT holds the output of the last client command; the checks look at it.
OUT=""
show_out() {
  echo "#   output was:"
  { head -n 40 <<<"$OUT" | cat -A | awk '{ print "#     " $0 }'; } || true
}
trim_out() { while [[ "$OUT" == *$'\n' ]]; do OUT="${OUT%$'\n'}"; done; }
# The first line of OUT that is not a connection-state event ("WATCHER::", a blank line,
# "WatchedEvent state:S type:None ..."): in a cluster, a reconfig that removes the leader
# moves the leadership, and zkCli reports its session's reconnection whenever it comes, as it
# does with ZooKeeper.
first_line() {
  grep -v -E '^(WATCHER::|WatchedEvent state:[A-Za-z]+ type:None .*|)$' <<<"$OUT" | head -n1 || true
}
# Predicates on OUT.
line() { grep -qxF -- "$1" <<<"$OUT"; }        # an exact line
no_re() { ! grep -qE -- "$1" <<<"$OUT"; }      # no line containing the regex
# check DESCRIPTION PREDICATE ARGS...: ok, or not ok and the output.
check() {
  local desc=$1
  shift
  if "$@"; then ok "$desc"; else not_ok "$desc"; show_out; fi
}
# check_eq DESCRIPTION GOT WANT
check_eq() {
  if [[ "$2" == "$3" ]]; then ok "$1"; else not_ok "$1"; echo "#   got '$2', want '$3'"; show_out; fi
}
# The value after "NAME = " (zkCli Stat) or "NAME=" (cli_mt Stat) in OUT, first occurrence.
field() { sed -n -E "/^[[:space:]]*$1 ?= ?/{s/^[[:space:]]*$1 ?= ?([^[:space:]]*).*/\\1/p;q}" <<<"$OUT"; }
# A printed time (ctime/mtime, either client's format) within 10 minutes of now.
near_now() {
  local t
  [[ -n "$1" ]] || return 1
  t="$(date -d "$1" +%s 2>/dev/null)" || return 1
  ((t > $(date +%s) - 600 && t < $(date +%s) + 600))
}
check_time() {
  if near_now "$2"; then ok "$1"; else not_ok "$1"; echo "#   printed time '$2' is not within 10 min of now"; fi
}

# ---- client sessions driven through FIFOs ----------------------------------------------------
# A session is a client process whose stdin is a FIFO we keep open and whose stdout+stderr go to
# a log; commands are written to the FIFO, answers are waited for in the log (from a byte offset).
declare -A S_PID=() S_FD=() S_LOG=()
sess_open() {
  local name=$1
  shift
  local fifo="$ZKCLI_DIR/$name.in"
  S_LOG[$name]="$ZKCLI_DIR/$name.log"
  rm -f "$fifo"
  mkfifo "$fifo"
  # The client must not inherit the other sessions' FIFO write ends (their EOF would never come).
  (
    for fd in "${S_FD[@]}"; do [[ -n "$fd" ]] && exec {fd}>&-; done
    exec "$@"
  ) <"$fifo" >"${S_LOG[$name]}" 2>&1 &
  S_PID[$name]=$!
  echo "${S_PID[$name]}" >>"$ZKCLI_DIR/pids"
  local fd
  exec {fd}>"$fifo"
  S_FD[$name]=$fd
}
sess_send() {
  # The client may have died: no SIGPIPE for us.
  (trap '' PIPE; printf '%s\n' "$2" >&"${S_FD[$1]}") 2>/dev/null || true
}
sess_size() { stat -c %s "${S_LOG[$1]}"; }
sess_since() { tail -c +"$(($2 + 1))" "${S_LOG[$1]}"; }
# sess_wait NAME OFFSET REGEX [SECONDS]: a line of the log after OFFSET matches REGEX (grep -E).
sess_wait() {
  local name=$1 off=$2 regex=$3 deadline=$((SECONDS + ${4:-$WAIT})) text
  while :; do
    text="$(sess_since "$name" "$off")"
    grep -qE -- "$regex" <<<"$text" && return 0
    ((SECONDS < deadline)) || return 1
    kill -0 "${S_PID[$name]}" 2>/dev/null || { text="$(sess_since "$name" "$off")"; grep -qE -- "$regex" <<<"$text"; return; }
    sleep 0.1
  done
}
# sess_count NAME OFFSET REGEX: how many log lines after OFFSET match REGEX.
sess_count() {
  local text
  text="$(sess_since "$1" "$2")"
  grep -cE -- "$3" <<<"$text" || true
}
# sess_exit NAME [SECONDS]: close its stdin, wait for the process to end (killing it after
# SECONDS); sets S_RC to its exit status (or 'killed').
S_RC=""
sess_exit() {
  local name=$1 deadline=$((SECONDS + ${2:-$WAIT})) pid=${S_PID[$1]} fd=${S_FD[$1]:-}
  if [[ -n "$fd" ]]; then
    exec {fd}>&-
    S_FD[$name]=""
  fi
  while kill -0 "$pid" 2>/dev/null; do
    if ((SECONDS >= deadline)); then
      kill "$pid" 2>/dev/null || true
      sleep 1
      kill -9 "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
      S_RC=killed
      return 1
    fi
    sleep 0.1
  done
  S_RC=0
  wait "$pid" 2>/dev/null || S_RC=$?
  return 0
}

# A client that did not answer in time is killed: the later steps of its session then fail at
# once instead of waiting out their own timeouts.
sess_kill_stuck() {
  local name=$1 pid=${S_PID[$1]}
  if kill -0 "$pid" 2>/dev/null; then
    echo "# $2 $name: $3 within ${WAIT} s; killing it, its later steps fail at once"
    kill "$pid" 2>/dev/null || true
    sleep 0.5
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  else
    echo "# $2 $name: $3 (the client is no longer running)"
  fi
}

cleanup() {
  local name
  for name in "${!S_PID[@]}"; do
    kill "${S_PID[$name]}" 2>/dev/null || true
  done
  for name in "${!S_PID[@]}"; do
    for _ in $(seq 1 50); do
      kill -0 "${S_PID[$name]}" 2>/dev/null || break
      sleep 0.1
    done
    kill -9 "${S_PID[$name]}" 2>/dev/null || true
    wait "${S_PID[$name]}" 2>/dev/null || true
  done
  # `|| true` turns errexit off inside compat_stop: its `wait` returns the server's exit status
  # (143 for a JVM stopped by SIGTERM), which under `set -e` would end this trap with that status.
  compat_stop || true
  cl_stop || true
}
trap cleanup EXIT
trap 'exit 143' TERM INT

# ---- free port ---------------------------------------------------------------------------------
source "$REPO/scripts/lib/ports.sh"

# ---- installation ------------------------------------------------------------------------------
JAVA_OK=0
if ZK_HOME="$("$REPO/scripts/zookeeper/install.sh")" && [[ -f "$ZK_HOME/lib/zookeeper-3.9.5.jar" ]]; then
  if ls "$ZK_HOME"/lib/jline-*.jar >/dev/null 2>&1; then
    ok "zkCli: ZooKeeper 3.9.5 client jars (with jline) installed in $ZK_HOME/lib"
    JAVA_OK=1
  else
    not_ok "zkCli: ZooKeeper 3.9.5 client jars (with jline) installed in $ZK_HOME/lib (no jline jar)"
  fi
else
  not_ok "zkCli: ZooKeeper 3.9.5 client jars installed by scripts/zookeeper/install.sh"
fi

C_OK=0
CLI_MT="${CLI_MT:-}"
if [[ -z "$CLI_MT" ]]; then
  if ! dpkg -s zookeeper-bin >/dev/null 2>&1 || [[ ! -x /usr/lib/zookeeper/bin/cli_mt ]]; then
    echo "# installing zookeeper-bin (Debian package: the C client's cli_mt)"
    export DEBIAN_FRONTEND=noninteractive
    SUDO=()
    [[ $EUID -ne 0 ]] && command -v sudo >/dev/null 2>&1 && SUDO=(sudo -E)
    apt_opts=(-o DPkg::Lock::Timeout=300 -o Acquire::Retries=3)
    # apt-get update only when the package lists do not know the package.
    if [[ -z "$(apt-cache policy zookeeper-bin 2>/dev/null | sed -n 's/^ *Candidate: *//p' | grep -v '(none)')" ]]; then
      "${SUDO[@]}" apt-get "${apt_opts[@]}" update -qq 2>&1 | comment || true
    fi
    "${SUDO[@]}" apt-get "${apt_opts[@]}" install -y -qq --no-install-recommends zookeeper-bin 2>&1 \
      | grep -v '^\(Selecting\|Preparing\|Unpacking\|Setting up\|Processing\|(Reading\)' | comment || true
  fi
  CLI_MT="$(dpkg -L zookeeper-bin 2>/dev/null | grep '/cli_mt$' | head -n1 || true)"
fi
if [[ -n "$CLI_MT" && -x "$CLI_MT" ]]; then
  ok "cli_mt: C client shell available at $CLI_MT ($(dpkg-query -W -f '${Package} ${Version}' zookeeper-bin 2>/dev/null || echo '?'))"
  C_OK=1
else
  not_ok "cli_mt: C client shell installed (Debian package zookeeper-bin)"
fi

SECTIONS=" ${ZKCLI_SECTIONS:-single sasl tls cluster} "
section() { [[ "$SECTIONS" == *" $1 "* ]]; }

# still_running WHAT LOG: the server under test is still up; if not, the tail of its log.
still_running() {
  if kill -0 "$COMPAT_PID" 2>/dev/null; then
    ok "$1 still running"
  else
    not_ok "$1 still running"
    tail -n 40 "$2" 2>/dev/null | comment
  fi
}
# The cluster section's servers (started by cluster_section, stopped by cl_stop).
declare -A CL_PID=()
cl_stop() {
  local i
  for i in "${!CL_PID[@]}"; do
    kill "${CL_PID[$i]}" 2>/dev/null || true
  done
  for i in "${!CL_PID[@]}"; do
    for _ in $(seq 1 100); do
      kill -0 "${CL_PID[$i]}" 2>/dev/null || break
      sleep 0.1
    done
    kill -9 "${CL_PID[$i]}" 2>/dev/null || true
    wait "${CL_PID[$i]}" 2>/dev/null || true
    unset "CL_PID[$i]"
  done
}

# ---- server under test (the single section) -----------------------------------------------------
PORT="${ZKCLI_PORT:-$(free_port)}"
HP="127.0.0.1:$PORT"
SERVER_LOG="$ZKCLI_DIR/server.log"
# Starts the one server the single section's sessions talk to; fails if it does not listen.
single_server_start() {
  mkdir -p "$ZKCLI_DIR/data"
  cat >"$ZKCLI_DIR/zoo.cfg" <<EOF
tickTime=2000
initLimit=10
syncLimit=5
dataDir=$ZKCLI_DIR/data
clientPort=$PORT
clientPortAddress=127.0.0.1
maxClientCnxns=0
4lw.commands.whitelist=*
enforceQuota=true
EOF
  echo "# server under test: $COMPAT_SERVER on $HP"
  if compat_start "$ZKCLI_DIR/zoo.cfg" "$SERVER_LOG" 2>"$ZKCLI_DIR/start.err"; then
    echo "$COMPAT_PID" >>"$ZKCLI_DIR/pids"
    ok "$COMPAT_SERVER listens on $HP"
    return 0
  fi
  [[ -n "$COMPAT_PID" ]] && echo "$COMPAT_PID" >>"$ZKCLI_DIR/pids"
  not_ok "$COMPAT_SERVER listens on $HP"
  comment <"$ZKCLI_DIR/start.err"
  return 1 # nothing more to check with it
}

# ================================================================================================
# Java zkCli
# ================================================================================================
JAVA_CLI=(java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1
  -Dorg.slf4j.simpleLogger.defaultLogLevel=warn
  -cp "${ZK_HOME:-.}/lib/*" org.apache.zookeeper.ZooKeeperMain -server "$HP")
# Prompt before command N: "[zk: 127.0.0.1:PORT(CONNECTED) N] " (no newline; commands are not
# echoed: the dumb jline terminal of a non-tty stdin).
declare -A J_N=()
# j_open NAME: an interactive zkCli; waits for the connection and the first prompt.
j_open() {
  sess_open "$1" "${JAVA_CLI[@]}"
  J_N[$1]=0
  if sess_wait "$1" 0 '^WatchedEvent state:SyncConnected type:None path:null' 60 \
     && sess_wait "$1" 0 '\[zk: [^]]*\) 0\] ' 30; then
    ok "zkCli $1: interactive session connects (SyncConnected event, prompt 0)"
    return 0
  fi
  not_ok "zkCli $1: interactive session connects (SyncConnected event, prompt 0)"
  { sess_since "$1" 0 | tail -n 20 | comment; } || true
  sess_kill_stuck "$1" zkCli "not connected"
  return 1
}
# j_cmd NAME COMMAND: runs one command; OUT = what was printed between its prompt and the next
# one (or everything since, if the next prompt did not come).
j_cmd() {
  local name=$1 cmd=$2 off next content
  off="$(sess_size "$name")"
  next=$((J_N[$name] + 1))
  sess_send "$name" "$cmd"
  if sess_wait "$name" "$off" "\\[zk: [^]]*\\) $next\\] "; then
    J_N[$name]=$next
    content="$(sess_since "$name" "$off")"
    OUT="${content%%"[zk: "*") $next] "*}"
    trim_out
    return 0
  fi
  OUT="$(sess_since "$name" "$off")"
  sess_kill_stuck "$name" "zkCli" "no prompt after '$cmd'"
  return 0
}
# j_shot ARGS...: a one-shot `ZooKeeperMain -server H:P ARGS...`; OUT = stdout+stderr, J_RC = status.
J_RC=0
j_shot() {
  J_RC=0
  OUT="$(timeout --foreground -k 5 30 "${JAVA_CLI[@]}" "$@" 2>&1)" || J_RC=$?
}
# The watch event line of the 3.9 client: "WatchedEvent state:SyncConnected type:T path:P zxid: Z".
# Lines zkCli prints for a failed command.
J_ERR='^(Node does not exist|Node not empty|Node already exists|version No is not valid|Ephemerals cannot|Insufficient permission|Authentication is not valid|Connection|KeeperErrorCode)|Exception|ERROR'
j_event() { printf '^WatchedEvent state:SyncConnected type:%s path:%s( zxid: -?[0-9]+)?$' "$1" "$2"; }
j_event_check() { # DESC NAME OFFSET TYPE PATH
  if sess_wait "$2" "$3" "$(j_event "$4" "$5")"; then ok "$1"; else
    not_ok "$1"; echo "#   no line 'WatchedEvent state:SyncConnected type:$4 path:$5 ...' in $2's output since:"
    { sess_since "$2" "$3" | head -n 30 | comment; } || true
  fi
}

zkcli_session() {
  local R=/zkcli-j off
  j_open ja || return 0

  # create / get -s / set -s / get
  j_cmd ja "create $R hello-j"
  check "zkCli create $R hello-j: prints 'Created $R'" line "Created $R"

  j_cmd ja "get -s $R"
  check "zkCli get -s $R: data line 'hello-j'" line "hello-j"
  check "zkCli get -s $R: dataVersion = 0" line "dataVersion = 0"
  check "zkCli get -s $R: cversion = 0, aclVersion = 0" eval 'line "cversion = 0" && line "aclVersion = 0"'
  check "zkCli get -s $R: ephemeralOwner = 0x0" line "ephemeralOwner = 0x0"
  check "zkCli get -s $R: dataLength = 7, numChildren = 0" eval 'line "dataLength = 7" && line "numChildren = 0"'
  check "zkCli get -s $R: cZxid/mZxid/pZxid hex, equal, nonzero" \
    eval '[[ "$(field cZxid)" =~ ^0x[0-9a-f]+$ && "$(field cZxid)" == "$(field mZxid)" && "$(field cZxid)" == "$(field pZxid)" ]] && (( $(field cZxid) > 0 ))'
  local czxid ctime
  czxid="$(field cZxid)"
  ctime="$(sed -n '/^ctime = /{s///p;q}' <<<"$OUT")"
  check_time "zkCli get -s $R: ctime is now (ms since epoch): '$ctime'" "$ctime"
  check "zkCli get -s $R: mtime = ctime" eval '[[ -n "$ctime" && "$(sed -n "s/^mtime = //p" <<<"$OUT")" == "$ctime" ]]'

  j_cmd ja "set -s $R hello-j2"
  check "zkCli set -s $R: dataVersion = 1" line "dataVersion = 1"
  check "zkCli set -s $R: dataLength = 8" line "dataLength = 8"
  check "zkCli set -s $R: cZxid unchanged, mZxid > cZxid" \
    eval '[[ "$(field cZxid)" == "$czxid" && -n "$(field mZxid)" ]] && (( $(field mZxid) > $(field cZxid) ))'

  j_cmd ja "get $R"
  check "zkCli get $R: prints 'hello-j2' (only)" eval '[[ "$OUT" == "hello-j2" ]]'

  j_cmd ja "set -v 0 $R stale"
  check "zkCli set -v 0 (stale version): 'version No is not valid : $R' (BadVersion)" \
    line "version No is not valid : $R"

  # sequential, ephemeral, ls
  j_cmd ja "create -s $R/seq- s"
  check "zkCli create -s $R/seq-: 'Created $R/seq-0000000000'" line "Created $R/seq-0000000000"
  j_cmd ja "create -s $R/seq- s"
  check "zkCli create -s $R/seq- again: 'Created $R/seq-0000000001'" line "Created $R/seq-0000000001"

  j_cmd ja "create -e $R/eph e"
  check "zkCli create -e $R/eph: 'Created $R/eph'" line "Created $R/eph"
  j_cmd ja "stat $R/eph"
  local owner
  owner="$(field ephemeralOwner)"
  check "zkCli stat $R/eph: ephemeralOwner = 0x<session id> (nonzero): '$owner'" \
    eval '[[ "$owner" =~ ^0x[1-9a-f][0-9a-f]*$ ]]'
  check "zkCli stat $R/eph: dataLength = 1, dataVersion = 0" eval 'line "dataLength = 1" && line "dataVersion = 0"'

  j_cmd ja "ls $R"
  check "zkCli ls $R: '[eph, seq-0000000000, seq-0000000001]'" line "[eph, seq-0000000000, seq-0000000001]"
  j_cmd ja "ls -s $R"
  check "zkCli ls -s $R: children, numChildren = 3, cversion = 3" \
    eval 'line "[eph, seq-0000000000, seq-0000000001]" && line "numChildren = 3" && line "cversion = 3"'

  # a second client: the ephemeral is visible there, and it triggers ja's watches
  if j_open jb; then
    j_cmd jb "stat $R/eph"
    check "zkCli (2nd client) stat $R/eph: visible, same ephemeralOwner $owner" line "ephemeralOwner = $owner"

    j_cmd ja "get -w $R"
    check "zkCli get -w $R: 'hello-j2'" line "hello-j2"
    off="$(sess_size ja)"
    j_cmd jb "set $R hello-j3"
    check "zkCli (2nd client) set $R: prints nothing" eval '[[ -z "$OUT" ]]'
    j_event_check "zkCli get -w watch fires on the other client's set: 'WatchedEvent state:SyncConnected type:NodeDataChanged path:$R'" \
      ja "$off" NodeDataChanged "$R"

    j_cmd ja "ls -w $R"
    check "zkCli ls -w $R: '[eph, seq-0000000000, seq-0000000001]'" line "[eph, seq-0000000000, seq-0000000001]"
    off="$(sess_size ja)"
    j_cmd jb "create $R/child c"
    check "zkCli (2nd client) create $R/child" line "Created $R/child"
    j_event_check "zkCli ls -w watch fires: 'WatchedEvent state:SyncConnected type:NodeChildrenChanged path:$R'" \
      ja "$off" NodeChildrenChanged "$R"

    j_cmd ja "stat -w $R/w"
    check "zkCli stat -w $R/w (missing): 'Node does not exist: $R/w'" line "Node does not exist: $R/w"
    off="$(sess_size ja)"
    j_cmd jb "create $R/w w"
    check "zkCli (2nd client) create $R/w" line "Created $R/w"
    j_event_check "zkCli stat -w watch on a missing node fires: 'WatchedEvent state:SyncConnected type:NodeCreated path:$R/w'" \
      ja "$off" NodeCreated "$R/w"
  fi

  j_cmd ja "get -w $R/w"
  check "zkCli get -w $R/w: 'w'" line "w"
  off="$(sess_size ja)"
  j_cmd ja "delete $R/w"
  check "zkCli delete $R/w: prints no error" no_re "$J_ERR"
  j_event_check "zkCli get -w watch fires on the same client's delete: 'WatchedEvent state:SyncConnected type:NodeDeleted path:$R/w'" \
    ja "$off" NodeDeleted "$R/w"

  # errors
  j_cmd ja "delete $R/w"
  check "zkCli delete $R/w again: 'Node does not exist: $R/w' (NoNode)" line "Node does not exist: $R/w"
  j_cmd ja "get $R/missing"
  check "zkCli get $R/missing: 'Node does not exist: $R/missing'" line "Node does not exist: $R/missing"
  j_cmd ja "create $R dup"
  check "zkCli create $R again: 'Node already exists: $R' (NodeExists)" line "Node already exists: $R"
  j_cmd ja "delete $R"
  check "zkCli delete $R (has children): 'Node not empty: $R' (NotEmpty)" line "Node not empty: $R"
  j_cmd ja "create $R/eph/x x"
  check "zkCli create $R/eph/x: 'Ephemerals cannot have children: $R/eph/x'" \
    line "Ephemerals cannot have children: $R/eph/x"

  # stat: what all of the above did to the parent
  j_cmd ja "stat $R"
  check "zkCli stat $R: numChildren = 4 (eph, child, 2 seq)" line "numChildren = 4"
  check "zkCli stat $R: cversion = 6 (5 creates + 1 delete of children)" line "cversion = 6"
  check "zkCli stat $R: dataVersion = 2, dataLength = 8" eval 'line "dataVersion = 2" && line "dataLength = 8"'
  check "zkCli stat $R: no data line" no_re '^hello'

  # the get -w watch on $R is one-shot: a second set does not fire it again
  if [[ -n "${S_PID[jb]:-}" ]]; then
    j_cmd jb "set $R hello-j4"
    j_cmd ja "get $R" # a round trip on ja: an event sent before its answer has been printed
    check "zkCli: the get -w watch fired exactly once (one-shot) after two sets" \
      eval '[[ "$(sess_count ja 0 "$(j_event NodeDataChanged "$R")")" == 1 ]]'
  fi

  # ja quits: its ephemeral node goes with its session
  sess_send ja "quit"
  if sess_exit ja; then ok "zkCli ja: quit ends the client"; else not_ok "zkCli ja: quit ends the client (killed)"; fi

  j_shot stat "$R/eph"
  check "zkCli one-shot (new client) stat $R/eph after ja quit: 'Node does not exist: $R/eph', exit 1" \
    eval 'line "Node does not exist: $R/eph" && [[ $J_RC == 1 ]]'
  j_shot ls "$R"
  check "zkCli one-shot ls $R: '[child, seq-0000000000, seq-0000000001]', exit 0" \
    eval 'line "[child, seq-0000000000, seq-0000000001]" && [[ $J_RC == 0 ]]'

  if [[ -n "${S_PID[jb]:-}" ]]; then
    j_cmd jb "deleteall $R"
    check "zkCli deleteall $R: prints no error" no_re "$J_ERR"
    j_cmd jb "stat $R"
    check "zkCli stat $R after deleteall: 'Node does not exist: $R'" line "Node does not exist: $R"
    sess_send jb "quit"
    if sess_exit jb; then ok "zkCli jb: quit ends the client"; else not_ok "zkCli jb: quit ends the client (killed)"; fi
  fi
}

# zkCli's quota commands against a server with enforceQuota=true: the usage kept in the stats
# node in place, soft limits that refuse nothing, hard limits that do ("Quota has exceeded").
zkcli_quota_session() {
  local R=/zkcli-q
  local STATS=/zookeeper/quota/zkcli-q/zookeeper_stats LIMITS=/zookeeper/quota/zkcli-q/zookeeper_limits
  j_open jq || return 0
  j_cmd jq "create $R q"
  check "zkCli create $R q" line "Created $R"
  j_cmd jq "setquota -n 3 $R"
  check "zkCli setquota -n 3 $R: prints nothing" eval '[[ -z "$OUT" ]]'
  j_cmd jq "listquota $R"
  check "zkCli listquota $R: 'absolute path is $LIMITS'" line "absolute path is $LIMITS"
  check "zkCli listquota $R: 'Output quota for $R count=3,bytes=-1=;byteHardLimit=-1;countHardLimit=-1'" \
    line "Output quota for $R count=3,bytes=-1=;byteHardLimit=-1;countHardLimit=-1"
  check "zkCli listquota $R: 'Output stat for $R count=1,bytes=1' (the root and its data counted)" \
    line "Output stat for $R count=1,bytes=1"
  local n
  for n in a b c; do
    j_cmd jq "create $R/$n $n"
    check "zkCli create $R/$n: a soft limit refuses nothing" line "Created $R/$n"
  done
  j_cmd jq "get -s $STATS"
  check "zkCli get -s $STATS: 'count=4,bytes=4'" line "count=4,bytes=4"
  check "zkCli get -s $STATS: changed in place (dataVersion = 0, mZxid = cZxid)" \
    eval 'line "dataVersion = 0" && [[ -n "$(field cZxid)" && "$(field cZxid)" == "$(field mZxid)" ]]'
  j_cmd jq "setquota -N 5 $R"
  check "zkCli setquota -N 5 $R: the client's warning about the soft count" \
    line "[Warning]: the count quota you create is less than the existing count:4"
  j_cmd jq "create $R/d d"
  check "zkCli create $R/d: the 5th node is within countHardLimit=5" line "Created $R/d"
  j_cmd jq "create $R/e e"
  check "zkCli create $R/e: 'Quota has exceeded : $R/e' (QuotaExceeded, -125)" line "Quota has exceeded : $R/e"
  j_cmd jq "setquota -B 10 $R"
  j_cmd jq "set $R/a 12345678901"
  check "zkCli set $R/a with 11 bytes: 'Quota has exceeded : $R/a' (byteHardLimit=10)" \
    line "Quota has exceeded : $R/a"
  j_cmd jq "setquota -b 100 $R"
  j_cmd jq "listquota $R"
  check "zkCli listquota $R after -N/-B/-b: 'Output quota for $R count=3,bytes=100=;byteHardLimit=10;countHardLimit=5'" \
    line "Output quota for $R count=3,bytes=100=;byteHardLimit=10;countHardLimit=5"
  check "zkCli listquota $R: 'Output stat for $R count=5,bytes=5' (refused writes left no trace)" \
    line "Output stat for $R count=5,bytes=5"
  j_cmd jq "delquota -N $R"
  j_cmd jq "listquota $R"
  check "zkCli delquota -N $R: countHardLimit=-1" \
    line "Output quota for $R count=3,bytes=100=;byteHardLimit=10;countHardLimit=-1"
  j_cmd jq "setquota -n 2 $R/a"
  check "zkCli setquota -n 2 $R/a: '$R/a has a parent $R which has a quota'" \
    line "$R/a has a parent $R which has a quota"
  j_cmd jq "delquota $R"
  j_cmd jq "listquota $R"
  check "zkCli delquota $R then listquota: 'quota for $R does not exist.'" line "quota for $R does not exist."
  j_cmd jq "ls /zookeeper/quota"
  check "zkCli ls /zookeeper/quota after delquota: '[]'" line "[]"
  j_cmd jq "create $R/e e"
  check "zkCli create $R/e without a quota" line "Created $R/e"
  j_cmd jq "deleteall $R"
  sess_send jq "quit"
  if sess_exit jq; then ok "zkCli jq: quit ends the client"; else not_ok "zkCli jq: quit ends the client (killed)"; fi
}

# ================================================================================================
# C client cli_mt (ZooKeeper 3.8.0 cli.c as built by Debian)
# ================================================================================================
# Its answers come asynchronously on stderr; after each command we send a barrier
# `delete /zkcli-barrier-K` (a node that never exists) and wait for its completion line
# "/zkcli-barrier-K: rc = -101": completions run in order, so everything the command printed is
# before it. (`exists` is synchronous in cli_mt, and prints only "Error -101 for P" if missing.)
declare -A C_SID=()
BARRIER=0
c_open() {
  sess_open "$1" "$CLI_MT" "$HP"
  if sess_wait "$1" 0 '^Got a new session id: 0x[0-9a-f]+$' 30 \
     && grep -qx 'Watcher SESSION_EVENT state = CONNECTED_STATE' "${S_LOG[$1]}"; then
    C_SID[$1]="$(sed -n '/^Got a new session id: 0x/{s///p;q}' "${S_LOG[$1]}")"
    ok "cli_mt $1: connects ('Watcher SESSION_EVENT state = CONNECTED_STATE', 'Got a new session id: 0x${C_SID[$1]}')"
    return 0
  fi
  not_ok "cli_mt $1: connects ('Watcher SESSION_EVENT state = CONNECTED_STATE', 'Got a new session id: 0x...')"
  { sess_since "$1" 0 | tail -n 20 | comment; } || true
  sess_kill_stuck "$1" cli_mt "not connected"
  return 1
}
c_cmd() {
  local name=$1 cmd=$2 off content b
  off="$(sess_size "$name")"
  BARRIER=$((BARRIER + 1))
  b="/zkcli-barrier-$BARRIER"
  sess_send "$name" "$cmd"
  sess_send "$name" "delete $b"
  if sess_wait "$name" "$off" "^$b: rc = -?[0-9]+\$"; then
    content="$(sess_since "$name" "$off")"
    OUT="${content%%"$b: rc = "*}"
    trim_out
    return 0
  fi
  OUT="$(sess_since "$name" "$off")"
  sess_kill_stuck "$name" "cli_mt" "no answer after '$cmd'"
  return 0
}
# Watcher line: "Watcher CHANGED_EVENT state = CONNECTED_STATE for path /p".
c_event() { printf '^Watcher %s state = CONNECTED_STATE for path %s$' "$1" "$2"; }
c_event_check() { # DESC NAME OFFSET TYPE PATH
  if sess_wait "$2" "$3" "$(c_event "$4" "$5")"; then ok "$1"; else
    not_ok "$1"; echo "#   no line 'Watcher $4 state = CONNECTED_STATE for path $5' in $2's output since:"
    { sess_since "$2" "$3" | head -n 30 | comment; } || true
  fi
}
# The child lines of an `ls` answer ("\tname"), sorted, comma-separated.
TAB=$'\t'
c_children() { { grep "^$TAB" <<<"$OUT" || true; } | sed "s/^$TAB//" | sort | paste -sd, -; }

cli_mt_session() {
  local R=/zkcli-c off
  c_open ca || return 0
  local sid=${C_SID[ca]}

  c_cmd ca "create $R"
  check "cli_mt create $R: '[$R]: rc = 0'" line "[$R]: rc = 0"
  check "cli_mt create $R: '${TAB}name = $R'" line "${TAB}name = $R"

  c_cmd ca "get $R"
  check "cli_mt get $R: '$R: rc = 0'" line "$R: rc = 0"
  check "cli_mt get $R: ' value_len = 3' and the data 'new'" eval 'line " value_len = 3" && line "new"'
  check "cli_mt get $R: '${TAB}version=0${TAB}aversion=0'" line "${TAB}version=0${TAB}aversion=0"
  check "cli_mt get $R: '${TAB}ephemeralOwner = 0'" line "${TAB}ephemeralOwner = 0"
  local czxid ctime
  czxid="$(field czxid)"
  check "cli_mt get $R: czxid = mzxid, nonzero hex: '$czxid'" \
    eval '[[ "$czxid" =~ ^[0-9a-f]+$ && "$(field mzxid)" == "$czxid" ]] && (( 16#$czxid > 0 ))'
  ctime="$(sed -n "/^${TAB}ctime = /{s///p;q}" <<<"$OUT")"
  check_time "cli_mt get $R: ctime is now: '$ctime'" "$ctime"

  off="$(sess_size ca)"
  c_cmd ca "set $R hello-c"
  check "cli_mt set $R: '$R: rc = 0 Stat:'" line "$R: rc = 0 Stat:"
  check "cli_mt set $R: '${TAB}version=1${TAB}aversion=0'" line "${TAB}version=1${TAB}aversion=0"
  check "cli_mt set $R: czxid unchanged, mzxid > czxid" \
    eval '[[ "$(field czxid)" == "$czxid" && -n "$(field mzxid)" ]] && (( 16#$(field mzxid) > 16#$czxid ))'
  c_event_check "cli_mt get's watch fires on the same client's set: 'Watcher CHANGED_EVENT state = CONNECTED_STATE for path $R'" \
    ca "$off" CHANGED_EVENT "$R"

  c_cmd ca "get $R"
  check "cli_mt get $R: ' value_len = 7', 'hello-c', version=1" \
    eval 'line " value_len = 7" && line "hello-c" && line "${TAB}version=1${TAB}aversion=0"'

  c_cmd ca "create +s $R/seq-"
  check "cli_mt create +s $R/seq-: '${TAB}name = $R/seq-0000000000'" line "${TAB}name = $R/seq-0000000000"
  c_cmd ca "create +s $R/seq-"
  check "cli_mt create +s $R/seq- again: '${TAB}name = $R/seq-0000000001'" line "${TAB}name = $R/seq-0000000001"

  c_cmd ca "create +e $R/eph"
  check "cli_mt create +e $R/eph: '[$R/eph]: rc = 0', '${TAB}name = $R/eph'" \
    eval 'line "[$R/eph]: rc = 0" && line "${TAB}name = $R/eph"'
  c_cmd ca "get $R/eph"
  check "cli_mt get $R/eph: '${TAB}ephemeralOwner = $sid' (its session id)" line "${TAB}ephemeralOwner = $sid"

  c_cmd ca "ls $R"
  check "cli_mt ls $R: '$R: rc = 0'" line "$R: rc = 0"
  check_eq "cli_mt ls $R: children eph, seq-0000000000, seq-0000000001" "$(c_children)" "eph,seq-0000000000,seq-0000000001"

  c_cmd ca "exists $R"
  check "cli_mt exists $R: no error printed" no_re '^Error'
  c_cmd ca "exists $R/w"
  check "cli_mt exists $R/w (missing): 'Error -101 for $R/w' (ZNONODE)" line "Error -101 for $R/w"

  if c_open cb; then
    c_cmd cb "get $R/eph"
    check "cli_mt (2nd client) get $R/eph: visible, '$R/eph: rc = 0', ephemeralOwner = $sid" \
      eval 'line "$R/eph: rc = 0" && line "${TAB}ephemeralOwner = $sid"'

    off="$(sess_size ca)"
    c_cmd cb "create $R/child"
    check "cli_mt (2nd client) create $R/child: rc = 0" line "[$R/child]: rc = 0"
    c_event_check "cli_mt ls watch fires on the other client's create: 'Watcher CHILD_EVENT state = CONNECTED_STATE for path $R'" \
      ca "$off" CHILD_EVENT "$R"

    off="$(sess_size ca)"
    c_cmd cb "set $R again"
    check "cli_mt (2nd client) set $R: '${TAB}version=2${TAB}aversion=0'" line "${TAB}version=2${TAB}aversion=0"
    c_event_check "cli_mt get watch fires on the other client's set: 'Watcher CHANGED_EVENT state = CONNECTED_STATE for path $R'" \
      ca "$off" CHANGED_EVENT "$R"

    off="$(sess_size ca)"
    c_cmd cb "create $R/w"
    check "cli_mt (2nd client) create $R/w: rc = 0" line "[$R/w]: rc = 0"
    c_event_check "cli_mt exists watch on a missing node fires: 'Watcher CREATED_EVENT state = CONNECTED_STATE for path $R/w'" \
      ca "$off" CREATED_EVENT "$R/w"

    c_cmd ca "get $R/w"
    check "cli_mt get $R/w: rc = 0, data 'new'" eval 'line "$R/w: rc = 0" && line "new"'
    off="$(sess_size ca)"
    c_cmd cb "delete $R/w"
    check "cli_mt (2nd client) delete $R/w: '$R/w: rc = 0'" line "$R/w: rc = 0"
    c_event_check "cli_mt get watch fires on the other client's delete: 'Watcher DELETED_EVENT state = CONNECTED_STATE for path $R/w'" \
      ca "$off" DELETED_EVENT "$R/w"
  fi

  c_cmd ca "delete $R/w"
  check "cli_mt delete $R/w (missing): '$R/w: rc = -101' (ZNONODE)" line "$R/w: rc = -101"
  c_cmd ca "get $R/missing"
  check "cli_mt get $R/missing: '$R/missing: rc = -101'" line "$R/missing: rc = -101"
  c_cmd ca "create $R"
  check "cli_mt create $R again: '[$R]: rc = -110' (ZNODEEXISTS)" line "[$R]: rc = -110"
  c_cmd ca "delete $R"
  check "cli_mt delete $R (has children): '$R: rc = -111' (ZNOTEMPTY)" line "$R: rc = -111"

  sess_send ca "quit"
  if sess_exit ca && [[ "$S_RC" == 0 ]] && grep -qx 'Quitting...' "${S_LOG[ca]}"; then
    ok "cli_mt ca: quit prints 'Quitting...' and the client exits 0"
  else
    not_ok "cli_mt ca: quit prints 'Quitting...' and the client exits 0 (status $S_RC)"
  fi

  # a new client: the ephemeral node went with ca's session
  if c_open cc; then
    c_cmd cc "get $R/eph"
    check "cli_mt (new client) get $R/eph after ca quit: '$R/eph: rc = -101'" line "$R/eph: rc = -101"
    c_cmd cc "exists $R/eph"
    check "cli_mt (new client) exists $R/eph: 'Error -101 for $R/eph'" line "Error -101 for $R/eph"
    c_cmd cc "ls $R"
    check_eq "cli_mt (new client) ls $R: children child, seq-0000000000, seq-0000000001" \
      "$(c_children)" "child,seq-0000000000,seq-0000000001"
    c_cmd cc "delete $R/seq-0000000000"
    check "cli_mt delete $R/seq-0000000000: '$R/seq-0000000000: rc = 0'" line "$R/seq-0000000000: rc = 0"
    sess_send cc "quit"
    sess_exit cc || true
  fi
  if [[ -n "${S_PID[cb]:-}" ]]; then
    sess_send cb "quit"
    sess_exit cb || true
  fi
}

# ================================================================================================
# zkCli config and reconfig against a 3-server ensemble
# ================================================================================================
# Servers 1-3 found the ensemble (reconfigEnabled=true, the super user super:test); server 4 is
# a spare started with a zoo.cfg naming all four, for `reconfig -add`. zkCli prints a config as
# it is stored in /zookeeper/config: one `server.N=host:quorum:election:role;clientHost:clientPort`
# line per member, then `version=<hex zxid>`.
SUPER_DIGEST='super:D/InIHSb7yEEbrWz8b9l71RjZJU=' # super:test
declare -A CL_CPORT=() CL_QPORT=() CL_EPORT=()
cl_line() { echo "server.$1=127.0.0.1:${CL_QPORT[$1]}:${CL_EPORT[$1]}:participant;127.0.0.1:${CL_CPORT[$1]}"; }
# The answer to a four-letter word on a client port, empty if none within 3 s.
cl_4lw() {
  timeout 3 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf %s "$2" >&3 && cat <&3' _ "$1" "$2" 2>/dev/null || true
}
# cl_wait_serving SECONDS ID...: every one of them says Mode: leader/follower.
cl_wait_serving() {
  local deadline=$((SECONDS + $1)) id
  shift
  while :; do
    local all=1
    for id in "$@"; do
      grep -qE '^Mode: (leader|follower)' <<<"$(cl_4lw "${CL_CPORT[$id]}" srvr)" || all=0
    done
    ((all)) && return 0
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
}
cl_start() {
  local id=$1
  ZK_JVM_OPTS="-Dzookeeper.DigestAuthenticationProvider.superDigest=$SUPER_DIGEST" \
    compat_start "$ZKCLI_DIR/cluster/server$id/zoo.cfg" "$ZKCLI_DIR/cluster/server$id/server.log" \
    2>>"$ZKCLI_DIR/cluster/start.err" || true
  if [[ -n "$COMPAT_PID" ]]; then
    CL_PID[$id]=$COMPAT_PID
    echo "$COMPAT_PID" >>"$ZKCLI_DIR/pids"
  fi
  COMPAT_PID=""
}
# OUT's lines that describe a configuration, sorted: server lines and version=.
config_lines() { grep -E '^(server\.[0-9]+=|version=)' <<<"$OUT" | sort || true; }
# The lines a configuration of members ID... prints (sorted), the version left out.
members_lines() { local id; for id in "$@"; do cl_line "$id"; done | sort; }
# check_config DESC ID...: OUT holds exactly the server lines of ID... and one version= line;
# sets CL_VERSION to that version.
CL_VERSION=""
check_config() {
  local desc=$1 got want
  shift
  CL_VERSION="$(sed -n 's/^version=\([0-9a-f][0-9a-f]*\)$/\1/p' <<<"$OUT" | head -n1)"
  got="$(config_lines | grep -v '^version=' || true)"
  want="$(members_lines "$@")"
  if [[ "$got" == "$want" && -n "$CL_VERSION" && "$(config_lines | grep -c '^version=')" == 1 ]]; then
    ok "$desc"
  else
    not_ok "$desc"
    echo "#   want the lines:"
    { echo "$want"; echo "version=<hex>"; } | comment
    show_out
  fi
}

cluster_section() {
  local id c j
  mkdir -p "$ZKCLI_DIR/cluster"
  for id in 1 2 3 4; do
    CL_CPORT[$id]=$(free_port)
    CL_QPORT[$id]=$(free_port)
    CL_EPORT[$id]=$(free_port)
  done
  for id in 1 2 3 4; do
    mkdir -p "$ZKCLI_DIR/cluster/server$id/data"
    echo "$id" >"$ZKCLI_DIR/cluster/server$id/data/myid"
    {
      echo "tickTime=1000"
      echo "initLimit=5"
      echo "syncLimit=2"
      echo "dataDir=$ZKCLI_DIR/cluster/server$id/data"
      echo "clientPort=${CL_CPORT[$id]}"
      echo "clientPortAddress=127.0.0.1"
      echo "4lw.commands.whitelist=*"
      echo "reconfigEnabled=true"
      echo "DigestAuthenticationProvider.superDigest=$SUPER_DIGEST"
      # The founders name the founders; the spare names everyone, itself included.
      for j in 1 2 3 $([[ $id == 4 ]] && echo 4); do
        echo "server.$j=127.0.0.1:${CL_QPORT[$j]}:${CL_EPORT[$j]};127.0.0.1:${CL_CPORT[$j]}"
      done
    } >"$ZKCLI_DIR/cluster/server$id/zoo.cfg"
  done
  echo "# cluster: $COMPAT_SERVER servers 1-3 on client ports ${CL_CPORT[1]} ${CL_CPORT[2]} ${CL_CPORT[3]}, spare 4 on ${CL_CPORT[4]}"
  for id in 1 2 3; do cl_start "$id"; done
  if cl_wait_serving 60 1 2 3; then
    ok "cluster: $COMPAT_SERVER servers 1-3 serve (srvr: Mode: leader/follower)"
  else
    not_ok "cluster: $COMPAT_SERVER servers 1-3 serve (srvr: Mode: leader/follower)"
    comment <"$ZKCLI_DIR/cluster/start.err"
    for id in 1 2 3; do echo "# server.$id:"; tail -n 15 "$ZKCLI_DIR/cluster/server$id/server.log" | comment; done
    return 0
  fi
  cl_start 4

  # Both sessions on server 1, which stays a member throughout.
  local saved=("${JAVA_CLI[@]}")
  JAVA_CLI=(java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1
    -Dorg.slf4j.simpleLogger.defaultLogLevel=warn
    -cp "${ZK_HOME:-.}/lib/*" org.apache.zookeeper.ZooKeeperMain -server "127.0.0.1:${CL_CPORT[1]}")
  j_open rs || { JAVA_CLI=("${saved[@]}"); return 0; }
  j_open rn || true

  j_cmd rs "config"
  check_config "zkCli config: the founding members as 'server.N=127.0.0.1:quorum:election:participant;127.0.0.1:client' lines and 'version=<hex>'" 1 2 3
  local v0=$CL_VERSION
  j_cmd rs "config -s"
  check "zkCli config -s: the Stat of /zookeeper/config follows ('dataLength = ...', 'numChildren = 0')" \
    eval 'line "numChildren = 0" && [[ "$(field dataLength)" =~ ^[1-9][0-9]*$ ]]'
  check "zkCli config -s: mZxid = 0x<version> ('mZxid = 0x$v0')" line "mZxid = 0x$v0"
  check "zkCli config -s: 'dataVersion = -1' (a reconfig writes the config with version -1)" \
    line "dataVersion = -1"

  if [[ -n "${S_PID[rn]:-}" ]]; then
    j_cmd rn "reconfig -remove 3"
    check "zkCli reconfig -remove 3 without auth: 'Insufficient permission : ' (NoAuth)" \
      line "Insufficient permission : "
  fi

  j_cmd rs "addauth digest super:test"
  check "zkCli addauth digest super:test: prints nothing" eval '[[ -z "$OUT" ]]'

  local wrong
  wrong="$(printf '%x' $((16#${v0:-0} + 1)))"
  j_cmd rs "reconfig -remove 3 -v $wrong"
  check "zkCli reconfig -remove 3 -v $wrong (not the version $v0): 'version No is not valid : ' (BadVersion)" \
    line "version No is not valid : "

  j_cmd rs "reconfig -remove 3 -v $v0"
  check "zkCli reconfig -remove 3 -v $v0: first line 'Committed new configuration:'" \
    eval '[[ "$(first_line)" == "Committed new configuration:" ]]'
  check_config "zkCli reconfig -remove 3: the new configuration, servers 1 and 2, new version" 1 2
  local v1=$CL_VERSION
  check "zkCli reconfig -remove 3: the version grew ($v0 -> $v1)" eval '(( 16#${v1:-0} > 16#${v0:-0} ))'

  j_cmd rs "config -s"
  check_config "zkCli config after the removal: servers 1 and 2, version $v1" 1 2
  check_eq "zkCli config after the removal: version" "$CL_VERSION" "$v1"
  check "zkCli config -s after the removal: 'mZxid = 0x$v1', 'dataVersion = -1'" \
    eval 'line "mZxid = 0x$v1" && line "dataVersion = -1"'

  j_cmd rs "reconfig -add $(cl_line 4)"
  check "zkCli reconfig -add server.4=...: first line 'Committed new configuration:'" \
    eval '[[ "$(first_line)" == "Committed new configuration:" ]]'
  check_config "zkCli reconfig -add server.4=...: servers 1, 2 and 4" 1 2 4
  local v2=$CL_VERSION

  j_cmd rs "reconfig -add server.5=127.0.0.1:${CL_QPORT[3]}:${CL_EPORT[3]}"
  check "zkCli reconfig -add server.5=host:quorum:election (no client port): 'Arguments are not valid : ' (BadArguments)" \
    line "Arguments are not valid : "

  # ZooKeeper makes a change to the members there already are, with a new version.
  j_cmd rs "reconfig -members $(cl_line 1),$(cl_line 2),$(cl_line 4)"
  check_config "zkCli reconfig -members with the current members: committed as they are" 1 2 4
  check "zkCli reconfig -members with the current members: a new version ($v2 -> $CL_VERSION)" \
    eval '(( 16#${CL_VERSION:-0} > 16#${v2:-0} ))'
  v2=$CL_VERSION

  j_cmd rs "reconfig -members $(cl_line 1),$(cl_line 2)"
  check "zkCli reconfig -members server.1=...,server.2=...: first line 'Committed new configuration:'" \
    eval '[[ "$(first_line)" == "Committed new configuration:" ]]'
  check_config "zkCli reconfig -members server.1=...,server.2=...: servers 1 and 2" 1 2
  local v3=$CL_VERSION
  check "zkCli reconfig -members: the version grew ($v2 -> $v3)" eval '(( 16#${v3:-0} > 16#${v2:-0} ))'

  j_cmd rs "reconfig -remove 2"
  check "zkCli reconfig -remove 2 (one voter would be left; standaloneEnabled): 'Arguments are not valid : ' (BadArguments)" \
    line "Arguments are not valid : "

  if [[ -n "${S_PID[rn]:-}" ]]; then
    j_cmd rn "config"
    check_config "zkCli config without auth (anyone may read it): servers 1 and 2" 1 2
    check_eq "zkCli config without auth: version" "$CL_VERSION" "$v3"
    sess_send rn "quit"
    sess_exit rn || true
  fi
  sess_send rs "quit"
  sess_exit rs || true
  JAVA_CLI=("${saved[@]}")
  cl_stop
}

# ================================================================================================
# SASL: zkCli with a JAAS Client section (DIGEST-MD5) against a server whose JAAS Server
# section has the users, given as an operator gives it to zkServer.sh (SERVER_JVMFLAGS, which
# Warden and scripts/zookeeper/run.sh both read).
# ================================================================================================
sasl_section() {
  local dir="$ZKCLI_DIR/sasl" port hp user password
  mkdir -p "$dir/data"
  port="$(free_port)"
  hp="127.0.0.1:$port"
  printf '%s\n' 'Server {' '  org.apache.zookeeper.server.auth.DigestLoginModule required' \
    '  user_super="super_secret"' '  user_jaasuser="jaas_password";' '};' >"$dir/server-jaas.conf"
  for user in jaasuser wrong; do
    password=jaas_password
    [[ "$user" == wrong ]] && password=not_the_password
    printf '%s\n' 'Client {' '  org.apache.zookeeper.server.auth.DigestLoginModule required' \
      '  username="jaasuser"' "  password=\"$password\";" '};' >"$dir/client-$user.conf"
  done
  printf '%s\n' tickTime=2000 "dataDir=$dir/data" "clientPort=$port" clientPortAddress=127.0.0.1 \
    authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider \
    '4lw.commands.whitelist=*' >"$dir/zoo.cfg"
  export SERVER_JVMFLAGS="-Djava.security.auth.login.config=$dir/server-jaas.conf"
  if compat_start "$dir/zoo.cfg" "$dir/server.log" 2>"$dir/start.err"; then
    unset SERVER_JVMFLAGS
    echo "$COMPAT_PID" >>"$ZKCLI_DIR/pids"
    ok "$COMPAT_SERVER with JAAS users listens on $hp"
  else
    unset SERVER_JVMFLAGS
    [[ -n "$COMPAT_PID" ]] && echo "$COMPAT_PID" >>"$ZKCLI_DIR/pids"
    not_ok "$COMPAT_SERVER with JAAS users listens on $hp"
    comment <"$dir/start.err"
    return 0
  fi
  local saved=("${JAVA_CLI[@]}")
  # sasl_shot JAAS-FILE|none ARGS...: a one-shot zkCli on this server with that JAAS file
  # (none: no SASL).
  sasl_shot() {
    local jaas=$1
    shift
    JAVA_CLI=(java)
    # The 3.9 client uses DIGEST-MD5 only outside FIPS mode, which is on by default.
    [[ "$jaas" == none ]] || JAVA_CLI+=("-Djava.security.auth.login.config=$jaas" -Dzookeeper.fips-mode=false)
    JAVA_CLI+=("${saved[@]:1}")
    JAVA_CLI[${#JAVA_CLI[@]} - 1]="$hp"
    j_shot "$@"
  }
  sasl_shot "$dir/client-jaasuser.conf" create /sasl-node secret sasl:jaasuser:cdrwa
  check "zkCli as SASL user jaasuser: create /sasl-node with ACL sasl:jaasuser:cdrwa" line "Created /sasl-node"
  sasl_shot "$dir/client-jaasuser.conf" get /sasl-node
  check "zkCli as SASL user jaasuser: get /sasl-node prints 'secret'" line "secret"
  sasl_shot "$dir/client-jaasuser.conf" getAcl /sasl-node
  check "zkCli getAcl /sasl-node: 'sasl,'jaasuser' with cdrwa" eval "line \"'sasl,'jaasuser\" && line ': cdrwa'"
  sasl_shot none get /sasl-node
  check "zkCli without SASL: get /sasl-node is refused (NoAuth)" line "Insufficient permission : /sasl-node"
  sasl_shot "$dir/client-wrong.conf" get /sasl-node
  check "zkCli with a wrong SASL password: get /sasl-node does not print the data" no_re '^secret$'
  JAVA_CLI=("${saved[@]}")
  still_running "$COMPAT_SERVER with JAAS users" "$dir/server.log"
  compat_stop || true
}

# ================================================================================================
# tls: zkCli over TLS, as ZooKeeper's admin guide configures it: the server's secureClientPort
# with a PKCS#12 key store and a JKS trust store (both ZooKeeper's own formats: keytool makes
# them), the client with zookeeper.client.secure=true, the Netty socket and a PKCS#12 key store
# of its own certificate; its x509 id (the certificate's subject) in an ACL.
# ================================================================================================
tls_section() {
  local dir="$ZKCLI_DIR/tls" port sport shp name pw=tlspassword
  mkdir -p "$dir/data"
  port="$(free_port)"
  sport="$(free_port)"
  shp="127.0.0.1:$sport"
  (
    cd "$dir" || exit 1
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj "/CN=zkcli CA"
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >server.ext
    for name in server zkcli other; do
      openssl req -newkey rsa:2048 -nodes -keyout "$name.key" -out "$name.csr" -subj "/CN=$name"
      ext=()
      [[ "$name" == server ]] && ext=(-extfile server.ext)
      openssl x509 -req -in "$name.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -out "$name.pem" \
        -days 2 "${ext[@]}"
      openssl pkcs12 -export -inkey "$name.key" -in "$name.pem" -out "$name.p12" -passout "pass:$pw"
    done
    keytool -importcert -noprompt -alias ca -file ca.pem -keystore trust.jks -storetype JKS \
      -storepass "$pw"
  ) >"$dir/certs.log" 2>&1 || { not_ok "TLS certificates and stores made with openssl and keytool"; comment <"$dir/certs.log"; return 0; }
  printf '%s\n' tickTime=2000 "dataDir=$dir/data" "clientPort=$port" clientPortAddress=127.0.0.1 \
    "secureClientPort=$sport" secureClientPortAddress=127.0.0.1 \
    serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory \
    authProvider.x509=org.apache.zookeeper.server.auth.X509AuthenticationProvider \
    "ssl.keyStore.location=$dir/server.p12" "ssl.keyStore.password=$pw" \
    "ssl.trustStore.location=$dir/trust.jks" "ssl.trustStore.password=$pw" \
    '4lw.commands.whitelist=*' >"$dir/zoo.cfg"
  if compat_start "$dir/zoo.cfg" "$dir/server.log" 2>"$dir/start.err"; then
    echo "$COMPAT_PID" >>"$ZKCLI_DIR/pids"
    ok "$COMPAT_SERVER with a secure client port listens on 127.0.0.1:$port"
  else
    [[ -n "$COMPAT_PID" ]] && echo "$COMPAT_PID" >>"$ZKCLI_DIR/pids"
    not_ok "$COMPAT_SERVER with a secure client port listens on 127.0.0.1:$port"
    comment <"$dir/start.err"
    return 0
  fi
  # The secure port opens just after the plain one.
  for _ in $(seq 1 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$sport") 2>/dev/null && break
    sleep 0.1
  done
  local saved=("${JAVA_CLI[@]}")
  # tls_shot CERT|plain ARGS...: a one-shot zkCli over TLS showing CERT's certificate (plain:
  # no TLS, on the plain port).
  tls_shot() {
    local cert=$1
    shift
    JAVA_CLI=(java)
    if [[ "$cert" != plain ]]; then
      JAVA_CLI+=(-Dzookeeper.client.secure=true
        -Dzookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty
        "-Dzookeeper.ssl.keyStore.location=$dir/$cert.p12" "-Dzookeeper.ssl.keyStore.password=$pw"
        "-Dzookeeper.ssl.trustStore.location=$dir/trust.jks" "-Dzookeeper.ssl.trustStore.password=$pw")
    fi
    JAVA_CLI+=("${saved[@]:1}")
    if [[ "$cert" != plain ]]; then
      JAVA_CLI[${#JAVA_CLI[@]} - 1]="$shp"
    else
      JAVA_CLI[${#JAVA_CLI[@]} - 1]="127.0.0.1:$port"
    fi
    j_shot "$@"
  }
  tls_shot zkcli create /tls-node secret x509:CN=zkcli:cdrwa
  check "zkCli over TLS (PKCS#12 key store, JKS trust store): create /tls-node with ACL x509:CN=zkcli:cdrwa" line "Created /tls-node"
  tls_shot zkcli get /tls-node
  check "zkCli over TLS as CN=zkcli: get /tls-node prints 'secret'" line "secret"
  tls_shot zkcli getAcl /tls-node
  check "zkCli getAcl /tls-node: 'x509,'CN=zkcli with cdrwa" eval "line \"'x509,'CN=zkcli\" && line ': cdrwa'"
  tls_shot zkcli whoami
  check "zkCli whoami over TLS: 'x509: CN=zkcli'" line "x509: CN=zkcli"
  tls_shot other get /tls-node
  check "zkCli over TLS as CN=other: get /tls-node is refused (NoAuth)" line "Insufficient permission : /tls-node"
  tls_shot plain get /tls-node
  check "zkCli without TLS on the plain port: get /tls-node is refused (NoAuth)" line "Insufficient permission : /tls-node"
  JAVA_CLI=("${saved[@]}")
  still_running "$COMPAT_SERVER with a secure client port" "$dir/server.log"
  compat_stop || true
}

if section single && single_server_start; then
  T0=$SECONDS
  if ((JAVA_OK)); then
    zkcli_session
    zkcli_quota_session
    echo "# zkCli sessions took $((SECONDS - T0)) s"
  fi
  T0=$SECONDS
  if ((C_OK)); then
    cli_mt_session
    echo "# cli_mt sessions took $((SECONDS - T0)) s"
  fi

  still_running "$COMPAT_SERVER after both sessions" "$SERVER_LOG"
  compat_stop || true
fi

if section sasl && ((JAVA_OK)); then
  T0=$SECONDS
  sasl_section
  echo "# sasl section took $((SECONDS - T0)) s"
fi

if section tls && ((JAVA_OK)); then
  T0=$SECONDS
  tls_section
  echo "# tls section took $((SECONDS - T0)) s"
fi

if section cluster && ((JAVA_OK)); then
  T0=$SECONDS
  cluster_section
  echo "# cluster section took $((SECONDS - T0)) s"
fi
