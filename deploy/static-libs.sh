#!/bin/sh
# Makes the release build link the C libraries statically, leaving only the glibc family dynamic.
#
# SwiftPM reads each system library's .pc file itself and puts `-L<libdir>` in front of the link, so the
# linker would find the shared `libwebsockets.so` before any `.a`. This writes, into OUT:
#   OUT/pkgconfig/<name>.pc   the same packages, whose only library directory is OUT/lib
#   OUT/lib/lib<name>.a       linker scripts naming the real Debian `.a` archive plus what it needs
#                             (GROUP lets each archive resolve against the others whatever the order)
#   OUT/lib/libstdc++.a       the same for GCC's static libstdc++ (the Swift runtime's C++ parts): SwiftPM links
#                             `-lstdc++`, and OUT/lib is searched before the system directories, so the release
#                             binary carries the ~70 kB of it that it uses instead of needing libstdc++.so.6 (2.2 MB)
# OpenSSL and SQLite are not Debian's archives but trimmed builds of Debian's sources (deploy/openssl.sh and
# deploy/sqlite.sh, into OUT/openssl and OUT/sqlite): only what the relay uses, a section per function.
# `make build` passes `--pkg-config-path OUT/pkgconfig`; debug and test builds don't, and stay dynamic.
set -eu
out=${1:?usage: static-libs.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
libdir=$(pkg-config --variable=libdir libwebsockets)
mkdir -p "$out/pkgconfig" "$out/lib"
out=$(cd "$out" && pwd)

# At once: OpenSSL's build keeps both cores busy only part of the time, SQLite's one file compiles on one core.
sh "$here/openssl.sh" "$out/openssl" & openssl=$!
sqlite_rc=0; sh "$here/sqlite.sh" "$out/sqlite" || sqlite_rc=$?
openssl_rc=0; wait "$openssl" || openssl_rc=$?
[ "$openssl_rc" -eq 0 ] && [ "$sqlite_rc" -eq 0 ] || { echo "static-libs.sh: building OpenSSL or SQLite failed (above)" >&2; exit 1; }

archive() {
    case $1 in
        ssl|crypto) printf '%s/openssl/lib/lib%s.a ' "$out" "$1"; return ;;
        sqlite3) printf '%s/sqlite/lib/libsqlite3.a ' "$out"; return ;;
    esac
    [ -f "$libdir/lib$1.a" ] || { echo "missing $libdir/lib$1.a (install the -dev package)" >&2; exit 1; }
    printf '%s/lib%s.a ' "$libdir" "$1"
}

# lib<name>.a script: the archive and its dependencies (from `pkg-config --static --libs`, glibc left out).
script() {
    name=$1; shift
    files=""
    for lib in "$name" "$@"; do files="$files$(archive "$lib")"; done
    printf 'GROUP ( %s)\n' "$files" > "$out/lib/lib$name.a"
}
script websockets ssl crypto cap z
script nghttp2
script ssl crypto
script crypto
script sqlite3
script jansson
script cmark
cxx=$(${CC:-cc} -print-file-name=libstdc++.a)
[ -f "$cxx" ] || { echo "missing libstdc++.a (install g++)" >&2; exit 1; }
printf 'GROUP ( %s )\n' "$cxx" > "$out/lib/libstdc++.a"

# One .pc per package the targets in Package.swift name, with no Requires (so no system -L sneaks in).
pc() {
    printf 'Name: %s\nDescription: %s, linked statically\nVersion: %s\nLibs: -L%s/lib %s\nCflags:\n' \
        "$1" "$1" "$(pkg-config --modversion "$1")" "$out" "$2" > "$out/pkgconfig/$1.pc"
}
pc libwebsockets "-lwebsockets"
pc libnghttp2 "-lnghttp2"
pc openssl "-lssl -lcrypto"
pc sqlite3 "-lsqlite3"
pc jansson "-ljansson"
pc libcmark "-lcmark"
