#!/usr/bin/env bash
# Run Apache ZooKeeper 3.9.5 in the foreground with the given zoo.cfg.
#
#   scripts/zookeeper/run.sh <zoo.cfg>
#
# Standalone (no server.N lines) -> org.apache.zookeeper.server.ZooKeeperServerMain
# Ensemble   (server.N lines, or dynamicConfigFile, which ZooKeeper writes into zoo.cfg after
#            a reconfig in place of the server.N lines)
#                                -> org.apache.zookeeper.server.quorum.QuorumPeerMain
# (override with ZK_MAIN=<class>).
#
# Environment:
#   ZK_HEAP       max heap, default 2g (-Xmx and -Xms)
#   ZK_JVM_OPTS   extra JVM options, e.g. "-Dzookeeper.extendedTypesEnabled=true"
#   SERVER_JVMFLAGS, JVMFLAGS  also passed to the JVM, after ZK_JVM_OPTS, as zkServer.sh passes
#                 them (e.g. "-Djava.security.auth.login.config=jaas.conf"; Warden reads its
#                 JAAS settings from the same variables)
#   ZK_LOG_LEVEL  slf4j-simple default level (default info)
#   WARDEN_CACHE  cache dir (default <repo>/.cache)
# The AdminServer (HTTP) is disabled: install.sh does not fetch Jetty. Four-letter words work on
# the client port when zoo.cfg has 4lw.commands.whitelist (see scripts/zookeeper/4lw.sh).
# Installs ZooKeeper first if needed (scripts/zookeeper/install.sh). `exec`s java, so this
# script's PID is the java process: stop it with `kill <pid>`.
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 <zoo.cfg>" >&2
  exit 2
fi
CFG="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
[[ -f "$CFG" ]] || { echo "run.sh: no such config: $1" >&2; exit 2; }

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ZK_HOME="$("$HERE/install.sh")"

MAIN="${ZK_MAIN:-}"
if [[ -z "$MAIN" ]]; then
  if grep -Eq '^[[:space:]]*(server\.[0-9]+|dynamicConfigFile)[[:space:]]*=' "$CFG"; then
    MAIN=org.apache.zookeeper.server.quorum.QuorumPeerMain
  else
    MAIN=org.apache.zookeeper.server.ZooKeeperServerMain
  fi
fi

HEAP="${ZK_HEAP:-2g}"
# shellcheck disable=SC2086
exec java \
  -Xms"$HEAP" -Xmx"$HEAP" \
  -XX:+UseG1GC \
  -Dorg.slf4j.simpleLogger.defaultLogLevel="${ZK_LOG_LEVEL:-info}" \
  -Dorg.slf4j.simpleLogger.showDateTime=true \
  -Dorg.slf4j.simpleLogger.dateTimeFormat="yyyy-MM-dd'T'HH:mm:ss.SSS" \
  -Dorg.slf4j.simpleLogger.logFile=System.err \
  -Dzookeeper.admin.enableServer="${ZK_ADMIN_SERVER:-false}" \
  ${ZK_JVM_OPTS:-} ${SERVER_JVMFLAGS:-} ${JVMFLAGS:-} \
  -cp "$ZK_HOME/lib/*" \
  "$MAIN" "$CFG"
