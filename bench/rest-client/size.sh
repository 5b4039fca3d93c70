#!/bin/sh
# What linking libcurl adds to the relay's binary (docs/rest-client.md): size/size_main.c linked with and without
# libcurl and the prototype engine, the way the release binary links its C libraries (static archives, lld, a section
# per function, --gc-sections, packed relocations, stripped), each run once against the TLS stand-in.
#
#   bench/rest-client/size.sh OUT [OPENSSL_LIB]
#
# OPENSSL_LIB: the release build's trimmed libssl.a and libcrypto.a (default .build/static/openssl/lib, made by
# `make release-inputs`). The trimmed libcurl builds go to OUT/curl-h1 and OUT/curl-h2 (curl-trimmed.sh, skipped
# when there). Prints one line per binary: bytes, and the shared libraries it needs beyond glibc.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: size.sh OUT [OPENSSL_LIB]}
ossl=${2:-$here/../../.build/static/openssl/lib}
mkdir -p "$out"
out=$(cd "$out" && pwd)
ossl=$(cd "$ossl" && pwd)
multiarch=$(gcc -print-multiarch)
syslib=/usr/lib/$multiarch
[ -f "$out/curl-h1/lib/libcurl.a" ] || sh "$here/curl-trimmed.sh" "$out/curl-h1" "$ossl"
[ -f "$out/curl-h2/lib/libcurl.a" ] || sh "$here/curl-trimmed.sh" "$out/curl-h2" "$ossl" h2

cc=${CC:-clang}
cflags="-O2 -ffunction-sections -fdata-sections -I$here/Sources/CurlPool/include"
ldflags="-fuse-ld=lld -Wl,--gc-sections -Wl,-z,pack-relative-relocs -s"
engine="$here/Sources/CurlPool/curl_pool.c"
ssl="$ossl/libssl.a $ossl/libcrypto.a"

link() {  # name, then compiler arguments
    name=$1; shift
    if $cc $cflags "$@" $ldflags -lpthread -o "$out/$name" >"$out/$name.log" 2>&1; then
        extra=$(ldd "$out/$name" | awk '$1 !~ /^(linux-vdso|libc\.so|libm\.so|libgcc_s|\/lib64\/ld-linux)/ {print $1}' |
                tr '\n' ' ')
        printf '%-22s %10s bytes  shared beyond glibc: %s\n' "$name" "$(stat -c %s "$out/$name")" "${extra:-none}"
    else
        why=$(grep -m3 -E 'undefined|cannot find|error' "$out/$name.log" | tr '\n' ' ')
        printf '%-22s link failed: %s\n' "$name" "$why"
    fi
}

echo "== binaries"
link base "$here/size/size_main.c" $ssl
link base-h2 -DWITH_NGHTTP2 "$here/size/size_main.c" "$syslib/libnghttp2.a" $ssl
link curl-trimmed -DWITH_CURL -I"$out/curl-h1/include" "$here/size/size_main.c" "$engine" \
    "$out/curl-h1/lib/libcurl.a" $ssl
link curl-trimmed-h2 -DWITH_CURL -DWITH_NGHTTP2 -I"$out/curl-h2/include" "$here/size/size_main.c" "$engine" \
    "$out/curl-h2/lib/libcurl.a" "$syslib/libnghttp2.a" $ssl
# Debian's libcurl.a and what `pkg-config --static` says it needs.
link curl-debian-static -static-libgcc -DWITH_CURL "$here/size/size_main.c" "$engine" -Wl,-Bstatic \
    $(pkg-config --static --libs libcurl) -Wl,-Bdynamic
# Debian's libcurl.so, the rest as before (its libssl.so.3 beside the static trimmed OpenSSL).
link curl-debian-dynamic -DWITH_CURL "$here/size/size_main.c" "$engine" -lcurl $ssl

echo "== shared libraries Debian's libcurl.so.4 loads (ldd), beyond glibc"
total=0
count=0
loaded=$(ldd "$syslib/libcurl.so.4" | awk '$3 ~ /^\// && $1 !~ /^(libc\.so|libm\.so|libgcc_s)/ {print $3}')
for lib in $loaded "$syslib/libcurl.so.4"; do
    size=$(stat -L -c %s "$lib")
    total=$((total + size))
    count=$((count + 1))
done
echo "$count libraries, $total bytes (libcurl.so.4 included)"

echo "== archives"
for a in "$out/curl-h1/lib/libcurl.a" "$out/curl-h2/lib/libcurl.a" "$syslib/libcurl.a"; do
    printf '%-60s %10s bytes\n' "$a" "$(stat -c %s "$a")"
done

echo "== each binary against the TLS stand-in"
port_file="$out/stand-in.port"
(sleep 30 | python3 "$here/server.py" --tls > "$port_file") &
sleep 1
port=$(cat "$port_file")
ca="$here/../../Tests/RelayTests/Fixtures/apns/ca.pem"
for name in base base-h2 curl-trimmed curl-trimmed-h2 curl-debian-dynamic; do
    [ -x "$out/$name" ] || continue
    printf '%s: %s\n' "$name" "$("$out/$name" 127.0.0.1 "$port" /api/flow_runs/abc "$ca" 2>&1 | tr '\n' ';')"
done
