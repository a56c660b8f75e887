#!/usr/bin/env bash
# Send a four-letter word to a ZooKeeper (or Warden) server and print the answer.
#   scripts/zookeeper/4lw.sh <cmd> [port] [host]      e.g.  4lw.sh ruok 2181
# Uses bash's /dev/tcp (no nc needed). Times out after ${FLW_TIMEOUT:-5}s.
set -euo pipefail
CMD="${1:?usage: $0 <cmd> [port] [host]}"
PORT="${2:-2181}"
HOST="${3:-127.0.0.1}"
exec timeout "${FLW_TIMEOUT:-5}" bash -c '
  exec 3<>"/dev/tcp/$1/$2" || exit 1
  printf "%s" "$3" >&3
  cat <&3
' _ "$HOST" "$PORT" "$CMD"
