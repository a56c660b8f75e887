#!/usr/bin/env bash
# Runs the server under test (COMPAT_SERVER, see scripts/compat/server.sh) on the zoo.cfg given,
# in the foreground: `exec`, so the caller's child PID is the server's own (the Curator suites'
# ExternalServerMain stops and kills it by that PID).
set -euo pipefail
# shellcheck source=../server.sh
source "$(dirname "${BASH_SOURCE[0]}")/../server.sh"
read -r -a cmd <<<"$(compat_server_command "$1")"
exec "${cmd[@]}"
