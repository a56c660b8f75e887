#!/usr/bin/env bash
# Builds the Debian package of Warden: target/debian/warden_<version>_<arch>.deb (under
# $CARGO_TARGET_DIR when set), and prints its path as the last line of stdout.
#
#   scripts/package/deb.sh                 release build, then the package
#   WARDEN_BIN=path scripts/package/deb.sh package that binary instead of building one
#   DEB_VERSION=0.1.0-2 ...                Debian version (default: Cargo.toml's version, -1)
#   DEB_MAINTAINER="Name <mail>" ...       Maintainer field
#
# Plain `dpkg-deb --build` from a staged tree, not cargo-deb: everything it needs (dpkg-dev for
# dpkg-shlibdeps, binutils for strip) is a Debian package that installs in seconds, while
# cargo-deb would be compiled by `cargo install` on every fresh CI machine, and the staged tree
# is all the package is, in plain sight. The files that go in it are in packaging/debian/.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SRC="$REPO/packaging/debian"
TARGET="${CARGO_TARGET_DIR:-$REPO/target}"
case "$TARGET" in /*) ;; *) TARGET="$REPO/$TARGET" ;; esac

need=()
command -v dpkg-shlibdeps >/dev/null || need+=(dpkg-dev)
command -v strip >/dev/null || need+=(binutils)
if ((${#need[@]})); then
  echo "deb.sh: installing ${need[*]}" >&2
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >&2; then
    apt-get update -q >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >&2
  fi
fi

bin="${WARDEN_BIN:-}"
if [[ -z "$bin" ]]; then
  (cd "$REPO" && cargo build --release --locked -p warden >&2)
  bin="$TARGET/release/warden"
fi
cargo_version="$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' "$REPO/Cargo.toml")"
version="${DEB_VERSION:-$cargo_version-1}"
arch="$(dpkg --print-architecture)"
maintainer="${DEB_MAINTAINER:-Warden maintainers <warden-maintainers@users.noreply.github.com>}"
# Timestamps from the last commit, so the same commit gives the same package.
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git -C "$REPO" log -1 --format=%ct 2>/dev/null || date +%s)}"

out="$TARGET/debian"
stage="$out/warden_${version}_$arch"
rm -rf "$stage"
mkdir -p "$stage/DEBIAN"
umask 022

install -D -m 0755 "$bin" "$stage/usr/bin/warden"
# As dh_strip does: the release build keeps line tables for backtraces (profile.release
# debug = 1), which are most of its size.
strip --remove-section=.comment --remove-section=.note --strip-unneeded "$stage/usr/bin/warden"
install -D -m 0644 "$SRC/warden.service" "$stage/lib/systemd/system/warden.service"
install -D -m 0644 "$SRC/zoo.cfg" "$stage/etc/warden/zoo.cfg"
doc="$stage/usr/share/doc/warden"
install -D -m 0644 "$SRC/copyright" "$doc/copyright"
install -m 0644 "$REPO/README.md" "$doc/README.md"
for page in packaging config server cluster admin console metrics security migration cli; do
  install -m 0644 "$REPO/docs/$page.md" "$doc/$page.md"
done
gzip -9n "$doc"/*.md
install -D -m 0644 "$SRC/warden.1" "$stage/usr/share/man/man1/warden.1"
gzip -9n "$stage/usr/share/man/man1/warden.1"
install -D -m 0644 "$SRC/lintian-overrides" "$stage/usr/share/lintian/overrides/warden"
# changelog.Debian: one entry for this version (the project's history is its git log).
{
  echo "warden ($version) unstable; urgency=medium"
  echo
  echo "  * Built from commit $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)."
  echo
  echo " -- $maintainer  $(date -u -R -d "@$SOURCE_DATE_EPOCH")"
} | gzip -9n >"$doc/changelog.Debian.gz"

for script in postinst prerm postrm; do
  install -m 0755 "$SRC/$script" "$stage/DEBIAN/$script"
done
install -m 0644 "$SRC/conffiles" "$stage/DEBIAN/conffiles"
# md5sums of every file but the conffiles, whose sums dpkg keeps itself (`dpkg --verify`).
(cd "$stage" && find . -path ./DEBIAN -prune -o -path ./etc -prune -o -type f -printf '%P\0' \
  | LC_ALL=C sort -z | xargs -0 md5sum) >"$stage/DEBIAN/md5sums"
chmod 0644 "$stage/DEBIAN/md5sums"

# Depends: the shared libraries the binary links (dpkg-shlibdeps reads them from the ELF
# header), plus adduser for postinst. dpkg-shlibdeps insists on a debian/control.
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir "$work/debian"
printf 'Source: warden\n\nPackage: warden\nArchitecture: any\n' >"$work/debian/control"
shlibs="$(cd "$work" && dpkg-shlibdeps -O -e"$stage/usr/bin/warden" 2>/dev/null)"
shlibs="${shlibs#shlibs:Depends=}"
[[ -n "$shlibs" ]] || { echo "deb.sh: dpkg-shlibdeps found no dependencies" >&2; exit 1; }

installed_kib="$(du -k -s --apparent-size --exclude=DEBIAN "$stage" | cut -f1)"
cat >"$stage/DEBIAN/control" <<CONTROL
Package: warden
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $installed_kib
Depends: adduser, $shlibs
Section: net
Priority: optional
Description: ZooKeeper-compatible coordination service
 Warden speaks ZooKeeper 3.9's wire protocol with its exact semantics,
 plus ClickHouse Keeper's extensions, and replicates with Raft. It reads
 an unmodified zoo.cfg, answers ZooKeeper's four-letter words, AdminServer
 commands and Prometheus metrics, and imports ZooKeeper's data
 directories (warden import).
 .
 This package runs it as the systemd service warden.service, configured
 by /etc/warden/zoo.cfg, with its data in /var/lib/warden.
CONTROL

find "$stage" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
deb="$out/warden_${version}_$arch.deb"
dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >&2
echo "$deb"
