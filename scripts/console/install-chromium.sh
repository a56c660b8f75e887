#!/usr/bin/env bash
# Installs Debian's chromium and chromium-driver, which the web console's browser test
# (crates/warden/tests/console.rs) drives headless, unless they are there already. Needs root
# (or sudo) and a Debian mirror; `apt-get update` only when apt does not know the packages.
set -euo pipefail
if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then
  exit 0
fi
SUDO=()
if (( EUID != 0 )); then SUDO=(sudo -n); fi
apt_opts=(-o DPkg::Lock::Timeout=300)
export DEBIAN_FRONTEND=noninteractive
if ! apt-cache show chromium chromium-driver >/dev/null 2>&1; then
  "${SUDO[@]}" apt-get "${apt_opts[@]}" update -qq
fi
"${SUDO[@]}" apt-get "${apt_opts[@]}" install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
command -v chromium >/dev/null && command -v chromedriver >/dev/null
