#!/usr/bin/env bash
# Loopback TCP ports for the servers a test script starts. Source it, then:
#
#   free_port      prints a port with no socket on it now (none listening, none bound by a
#                  connection), below the kernel's range of ephemeral ports: an outgoing
#                  connection is never given such a port, so nothing else takes it between the
#                  pick and the server's bind (a pick inside that range once failed the package
#                  test with "Address already in use")
#   take_port VAR  the same into VAR, and never a port take_port handed out before in this
#                  shell; call it in the current shell, not in $(...), so that it remembers

PORTS_TAKEN=" "

free_port() {
  local low=20000 high p
  # The ephemeral range's first port; Linux's default is 32768.
  read -r high _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || high=32768
  # A range moved down below ours: use the ports above it instead.
  if ((high < low + 1000)); then
    read -r _ low </proc/sys/net/ipv4/ip_local_port_range
    low=$((low + 1)) high=65536
  fi
  if ((high < low + 1000)); then
    echo "free_port: the ephemeral ports leave too few others ($low-$((high - 1)))" >&2
    return 1
  fi
  for _ in $(seq 1 200); do
    p=$((low + RANDOM % (high - low)))
    if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then continue; fi
    if command -v ss >/dev/null 2>&1 && [[ -n "$(ss -Htan "sport = :$p" 2>/dev/null)" ]]; then
      continue
    fi
    echo "$p"
    return 0
  done
  echo "free_port: no free port found in $low-$((high - 1))" >&2
  return 1
}

take_port() {
  local -n _taken_port=$1
  local _take_port_p
  while :; do
    _take_port_p="$(free_port)" || return 1
    [[ "$PORTS_TAKEN" == *" $_take_port_p "* ]] || break
  done
  PORTS_TAKEN+="$_take_port_p "
  _taken_port=$_take_port_p
}
