#!/usr/bin/env bash
# Stand-in for ZooKeeper's bin/zkServer.sh, for go-zookeeper's test harness
# (server_java_test.go runs `$ZOOKEEPER_BIN_PATH/zkServer.sh start-foreground <zoo.cfg>`).
#
#   zkServer.sh start-foreground <zoo.cfg>
#
# Like the real script, it takes extra JVM flags from JVMFLAGS and SERVER_JVMFLAGS (the harness
# puts the superDigest, extendedTypesEnabled and emulate353TTLNodes there). Each -D flag that
# ZooKeeper would also accept as a zoo.cfg key becomes a line in a copy of the config,
# <cfg dir>/zoo.compat.cfg:
#   -Dzookeeper.<key>=<value>                 -> <key>=<value>   (ZooKeeper maps zoo.cfg keys
#                                                                  it does not know to zookeeper.<key>)
#   -Djute.maxbuffer / -Dznode.container.* / -Dreadonlymode.enabled -> as they are (Warden reads
#                                                                  them from zoo.cfg)
# Other flags are left out of the copy. Everything else in the config (server.N lines included)
# is copied as it is.
#
# Then it `exec`s the server under test in the foreground, so this script's PID is the
# server's: the harness stops servers by cancelling exec.CommandContext, i.e. SIGKILL to that
# PID, and waits for its stdout/stderr pipes to close, so nothing may be left behind.
#   COMPAT_SERVER=warden (default)  $WARDEN_BIN server --zoo-cfg <copy>
#   COMPAT_SERVER=zookeeper         scripts/zookeeper/run.sh <copy>, the JVM flags in ZK_JVM_OPTS
#                                   (heap ZK_HEAP, 512m unless set)
# If GOZK_PID_DIR is set, the PID is recorded there (a file named after it, holding the config
# path) so the runner can kill servers the test binary left behind.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../../../.." && pwd)"

usage() {
  echo "usage: $0 start-foreground <zoo.cfg>  (the only command of zkServer.sh this stand-in has)" >&2
  exit 2
}

[[ $# -ge 1 ]] || usage
case "$1" in
  start-foreground) ;;
  *) echo "zkServer.sh: unsupported command '$1'" >&2; usage ;;
esac
[[ $# -eq 2 ]] || usage
[[ -f "$2" ]] || { echo "zkServer.sh: no such config: $2" >&2; exit 2; }

CFG="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"
COPY="$(dirname "$CFG")/zoo.compat.cfg"
[[ "$COPY" != "$CFG" ]] || COPY="$(dirname "$CFG")/zoo.compat2.cfg"

FLAGS="${JVMFLAGS:-} ${SERVER_JVMFLAGS:-}"
{
  cat "$CFG"
  # A file not ending in a newline must not swallow our first line.
  [[ -z "$(tail -c1 "$CFG")" ]] || echo
  echo "# from JVMFLAGS/SERVER_JVMFLAGS by scripts/compat/go-zookeeper/bin/zkServer.sh"
  # Split on whitespace, as the real zkServer.sh does (it expands the variables unquoted).
  read -r -a words <<<"$FLAGS" || true
  for word in "${words[@]}"; do
    [[ "$word" == -D*=* ]] || continue
    prop="${word#-D}"
    key="${prop%%=*}"
    value="${prop#*=}"
    case "$key" in
      zookeeper.*) echo "${key#zookeeper.}=$value" ;;
      jute.maxbuffer | znode.container.* | readonlymode.enabled) echo "$key=$value" ;;
      *) ;;
    esac
  done
} >"$COPY.tmp"
mv -f "$COPY.tmp" "$COPY"

if [[ -n "${GOZK_PID_DIR:-}" && -d "$GOZK_PID_DIR" ]]; then
  echo "$COPY" >"$GOZK_PID_DIR/$$"
fi

case "${COMPAT_SERVER:-warden}" in
  warden)
    BIN="${WARDEN_BIN:-$REPO/target/release/warden}"
    [[ -x "$BIN" ]] || { echo "zkServer.sh: no warden binary at $BIN (set WARDEN_BIN)" >&2; exit 1; }
    exec "$BIN" server --zoo-cfg "$COPY"
    ;;
  zookeeper)
    export ZK_JVM_OPTS="${ZK_JVM_OPTS:-} $FLAGS"
    export ZK_HEAP="${ZK_HEAP:-512m}"
    exec "$REPO/scripts/zookeeper/run.sh" "$COPY"
    ;;
  *)
    echo "zkServer.sh: COMPAT_SERVER must be warden or zookeeper, not '$COMPAT_SERVER'" >&2
    exit 2
    ;;
esac
