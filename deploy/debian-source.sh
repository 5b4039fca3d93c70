#!/bin/sh
# Fetches the upstream tarball of a Debian 12 source package, checked, for the release build's trimmed C libraries
# (deploy/openssl.sh, deploy/sqlite.sh).
#
#   deploy/debian-source.sh PACKAGE WORKDIR [VERSION]
#       -> prints the tarball's path; the Debian version is in WORKDIR/VERSION. With VERSION, that one (the installed
#          -dev package's, so headers and archive match) while the archive still has it, else the newest with a
#          warning; without, the newest.
#
# The newest version the machine's bookworm suites have (bookworm-security included), through apt with a private
# state directory in WORKDIR (the machine's apt configuration is read, never changed). The tarball's SHA-256 is
# checked against Debian's signed Sources index. Only the upstream tarball is used: apt also fetches the .dsc and Debian's packaging, which these builds
# don't need, so apt's exit status is not the test; the checksum is.
set -eu
package=${1:?usage: debian-source.sh PACKAGE WORKDIR}
work=${2:?usage: debian-source.sh PACKAGE WORKDIR}
mkdir -p "$work/lists/partial" "$work/cache/archives/partial"
# The source archives are the machine's own Debian 12 archives (its deb822 .sources stanzas or one-line .list
# entries for a bookworm suite), as deb-src lines: whatever mirror the machine uses, and no host named here.
{
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        awk 'BEGIN { RS = ""; FS = "\n" }
             { types = uris = suites = comps = ""
               for (i = 1; i <= NF; i++) {
                   line = $i
                   if (line ~ /^Types:/)      { sub(/^Types:[ \t]*/, "", line); types = line }
                   if (line ~ /^URIs:/)       { sub(/^URIs:[ \t]*/, "", line); uris = line }
                   if (line ~ /^Suites:/)     { sub(/^Suites:[ \t]*/, "", line); suites = line }
                   if (line ~ /^Components:/) { sub(/^Components:[ \t]*/, "", line); comps = line }
               }
               if (types !~ /deb/) next
               n = split(uris, u, " "); m = split(suites, s, " ")
               for (a = 1; a <= n; a++) for (b = 1; b <= m; b++)
                   if (s[b] ~ /^bookworm/) print "deb-src " u[a] " " s[b] " main" }' "$f"
    done
    cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
        sed -n 's/^deb[ \t]\{1,\}\(\[[^]]*\][ \t]\{1,\}\)\{0,1\}\([^ \t]\{1,\}\)[ \t]\{1,\}\(bookworm[^ \t]*\).*/deb-src \2 \3 main/p'
} | sort -u > "$work/sources.list"
[ -s "$work/sources.list" ] || { echo "debian-source.sh: no Debian 12 (bookworm) archive in this machine's apt sources" >&2; exit 1; }
apt_opts="-o Dir::Etc::SourceList=$work/sources.list -o Dir::Etc::SourceParts=/dev/null \
  -o Dir::State::Lists=$work/lists -o Dir::Cache=$work/cache -o Debug::NoLocking=1"
# shellcheck disable=SC2086
apt-get $apt_opts update -qq >/dev/null || { echo "debian-source.sh: cannot read Debian's source index" >&2; exit 1; }
# shellcheck disable=SC2086
available=$(apt-cache $apt_opts showsrc "$package" | sed -n 's/^Version: //p' | sort -V)
newest=$(printf '%s\n' "$available" | tail -1)
version=${3:-$newest}
if ! printf '%s\n' "$available" | grep -qxF "$version"; then
    # The archive keeps only its current versions: an installed package older than them has no source left there.
    echo "debian-source.sh: warning: $package $version (installed) is no longer in the archive; building $newest," \
         "the archive's newest: apt-get install --only-upgrade the -dev package to match them" >&2
    version=$newest
fi
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
[ -f "$work/$tarball" ] || { echo "debian-source.sh: could not download $tarball from the machine's Debian archive" >&2; exit 1; }
echo "$sha  $work/$tarball" | sha256sum -c --quiet - >&2 || { echo "debian-source.sh: $tarball checksum mismatch" >&2; exit 1; }
echo "$version" > "$work/VERSION"
echo "$work/$tarball"
