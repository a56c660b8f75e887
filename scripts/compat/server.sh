#!/usr/bin/env bash
# Shared by the compatibility suites: start the server under test from a zoo.cfg and stop it.
# Source it, then:
#
#   compat_start <zoo.cfg> <log file>   starts the server, waits until its client port accepts
#                                       connections (60 s at most), sets COMPAT_PID
#   compat_stop                         SIGTERM, then SIGKILL after 10 s, by PID
#   compat_server_command <zoo.cfg>     prints the command that runs the server in the
#                                       foreground (its PID is the server's), for harnesses
#                                       that start servers themselves
#
# COMPAT_SERVER chooses the server: `warden` (default) runs `$WARDEN_BIN server --zoo-cfg CFG`
# (WARDEN_BIN defaults to target/release/warden, built here if missing); `zookeeper` runs Apache
# ZooKeeper 3.9.5 through scripts/zookeeper/run.sh, the reference the suites are checked against.

COMPAT_REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
COMPAT_SERVER="${COMPAT_SERVER:-warden}"
COMPAT_PID=""

compat_warden_bin() {
  local bin="${WARDEN_BIN:-$COMPAT_REPO/target/release/warden}"
  if [[ ! -x "$bin" ]]; then
    (cd "$COMPAT_REPO" && cargo build --release --locked -p warden >&2)
  fi
  echo "$bin"
}

# The client port and address a zoo.cfg names (clientPort / clientPortAddress).
compat_cfg_value() {
  sed -n "s/^[[:space:]]*$2[[:space:]]*=[[:space:]]*\\([^[:space:]]*\\).*/\\1/p" "$1" | tail -n1
}

compat_server_command() {
  case "$COMPAT_SERVER" in
    warden) echo "$(compat_warden_bin)" server --zoo-cfg "$1" ;;
    zookeeper) echo "$COMPAT_REPO/scripts/zookeeper/run.sh" "$1" ;;
    *) echo "COMPAT_SERVER must be warden or zookeeper, not '$COMPAT_SERVER'" >&2; return 2 ;;
  esac
}

compat_start() {
  local cfg="$1" log="$2" cmd
  cmd="$(compat_server_command "$cfg")" || return 2
  read -r -a cmd <<<"$cmd"
  "${cmd[@]}" >"$log" 2>&1 &
  COMPAT_PID=$!
  local port host
  port="$(compat_cfg_value "$cfg" clientPort)"
  host="$(compat_cfg_value "$cfg" clientPortAddress)"
  host="${host:-127.0.0.1}"
  for _ in $(seq 1 600); do
    if (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; then
      return 0
    fi
    if ! kill -0 "$COMPAT_PID" 2>/dev/null; then
      echo "server exited before listening on $host:$port; its log:" >&2
      tail -n 50 "$log" >&2
      return 1
    fi
    sleep 0.1
  done
  echo "server did not listen on $host:$port within 60 s" >&2
  return 1
}

compat_stop() {
  [[ -n "$COMPAT_PID" ]] || return 0
  kill "$COMPAT_PID" 2>/dev/null || true
  for _ in $(seq 1 100); do
    kill -0 "$COMPAT_PID" 2>/dev/null || { wait "$COMPAT_PID" 2>/dev/null || true; COMPAT_PID=""; return 0; }
    sleep 0.1
  done
  kill -9 "$COMPAT_PID" 2>/dev/null || true
  wait "$COMPAT_PID" 2>/dev/null || true
  COMPAT_PID=""
}
