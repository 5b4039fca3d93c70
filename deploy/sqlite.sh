#!/bin/sh
# Builds the SQLite the release binary links: Debian's own SQLite source (the version libsqlite3-dev has in
# bookworm), as one amalgamation compiled with only what the store uses. Debian's libsqlite3.a keeps 0.84 MB in the
# binary (FTS3/4/5, R*Tree, JSON, sessions, load_extension and one .text per source file, so a function the store
# never calls still comes with its file); this one about 0.4 MB (docs/benchmarks.md "Footprint").
#
#   deploy/sqlite.sh OUT      -> OUT/lib/libsqlite3.a, OUT/VERSION (skipped when already built)
#
# Debian's behaviour is kept: THREADSAFE=1, SECURE_DELETE, no lookaside, TEMP_STORE=1, URIs, recursive triggers,
# LIKE not matching blobs, 250,000 variables, and usleep(3) for the busy handler (the store's 200 ms busy_timeout
# needs a sleep finer than a second). Added: pread/pwrite (USE_PREAD) instead of a seek before each page read and
# write: a 1,000-device announce's outbox transaction took 2.9-3.0 ms p50 with seeks, 2.0-2.1 with pwrite. Left out: the extensions, JSON, load_extension, UTF-16, shared cache,
# deprecated APIs (the progress callback stays: `check` bounds its integrity check with it). A function the relay
# needs from a part left out fails the link.
# -O2 (not -Os: a 1,000-device fan-out's outbox write is on the push path, and -Os made it ~15% slower), a
# section per function and no unwind tables; about 30 s. The source: deploy/debian-source.sh.
set -eu
out=${1:?usage: sqlite.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
flags="-O2 -fPIC -ffunction-sections -fdata-sections -fno-asynchronous-unwind-tables -fno-unwind-tables
       -DSQLITE_THREADSAFE=1 -DSQLITE_TEMP_STORE=1 -DSQLITE_USE_URI=1 -DSQLITE_SECURE_DELETE -DSQLITE_OMIT_LOOKASIDE
       -DSQLITE_DEFAULT_RECURSIVE_TRIGGERS -DSQLITE_LIKE_DOESNT_MATCH_BLOBS -DSQLITE_MAX_VARIABLE_NUMBER=250000
       -DSQLITE_OMIT_LOAD_EXTENSION -DSQLITE_OMIT_DEPRECATED -DSQLITE_OMIT_JSON -DSQLITE_OMIT_SHARED_CACHE
       -DSQLITE_DEFAULT_MEMSTATUS=0 -DSQLITE_OMIT_COMPLETE -DSQLITE_OMIT_GET_TABLE
       -DSQLITE_OMIT_TCL_VARIABLE -DSQLITE_OMIT_UTF16
       -DUSE_PREAD=1 -DHAVE_USLEEP=1 -DHAVE_FDATASYNC=1 -DHAVE_LOCALTIME_R=1 -DHAVE_GMTIME_R=1 -DHAVE_STRCHRNUL=1
       -DHAVE_MALLOC_USABLE_SIZE=1 -DHAVE_POSIX_FALLOCATE=1 -DHAVE_ISNAN=1"
# Exactly the installed libsqlite3-dev's version; built again when Debian ships another or the flags change.
installed=$(dpkg-query -W -f='${Version}' libsqlite3-dev 2>/dev/null) || { echo "sqlite.sh: libsqlite3-dev is not installed" >&2; exit 1; }
if [ -f "$out/lib/libsqlite3.a" ] && [ "$(cat "$out/INSTALLED" 2>/dev/null)" = "$installed" ] \
   && [ "$(cat "$out/FLAGS" 2>/dev/null)" = "$flags" ]; then
    exit 0
fi

work="$out/src"
rm -rf "$work"
tarball=$(sh "$(dirname "$0")/debian-source.sh" sqlite3 "$work" "$installed")
version=$(cat "$work/VERSION")
tar -xJf "$tarball" -C "$work"
source=$(find "$work" -mindepth 1 -maxdepth 1 -type d -name 'sqlite3-*' | head -1)
[ -n "$source" ] || { echo "sqlite.sh: no sqlite3-* directory in $tarball" >&2; exit 1; }
mkdir -p "$source/bld" && cd "$source/bld"
# The amalgamation (sqlite3.c) is generated with tclsh, as upstream does.
{ ../configure --disable-tcl && make sqlite3.c; } >"$work/build.log" 2>&1 || { tail -30 "$work/build.log" >&2; exit 1; }
${CC:-cc} -c $flags \
    sqlite3.c -o sqlite3.o >>"$work/build.log" 2>&1 || { tail -30 "$work/build.log" >&2; exit 1; }
mkdir -p "$out/lib"
rm -f "$out/lib/libsqlite3.a"
ar rcs "$out/lib/libsqlite3.a" sqlite3.o
echo "$version" > "$out/VERSION"
echo "$installed" > "$out/INSTALLED"  # the -dev package it was built for: another one builds it again
printf '%s' "$flags" > "$out/FLAGS"
cd "$out" && rm -rf "$work"
echo "built SQLite $version (trimmed) in $out"
