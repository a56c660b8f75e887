#!/usr/bin/env bash
# The Debian package, built, inspected, installed, started as its systemd unit says, used,
# stopped, upgraded, removed and purged; nothing of it is left on the machine.
#
#   scripts/package/test.sh            (as root)
#
# Without systemd as PID 1 (containers, most CI machines) the package is installed into a
# throwaway root: an overlay of / on a tmpfs, in a mount and PID namespace of its own, entered
# with chroot. dpkg, adduser and the maintainer scripts run there for real; the host's files,
# users and dpkg database never change, and every process started there dies with the
# namespace. The service is started as systemd would: the unit's ExecStartPre, then its
# ExecStart, as User=warden with an empty capability bounding set and no new privileges.
# Then, where systemd-nspawn is (or installs), the package again under a real systemd booted
# in a container from another overlay of /, which applies the unit's sandbox for real; nspawn's
# state goes to a tmpfs /run and the cgroups it leaves on the host are removed.
# With systemd as PID 1 the package goes into the real root instead, `systemctl start warden`
# starts it, and the test purges it afterwards and checks that nothing is left.
#
# Environment:
#   DEB                 the package to test (default: built now by scripts/package/deb.sh)
#   PACKAGE_TIMEOUT     hard limit for the whole run in seconds (default 300)
#   PACKAGE_KEEP=1      keep the work directory (logs) and print its path (also kept on failure)
#
# Prints `ok - ...` / `not ok - ...` per check; the last line is always
# `package deb: N passed, M failed, K skipped`; exits 0 iff nothing failed.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"

# ---- outer process: build, hard limit, summary ---------------------------------------------
case "${1:-}" in "" | --inner | --in-namespace | --in-nspawn) ;; *) echo "usage: $0" >&2; exit 2 ;; esac
if [[ -z "${1:-}" ]]; then
  if [[ "$(id -u)" != 0 ]]; then
    echo "# installing a package needs root"
    echo "package deb: 0 passed, 0 failed, 1 skipped"
    exit 0
  fi
  WORK="$(mktemp -d "${TMPDIR:-/tmp}/package-deb.XXXXXX")"
  export WORK
  echo "0 0 0" >"$WORK/counts"
  start=$SECONDS
  rc=0
  if [[ -z "${DEB:-}" ]]; then
    DEB="$("$REPO/scripts/package/deb.sh" | tail -n1)" || { echo "not ok - scripts/package/deb.sh builds the package"; rc=1; }
  fi
  export DEB
  if ((rc == 0)); then
    # timeout signals its whole process group on expiry: the inner script and unshare (whose
    # --kill-child then SIGKILLs the namespace, the server with it).
    timeout --kill-after=20 "${PACKAGE_TIMEOUT:-300}" "$0" --inner || rc=$?
  fi
  read -r passed failed skipped <"$WORK/counts"
  if ((rc == 124 || rc == 137)); then
    echo "not ok - finished within the hard limit of ${PACKAGE_TIMEOUT:-300} s"
    failed=$((failed + 1))
  elif ((rc != 0)); then
    echo "not ok - the test script itself ran to completion (it exited with status $rc)"
    failed=$((failed + 1))
  fi
  if [[ "${PACKAGE_KEEP:-0}" == 1 || $failed -ne 0 ]]; then
    echo "# kept $WORK"
  else
    rm -rf "$WORK"
  fi
  echo "# wall time $((SECONDS - start)) s"
  echo "package deb: $passed passed, $failed failed, $skipped skipped"
  [[ $failed -eq 0 ]]
  exit
fi

# ---- checks ---------------------------------------------------------------------------------
: "${WORK:?run scripts/package/test.sh without arguments}"
read -r PASSED FAILED SKIPPED <"$WORK/counts"
counts() { echo "$PASSED $FAILED $SKIPPED" >"$WORK/counts"; }
ok() { PASSED=$((PASSED + 1)); echo "ok - $*"; counts; }
not_ok() { FAILED=$((FAILED + 1)); echo "not ok - $*"; counts; }
skip() { SKIPPED=$((SKIPPED + 1)); echo "ok - $* # SKIP"; counts; }
comment() { sed 's/^/#   /'; }
# check DESCRIPTION COMMAND...: ok if the command succeeds; its output is shown if not.
check() {
  local desc=$1 out
  shift
  if out="$("$@" 2>&1)"; then ok "$desc"; else not_ok "$desc"; head -n 30 <<<"$out" | comment; fi
}
check_eq() {
  if [[ "$2" == "$3" ]]; then ok "$1"; else not_ok "$1"; echo "#   got '$2', want '$3'"; fi
}

# The host's state of everything the package touches, to compare before and after.
host_state() {
  for path in /usr/bin/warden /etc/warden /var/lib/warden /lib/systemd/system/warden.service \
    /etc/systemd/system/multi-user.target.wants/warden.service; do
    if [[ -e "$path" || -L "$path" ]]; then echo "$path exists"; fi
  done
  getent passwd warden || true
  getent group warden || true
  dpkg-query -W -f='${db:Status-Abbrev}\n' warden 2>/dev/null || true
}

# ---- the package file itself ------------------------------------------------------------------
inspect() {
  local info contents cargo_version
  info="$(dpkg-deb -f "$DEB")"
  contents="$(dpkg-deb -c "$DEB")"
  cargo_version="$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' "$REPO/Cargo.toml")"
  check_eq "Package is warden" "$(dpkg-deb -f "$DEB" Package)" warden
  check "Version is Cargo.toml's ($cargo_version) with a Debian revision" \
    grep -qE "^$cargo_version-[0-9]+\$" <<<"$(dpkg-deb -f "$DEB" Version)"
  check_eq "Architecture is dpkg's ($(dpkg --print-architecture))" \
    "$(dpkg-deb -f "$DEB" Architecture)" "$(dpkg --print-architecture)"
  check "Depends names libc6 (from dpkg-shlibdeps) and adduser" \
    grep -qE '^Depends: adduser, .*libc6 \(>= [0-9.]+\)' <<<"$info"
  check "Maintainer and Description are set" \
    grep -qE '^Maintainer: .+ <.+@.+>' <<<"$info"
  check "Description has a synopsis and a long text" grep -qE '^Description: .+' <<<"$info"
  for path in ./usr/bin/warden ./lib/systemd/system/warden.service ./etc/warden/zoo.cfg \
    ./usr/share/doc/warden/copyright ./usr/share/doc/warden/changelog.Debian.gz \
    ./usr/share/doc/warden/packaging.md.gz ./usr/share/man/man1/warden.1.gz; do
    check "it holds $path" grep -qE " $path\$" <<<"$contents"
  done
  check "every file belongs to root:root" bash -c '! grep -v " root/root " <<<"$1"' _ "$contents"
  check_eq "conffiles is /etc/warden/zoo.cfg" "$(dpkg-deb --ctrl-tarfile "$DEB" | tar -xO ./conffiles)" /etc/warden/zoo.cfg
  local x="$WORK/extract"
  dpkg-deb -x "$DEB" "$x"
  check "its warden binary runs (--version)" "$x/usr/bin/warden" --version
  check "its binary is stripped (no symbol table, no debug sections)" \
    bash -c '! readelf -S -W "$1" | grep -qE "\.symtab|\.debug_(info|line|str) "' _ "$x/usr/bin/warden"
  check "its zoo.cfg passes --check-config" "$x/usr/bin/warden" server --zoo-cfg "$x/etc/warden/zoo.cfg" --check-config
}

# apt_install PACKAGE: from Debian, with `apt-get update` only if the lists do not have it.
apt_install() {
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$1" >>"$WORK/apt.log" 2>&1 ||
    { apt-get update -q >>"$WORK/apt.log" 2>&1 &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$1" >>"$WORK/apt.log" 2>&1; }
}

lint() {
  command -v lintian >/dev/null || apt_install lintian || true
  if command -v lintian >/dev/null; then
    # lintian warns that it runs as root; its tags are the lines with a "X: warden" prefix.
    check "lintian finds no error or warning" lintian --fail-on error,warning "$DEB"
  else
    skip "lintian (not installable here)"
  fi
}


# ---- the service, started as its unit says ----------------------------------------------------
# In $ROOT ("" for the real root); IN runs a command there.
IN() { if [[ -n "$ROOT" ]]; then chroot "$ROOT" "$@"; else "$@"; fi; }
UNIT=/lib/systemd/system/warden.service
unit_value() { sed -n "s/^$1=//p" "$ROOT$UNIT" | tail -n1; }

source "$REPO/scripts/lib/ports.sh"
# four_letter PORT WORD: the server's answer.
four_letter() {
  local answer
  exec 3<>"/dev/tcp/127.0.0.1/$1" || return 1
  printf '%s' "$2" >&3
  answer="$(timeout 5 cat <&3)" || true
  exec 3<&-
  printf '%s' "$answer"
}
wait_port() {
  for _ in $(seq 1 300); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    if [[ -n "${SERVICE_PID:-}" ]] && ! kill -0 "$SERVICE_PID" 2>/dev/null; then return 1; fi
    sleep 0.1
  done
  return 1
}

# The unit's ExecStartPre and ExecStart as systemd runs them, without systemd: as User= and
# Group=, with Environment= and UMask=, no capabilities, no new privileges, from /.
SERVICE_PID=""
service_start() {
  local user group env pre cmd log="$WORK/service-$1.log"
  user="$(unit_value User)" group="$(unit_value Group)"
  read -r -a env <<<"$(unit_value Environment)"
  read -r -a pre <<<"$(unit_value ExecStartPre)"
  read -r -a cmd <<<"$(unit_value ExecStart)"
  local as=(setpriv --reuid="$user" --regid="$group" --init-groups --no-new-privs
    --bounding-set=-all --inh-caps=-all -- env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin
    "HOME=/var/lib/warden" "USER=$user" "${env[@]}")
  umask "$(unit_value UMask)"
  if ! IN "${as[@]}" "${pre[@]}" >"$WORK/check-config-$1.log" 2>&1; then
    umask 022
    not_ok "ExecStartPre (--check-config) passes as $user"
    comment <"$WORK/check-config-$1.log"
    return 1
  fi
  ok "ExecStartPre (--check-config) passes as $user"
  # exec, so that $! is the server itself, the process KillSignal= goes to.
  if [[ -n "$ROOT" ]]; then
    (exec chroot "$ROOT" "${as[@]}" "${cmd[@]}" >"$log" 2>&1) &
  else
    (exec "${as[@]}" "${cmd[@]}" >"$log" 2>&1) &
  fi
  SERVICE_PID=$!
  umask 022
  if wait_port "$PORT"; then ok "ExecStart listens on $PORT"; else
    not_ok "ExecStart listens on $PORT"
    tail -n 30 "$log" | comment
    return 1
  fi
  check_eq "the server runs as $user" "$(IN stat -c %U "/proc/$SERVICE_PID")" "$user"
}
# SIGTERM by PID, as KillSignal= says, and a clean exit within TimeoutStopSec=.
service_stop() {
  local limit status=0 log="$WORK/service-$1.log"
  limit="$(unit_value TimeoutStopSec)"
  limit="${limit%s}"
  kill -TERM "$SERVICE_PID"
  for _ in $(seq 1 $((limit * 10))); do
    kill -0 "$SERVICE_PID" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$SERVICE_PID" 2>/dev/null; then
    not_ok "SIGTERM stops the server within TimeoutStopSec (${limit} s)"
    kill -KILL "$SERVICE_PID"
  else
    ok "SIGTERM stops the server within TimeoutStopSec (${limit} s)"
  fi
  wait "$SERVICE_PID" || status=$?
  SERVICE_PID=""
  check_eq "it exits with status 0" "$status" 0
  check "its log says it stopped on SIGTERM" grep -q "SIGTERM received" "$log"
  check "its log is an operator's, not openraft's chatter ($(wc -l <"$log") lines)" \
    bash -c '! grep -q "openraft" "$1" && (($(wc -l <"$1") <= 20))' _ "$log"
}

use_service() {
  local answer
  check_eq "ruok answers imok" "$(four_letter "$PORT" ruok)" imok
  answer="$(four_letter "$PORT" srvr)"
  if grep -q '^Mode: standalone' <<<"$answer"; then ok "srvr answers Mode: standalone"; else
    not_ok "srvr answers Mode: standalone"
    comment <<<"$answer"
  fi
  check "the admin server answers /health with 200" bash -c \
    'exec 3<>/dev/tcp/127.0.0.1/$1; printf "GET /health HTTP/1.0\r\n\r\n" >&3; timeout 5 head -n1 <&3 | grep -q " 200 "' \
    _ "$ADMIN_PORT"
}

# ---- without systemd: a throwaway root --------------------------------------------------------
in_namespace() {
  local base="$WORK/overlay"
  mkdir -p "$base"
  mount -t tmpfs -o size=1g tmpfs "$base"
  mkdir "$base/upper" "$base/work" "$base/root"
  # The root file system only: other mounts (/work, /proc, ...) do not show through.
  mount -t overlay overlay -o "lowerdir=/,upperdir=$base/upper,workdir=$base/work" "$base/root"
  ROOT="$base/root"
  mount --bind /dev "$ROOT/dev"
  mount -t proc proc "$ROOT/proc"
  mount -t tmpfs tmpfs "$ROOT/run"
  mount -t tmpfs tmpfs "$ROOT/tmp"
  cp "$DEB" "$ROOT/tmp/warden.deb"
  check "dpkg -i installs it" IN dpkg -i /tmp/warden.deb
  installed_checks
  service_checks
  upgrade_checks
  removal_checks
}

installed_checks() {
  check_eq "dpkg says it is installed" "$(IN dpkg-query -W -f='${db:Status-Abbrev}' warden)" "ii "
  check "postinst made the warden system user, home /var/lib/warden, no login shell" bash -c \
    'IFS=: read -r _ _ uid _ _ home shell <<<"$1"; ((uid < 1000)) && [[ $home == /var/lib/warden && $shell == /usr/sbin/nologin ]]' \
    _ "$(IN getent passwd warden)"
  check_eq "postinst made /var/lib/warden, warden's, 0750" "$(IN stat -c '%U:%G %a' /var/lib/warden)" "warden:warden 750"
  check_eq "zoo.cfg is root:warden 0640" "$(IN stat -c '%U:%G %a' /etc/warden/zoo.cfg)" "root:warden 640"
  check "the unit is enabled (a multi-user.target.wants link), even without systemd running" \
    test -L "$ROOT/etc/systemd/system/multi-user.target.wants/warden.service"
  if IN sh -c 'command -v systemd-analyze' >/dev/null 2>&1; then
    check "systemd-analyze verify finds nothing to say about the unit" \
      bash -c 'out="$(${1:+chroot "$1"} systemd-analyze verify "$2" 2>&1)"; echo "$out"; [[ -z $out ]]' _ "$ROOT" "$UNIT"
    local exposure
    exposure="$(IN systemd-analyze security --offline=yes "$UNIT" 2>/dev/null |
      sed -n 's/.*Overall exposure level for warden.service: \([0-9.]*\).*/\1/p')"
    check "systemd-analyze security rates the unit's exposure at most 2.0 (it says ${exposure:-nothing})" \
      awk -v e="$exposure" 'BEGIN { exit !(e != "" && e <= 2.0) }'
  else
    skip "systemd-analyze verify (not installed)"
  fi
}

service_checks() {
  # The operator's own edits of the conffile: ports free on this machine, loopback only.
  PORT="$(free_port)" ADMIN_PORT="$(free_port)"
  sed -i -e "s/^clientPort=.*/clientPort=$PORT/" -e 's/^#clientPortAddress=/clientPortAddress=/' \
    -e 's/^#admin.serverAddress=.*/admin.serverAddress=127.0.0.1/' \
    -e "s/^#admin.serverPort=.*/admin.serverPort=$ADMIN_PORT/" "$ROOT/etc/warden/zoo.cfg"
  service_start first || return 0
  use_service
  check "warden cli creates /packaged" IN warden cli -server "127.0.0.1:$PORT" create /packaged kept
  check_eq "warden cli reads it back" "$(IN warden cli -server "127.0.0.1:$PORT" get /packaged 2>&1)" kept
  check_eq "everything in /var/lib/warden is warden's" \
    "$(IN find /var/lib/warden ! -user warden -printf '%p\n')" ""
  service_stop first
}

upgrade_checks() {
  local next="$WORK/next" uid
  uid="$(IN id -u warden)"
  # The same files under the next Debian revision: what an upgrade does to them.
  dpkg-deb -R "$DEB" "$next"
  sed -i -E 's/^(Version: .*-)([0-9]+)$/echo "\1$((\2 + 1))"/e' "$next/DEBIAN/control"
  dpkg-deb --root-owner-group --build "$next" "$ROOT/tmp/warden-next.deb" >/dev/null
  check "dpkg -i upgrades it to $(dpkg-deb -f "$ROOT/tmp/warden-next.deb" Version)" IN dpkg -i /tmp/warden-next.deb
  check "the operator's zoo.cfg is kept" grep -q "^clientPort=$PORT\$" "$ROOT/etc/warden/zoo.cfg"
  check_eq "the warden user is the same" "$(IN id -u warden)" "$uid"
  service_start upgraded || return 0
  check_eq "the znode written before the upgrade is there" \
    "$(IN warden cli -server "127.0.0.1:$PORT" get /packaged 2>&1)" kept
  service_stop upgraded
}

removal_checks() {
  check "dpkg -r removes it" IN dpkg -r warden
  check "the binary and the unit are gone" bash -c '[[ ! -e $1/usr/bin/warden && ! -e $1$2 ]]' _ "$ROOT" "$UNIT"
  check "remove keeps zoo.cfg and the data" bash -c '[[ -f $1/etc/warden/zoo.cfg && -n $(ls -A "$1/var/lib/warden") ]]' _ "$ROOT"
  check "dpkg -P purges it" IN dpkg -P warden
  check "purge removes /etc/warden and /var/lib/warden" bash -c '[[ ! -e $1/etc/warden && ! -e $1/var/lib/warden ]]' _ "$ROOT"
  check "purge removes the unit's enablement link" \
    bash -c '[[ ! -L $1/etc/systemd/system/multi-user.target.wants/warden.service ]]' _ "$ROOT"
  check_eq "dpkg knows nothing of it" "$(IN dpkg-query -W -f='${db:Status-Abbrev}' warden 2>/dev/null || true)" ""
}

# ---- with systemd: the real root, purged at the end -------------------------------------------
with_systemd() {
  ROOT=""
  check "dpkg -i installs it" dpkg -i "$DEB"
  installed_checks
  PORT="$(sed -n 's/^clientPort=//p' /etc/warden/zoo.cfg)" ADMIN_PORT=8080
  check "systemctl start warden" systemctl start warden
  if wait_port "$PORT"; then ok "it listens on $PORT"; else not_ok "it listens on $PORT"; fi
  check "systemctl says it is active" systemctl is-active --quiet warden
  use_service
  check "warden cli creates /packaged" warden cli -server "127.0.0.1:$PORT" create /packaged kept
  check "systemctl stop warden" systemctl stop warden
  check "the journal says it stopped on SIGTERM" bash -c 'journalctl -u warden --no-pager | grep -q "SIGTERM received"'
  removal_checks
}

# ---- without systemd as PID 1, but with systemd-nspawn: a booted throwaway root ----------------
# The real systemd, as PID 1 of a container booted from an overlay of / (its own network, so
# 2181 and 8080 as shipped), applies the unit's sandbox for real. Run in a mount namespace
# whose /run is a tmpfs, so nspawn's own state stays out of the host's /run.
in_nspawn() {
  local base="$WORK/nspawn" nspawn_pid init="" state="" pid
  mount -t tmpfs tmpfs /run
  mkdir -p "$base"
  mount -t tmpfs -o size=1g tmpfs "$base"
  mkdir "$base/upper" "$base/work" "$base/root"
  mount -t overlay overlay -o "lowerdir=/,upperdir=$base/upper,workdir=$base/work" "$base/root"
  # Container images forbid service starts at install (exit 101); a real machine does not.
  rm -f "$base/root/usr/sbin/policy-rc.d"
  # Not /tmp: the booted system mounts a tmpfs there.
  cp "$DEB" "$base/root/root/warden.deb"
  timeout 240 systemd-nspawn -q --register=no --keep-unit --link-journal=no --private-network \
    -D "$base/root" --boot </dev/null >"$WORK/nspawn.log" 2>&1 &
  nspawn_pid=$!
  for _ in $(seq 1 150); do
    init="$(pgrep -P "$(pgrep -P "$nspawn_pid" | head -n1)" -x systemd 2>/dev/null | head -n1)" || true
    [[ -n "$init" ]] && break
    sleep 0.2
  done
  C() { nsenter -t "$init" -a "$@"; }
  for _ in $(seq 1 100); do
    state="$(C systemctl is-system-running 2>/dev/null)" || true
    [[ "$state" == running || "$state" == degraded ]] && break
    sleep 0.3
  done
  if [[ "$state" != running && "$state" != degraded ]]; then
    not_ok "a container boots systemd (state: ${state:-none})"
    tail -n 20 "$WORK/nspawn.log" | comment
    kill "$nspawn_pid" 2>/dev/null || true
    wait "$nspawn_pid" || true
    return 0
  fi
  ok "a container boots systemd from an overlay of / (systemctl: $state)"
  check "dpkg -i installs it there" C dpkg -i /root/warden.deb
  for _ in $(seq 1 100); do
    C bash -c 'exec 3<>/dev/tcp/127.0.0.1/2181' 2>/dev/null && break
    sleep 0.1
  done
  check "postinst started it: systemctl says active" C systemctl is-active warden
  check_eq "ruok on 2181 answers imok" \
    "$(C bash -c 'exec 3<>/dev/tcp/127.0.0.1/2181; printf ruok >&3; timeout 5 cat <&3' 2>&1)" imok
  check "srvr answers Mode: standalone" bash -c 'grep -q "^Mode: standalone" <<<"$1"' _ \
    "$(C bash -c 'exec 3<>/dev/tcp/127.0.0.1/2181; printf srvr >&3; timeout 5 cat <&3' 2>&1)"
  check "warden cli creates /packaged" C warden cli -server 127.0.0.1:2181 create /packaged kept
  check_eq "warden cli reads it back" "$(C warden cli -server 127.0.0.1:2181 get /packaged 2>&1)" kept
  pid="$(C systemctl show -p MainPID --value warden)"
  check_eq "the server runs as warden" "$(C stat -c %U "/proc/$pid")" warden
  check_eq "with no new privileges, no capabilities and a seccomp filter" \
    "$(C sed -n 's/^\(NoNewPrivs\|CapBnd\|CapEff\|Seccomp\):[[:space:]]*/\1=/p' "/proc/$pid/status" | tr '\n' ' ')" \
    "CapEff=0000000000000000 CapBnd=0000000000000000 NoNewPrivs=1 Seccomp=2 "
  check "its file system is read-only but /var/lib/warden (ProtectSystem=strict)" \
    C nsenter -t "$pid" -m sh -c '! touch /usr/warden-probe 2>/dev/null && ! touch /etc/warden-probe 2>/dev/null &&
      touch /var/lib/warden/.probe && rm /var/lib/warden/.probe'
  check "systemctl stop warden" C systemctl stop warden
  check_eq "it stopped cleanly (Result, exit status)" \
    "$(C systemctl show -p Result -p ExecMainStatus warden | sort | tr '\n' ' ')" "ExecMainStatus=0 Result=success "
  check "the journal says it stopped on SIGTERM" bash -c 'grep -q "SIGTERM received" <<<"$1"' _ \
    "$(C journalctl -u warden --no-pager 2>&1)"
  # A bad zoo.cfg: ExecStartPre refuses it with file and line; restarts stop at the start limit.
  C sed -i 's/^clientPort=2181$/clientPort=21x81/' /etc/warden/zoo.cfg
  check "with a bad zoo.cfg, systemctl start fails" bash -c '! nsenter -t "$1" -a systemctl start warden' _ "$init"
  check "the journal names the file and line" bash -c 'grep -q "zoo.cfg:[0-9]*.*clientPort" <<<"$1"' _ \
    "$(C journalctl -u warden --no-pager 2>&1)"
  local restarts
  for _ in $(seq 1 60); do
    [[ "$(C systemctl show -p ActiveState --value warden)" == failed ]] && break
    sleep 1
  done
  sleep 6 # longer than RestartSec: a restart would show now
  restarts="$(C systemctl show -p NRestarts --value warden)"
  check_eq "it is left failed, not restarted forever (restarts: $restarts)" \
    "$(C systemctl show -p ActiveState --value warden)" failed
  C sed -i 's/^clientPort=21x81$/clientPort=2181/' /etc/warden/zoo.cfg
  C systemctl reset-failed warden
  check "systemctl start warden, the zoo.cfg mended" C systemctl start warden
  check "dpkg -P purges it, prerm stopping the service" C dpkg -P warden
  check "the service is gone, and /var/lib/warden with it" bash -c \
    '! nsenter -t "$1" -a systemctl is-active --quiet warden && ! nsenter -t "$1" -a test -e /var/lib/warden' _ "$init"
  C systemctl poweroff >/dev/null 2>&1 || kill "$nspawn_pid" 2>/dev/null || true
  wait "$nspawn_pid" || true
}

if [[ "$1" == --in-nspawn ]]; then
  in_nspawn
  exit 0
fi
if [[ "$1" == --in-namespace ]]; then
  trap 'if [[ -n "${SERVICE_PID:-}" ]]; then kill -KILL "$SERVICE_PID" 2>/dev/null || true; fi' EXIT
  in_namespace
  exit 0
fi

before="$(host_state)"
inspect
lint
if [[ -d /run/systemd/system ]]; then
  echo "# systemd runs this machine: installing into the real root, purged at the end"
  with_systemd
else
  echo "# no systemd as PID 1: installing into a throwaway root (an overlay of /)"
  # --kill-child: whatever still runs in the namespace dies with it.
  unshare --mount --pid --fork --kill-child "$0" --in-namespace ||
    { read -r PASSED FAILED SKIPPED <"$WORK/counts"; not_ok "the throwaway root's checks ran to completion"; }
  read -r PASSED FAILED SKIPPED <"$WORK/counts"
  command -v systemd-nspawn >/dev/null || apt_install systemd-container || true
  if command -v systemd-nspawn >/dev/null; then
    echo "# and under systemd, booted in a container from an overlay of /"
    # nspawn leaves the cgroups it made on the host (cgroup v1): removed below, deepest first.
    cgroups_before="$(find /sys/fs/cgroup -mindepth 2 -maxdepth 2 -type d | sort)"
    unshare --mount --propagation private --fork --kill-child "$0" --in-nspawn ||
      { read -r PASSED FAILED SKIPPED <"$WORK/counts"; not_ok "the container's checks ran to completion"; }
    read -r PASSED FAILED SKIPPED <"$WORK/counts"
    comm -13 <(echo "$cgroups_before") <(find /sys/fs/cgroup -mindepth 2 -maxdepth 2 -type d | sort) |
      while read -r cgroup; do find "$cgroup" -depth -type d -exec rmdir {} + 2>/dev/null || true; done
    check_eq "no cgroup of the container is left" \
      "$(comm -13 <(echo "$cgroups_before") <(find /sys/fs/cgroup -mindepth 2 -maxdepth 2 -type d | sort))" ""
  else
    skip "under systemd in a container (systemd-nspawn not installable)"
  fi
fi
check_eq "the host is as before: no warden user, files or dpkg entry left" "$(host_state)" "$before"
