#!/bin/sh
# Fetches the upstream tarball of a Debian 12 source package, checked, for the release build's trimmed C libraries
# (deploy/openssl.sh, deploy/sqlite.sh).
#
#   deploy/debian-source.sh PACKAGE WORKDIR    -> prints the tarball's path; the Debian version is in WORKDIR/VERSION
#
# The newest version bookworm or bookworm-security has, through apt with a private state directory in WORKDIR (the
# machine's apt configuration is not touched). The tarball's SHA-256 is checked against Debian's signed Sources
# index. Only the upstream tarball is used: apt also fetches the .dsc and Debian's packaging, which these builds
# don't need, so apt's exit status is not the test; the checksum is.
set -eu
package=${1:?usage: debian-source.sh PACKAGE WORKDIR}
work=${2:?usage: debian-source.sh PACKAGE WORKDIR}
mkdir -p "$work/lists/partial" "$work/cache/archives/partial"
printf '%s\n' 'deb-src http://deb.debian.org/debian bookworm main' \
    'deb-src http://deb.debian.org/debian-security bookworm-security main' > "$work/sources.list"
apt_opts="-o Dir::Etc::SourceList=$work/sources.list -o Dir::Etc::SourceParts=/dev/null \
  -o Dir::State::Lists=$work/lists -o Dir::Cache=$work/cache -o Debug::NoLocking=1"
# shellcheck disable=SC2086
apt-get $apt_opts update -qq >/dev/null || { echo "debian-source.sh: cannot read Debian's source index" >&2; exit 1; }
# shellcheck disable=SC2086
version=$(apt-cache $apt_opts showsrc "$package" | sed -n 's/^Version: //p' | sort -V | tail -1)
[ -n "$version" ] || { echo "debian-source.sh: no source package $package" >&2; exit 1; }
# The upstream tarball: the Sources entry's orig tarball (not its -www or other component tarballs).
# shellcheck disable=SC2086
line=$(apt-cache $apt_opts showsrc "$package" | awk -v v="$version" -v p="$package" '
    /^Package:/ { mine = 0 } $1 == "Version:" { mine = ($2 == v) }
    /^Checksums-Sha256:/ { inside = 1; next } /^[^ ]/ { inside = 0 }
    mine && inside && $3 ~ ("^" p "_[^-]*\\.orig\\.tar\\.(gz|xz)$") { print $1, $3; exit }')
sha=${line%% *}
tarball=${line#* }
[ -n "$line" ] || { echo "debian-source.sh: no upstream tarball for $package $version in the Sources index" >&2; exit 1; }
# shellcheck disable=SC2086
(cd "$work" && apt-get $apt_opts source --download-only -qq "$package=$version" >/dev/null 2>&1) || true
[ -f "$work/$tarball" ] || { echo "debian-source.sh: could not download $tarball from deb.debian.org" >&2; exit 1; }
echo "$sha  $work/$tarball" | sha256sum -c --quiet - >&2 || { echo "debian-source.sh: $tarball checksum mismatch" >&2; exit 1; }
echo "$version" > "$work/VERSION"
echo "$work/$tarball"
