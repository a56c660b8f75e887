#!/usr/bin/env bash
# Warden's fault suite (docs/faults.md): real go-zookeeper clients (and one Java client, for a
# persistent watch) against a real 3-server cluster in network namespaces while a seeded nemesis
# kills, pauses, partitions and damages servers; the history is checked (porcupine for
# linearizability, and what ZooKeeper promises for sets, unique ids, queues, locks, watches and
# persistent watches).
#
#   scripts/faults/run.sh                    the short profile: the checkers' own tests, then
#                                            Warden (all nemeses), Warden with every read
#                                            linearizable, and ZooKeeper 3.9.5 as the reference
#   FAULTS_PROFILE=long scripts/faults/run.sh    the long profile (120 episodes, overlapping
#                                            faults) for each, about an hour in all
#   FAULTS_SEED=N                            the seed (default: a new one, printed); the same
#                                            seed injects the same faults at the same points
#   FAULTS_SYSTEMS="warden zookeeper"        which runs (warden, warden-linearizable, zookeeper)
#   FAULTS_ARGS="-nemeses kill-leader"       more flags for every run (see `faults -help`)
#
# Needs root (namespaces, iptables) and iptables (installed here with apt-get when missing).
# Each run prints its seed, the faults with their times, operations per outcome and the
# verdicts, and keeps its history and the servers' logs in .cache/faults/runs/<system>-<seed>.
# Prints `faults NAME: N passed, M failed` per system; the exit status is non-zero iff a Warden
# run failed (ZooKeeper's verdicts are the reference: they are reported, not required).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
CACHE="$REPO/.cache/faults"
PROFILE="${FAULTS_PROFILE:-short}"
SEED="${FAULTS_SEED:-$(( (RANDOM << 15 | RANDOM) + 1 ))}"
SYSTEMS="${FAULTS_SYSTEMS:-warden warden-linearizable zookeeper}"
read -r -a EXTRA <<<"${FAULTS_ARGS:-}"

if [[ "$(id -u)" != 0 ]]; then
  echo "faults/run.sh: needs root (network namespaces and iptables)" >&2
  exit 2
fi
if ! command -v iptables >/dev/null; then
  echo "faults/run.sh: installing iptables" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iptables >/dev/null ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iptables >/dev/null; }
fi

export GOMODCACHE="$CACHE/gomodcache" GOCACHE="$CACHE/gocache" GOPATH="$CACHE/gopath"
# GOSUMDB off: the modules are checked against the committed go.sum instead.
export GOFLAGS="-buildvcs=false" GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0 GOSUMDB=off
mkdir -p "$CACHE/runs"
(cd "$HERE" && go test ./... >"$CACHE/checkers-test.out" 2>&1) || {
  cat "$CACHE/checkers-test.out" >&2
  echo "faults/run.sh: the checkers' own tests failed" >&2
  exit 1
}
echo "faults: the checkers catch the deliberately wrong histories ($(grep -c '^ok\|^---' "$CACHE/checkers-test.out" || true) package(s) tested)"
(cd "$HERE" && go build -o "$CACHE/faults" .)

# ZooKeeper 3.9.5's jars: the reference servers, and the Java client of the persistent watcher.
ZK_LIB="$("$REPO/scripts/zookeeper/install.sh")/lib"
WARDEN_BIN="${WARDEN_BIN:-$REPO/target/release/warden}"
if [[ ! -x "$WARDEN_BIN" ]]; then
  (cd "$REPO" && cargo build --release --locked -p warden >&2)
fi
status=0
for system in $SYSTEMS; do
  case "$system" in
    warden) args=(-system warden -binary "$WARDEN_BIN") ;;
    warden-linearizable)
      # Half the episodes: the same nemeses, every read checked as linearizable.
      args=(-system warden -binary "$WARDEN_BIN" -linearizable-reads)
      [[ "$PROFILE" == short ]] && args+=(-episodes 6) ;;
    zookeeper)
      args=(-system zookeeper -binary "$REPO/scripts/zookeeper/run.sh") ;;
    *) echo "faults/run.sh: unknown system '$system'" >&2; exit 2 ;;
  esac
  echo "== faults: $system (profile $PROFILE, seed $SEED)"
  # The suite bounds itself; this is the backstop if it hangs anyway (it then leaves no
  # servers: they are in its process groups' care, see teardown).
  bound=$([[ "$PROFILE" == long ]] && echo 7200 || echo 900)
  if timeout --signal=TERM --kill-after=30 "$bound" "$CACHE/faults" "${args[@]}" -profile "$PROFILE" \
      -seed "$SEED" -out "$CACHE/runs" -zookeeper-lib "$ZK_LIB" "${EXTRA[@]}"; then
    echo "faults $system: 1 passed, 0 failed"
  else
    if [[ "$system" == zookeeper ]]; then
      echo "faults $system: the reference run did not pass (see above); not counted"
    else
      echo "faults $system: 0 passed, 1 failed"
      status=1
    fi
  fi
done
exit "$status"
