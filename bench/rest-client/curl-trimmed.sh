#!/bin/sh
# Builds the libcurl a switch of the REST client would link (docs/rest-client.md): Debian 12's curl source with
# Debian's own patches applied, configured with only what the relay's REST client needs, the way deploy/openssl.sh
# trims OpenSSL. Measurement only: the release build does not use it.
#
#   bench/rest-client/curl-trimmed.sh OUT OPENSSL_LIB [h2]
#       -> OUT/lib/libcurl.a, OUT/include/curl/*.h, OUT/VERSION, OUT/configure.txt (what was left in)
#
# OPENSSL_LIB holds the libssl.a and libcrypto.a to configure against (the release build's trimmed ones,
# .build/static/openssl/lib).
# With `h2`, HTTP/2 through Debian's libnghttp2 (the relay links it already, for APNs).
#
# Kept: HTTP/1.1 (and with h2, HTTP/2) over TCP and TLS (OpenSSL), proxies (CONNECT tunnels, Basic proxy
# credentials), the threaded resolver (a name lookup must not block the multi loop), socketpair wake-ups
# (curl_multi_wakeup), IPv6. Left out: every other protocol, cookies, HSTS, alt-svc, DoH, MIME, netrc, NTLM,
# Kerberos/SPNEGO, digest auth, TLS-SRP, IDN, the public-suffix list, content decoding (zlib, brotli, zstd),
# verbose strings and the manual.
#
# Debian 12 keeps curl at 7.88.1 and carries its security fixes as patches (debian/patches/series: 33 patches for
# 30 CVEs in 7.88.1-10+deb12u15), so the upstream tarball alone is not what Debian ships. Those patches are applied
# here in series order, up to the ones that only build the GnuTLS and NSS flavours. The Debian tarball's SHA-256 is
# checked against the same signed Sources index that deploy/debian-source.sh checks the upstream tarball against.
# -Os, a section per function, no unwind tables (as deploy/openssl.sh); lib/ only, about a minute on 2 cores.
set -eu
out=${1:?usage: curl-trimmed.sh OUT OPENSSL_LIB [h2]}
ossl=${2:?usage: curl-trimmed.sh OUT OPENSSL_LIB [h2]}
h2=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
ossl=$(cd "$ossl" && pwd)
fail() { echo "curl-trimmed.sh: $*" >&2; exit 1; }
[ -f "$ossl/libssl.a" ] && [ -f "$ossl/libcrypto.a" ] || fail "no libssl.a/libcrypto.a in $ossl"

work="$out/src"
rm -rf "$work"
installed=$(dpkg-query -W -f='${Version}' libcurl4-openssl-dev 2>/dev/null || true)
tarball=$(sh "$here/../../deploy/debian-source.sh" curl "$work" $installed)
version=$(cat "$work/VERSION")
upstream=${version%%-*}

# Debian's patches: the .debian.tar.xz that apt fetched beside the upstream tarball, checked like it.
apt_opts="-o Dir::Etc::SourceList=$work/sources.list -o Dir::Etc::SourceParts=/dev/null \
  -o Dir::State::Lists=$work/lists -o Dir::Cache=$work/cache -o Debug::NoLocking=1"
# shellcheck disable=SC2086
line=$(apt-cache $apt_opts showsrc curl | awk -v v="$version" '
    /^Package:/ { mine = 0 } $1 == "Version:" { mine = ($2 == v) }
    /^Checksums-Sha256:/ { inside = 1; next } /^[^ ]/ { inside = 0 }
    mine && inside && $3 ~ /\.debian\.tar\.xz$/ { print $1, $3; exit }')
[ -n "$line" ] && [ -f "$work/${line#* }" ] || fail "no Debian tarball for curl $version"
echo "${line%% *}  $work/${line#* }" | sha256sum -c --quiet - >&2 || fail "Debian tarball checksum mismatch"

tar -xzf "$tarball" -C "$work"
tar -xJf "$work/${line#* }" -C "$work/curl-$upstream"
cd "$work/curl-$upstream"
applied=0
for patch in $(sed -e 's/#.*//' debian/patches/series); do
    case $patch in 90_gnutls.patch | 99_nss.patch) break ;; esac
    patch -p1 -s --no-backup-if-mismatch < "debian/patches/$patch" || fail "$patch failed"
    applied=$((applied + 1))
done
# The patches that touch configure.ac or Makefile.am are about Kerberos, LDAP, zsh and tests: the shipped configure
# stays right for this build, and make doesn't regenerate it (maintainer mode is off), so no autotools are needed.

# curl compiles against Debian's OpenSSL headers (as the relay does), which declare everything; the trimmed
# libcrypto has no engines, no console UI and no OCSP (deploy/openssl.sh), which curl would otherwise call (engine
# keys, OCSP stapling checks). Declared absent here; another part curl needs and the trimmed build lacks fails the
# size test's link, never silently.
if [ "$h2" = h2 ]; then nghttp2=--with-nghttp2; else nghttp2=--without-nghttp2; fi
CFLAGS="-Os -ffunction-sections -fdata-sections -fno-asynchronous-unwind-tables -fno-unwind-tables" \
CPPFLAGS="-DOPENSSL_NO_ENGINE -DOPENSSL_NO_UI_CONSOLE -DOPENSSL_NO_OCSP" LDFLAGS="-L$ossl" LIBS="-lpthread" \
./configure --disable-shared --enable-static --with-pic --disable-dependency-tracking \
    --with-openssl $nghttp2 --with-ca-bundle=/etc/ssl/certs/ca-certificates.crt --with-ca-path=/etc/ssl/certs \
    --enable-http --enable-proxy --enable-ipv6 --enable-threaded-resolver --enable-socketpair --enable-http-auth \
    --disable-ftp --disable-file --disable-ldap --disable-ldaps --disable-rtsp --disable-dict --disable-telnet \
    --disable-tftp --disable-pop3 --disable-imap --disable-smb --disable-smtp --disable-gopher --disable-mqtt \
    --disable-manual --disable-libcurl-option --disable-verbose --disable-crypto-auth --disable-ntlm \
    --disable-ntlm-wb --disable-tls-srp --disable-unix-sockets --disable-cookies --disable-doh --disable-mime \
    --disable-dateparse --disable-netrc --disable-progress-meter --disable-get-easy-options --disable-alt-svc \
    --disable-headers-api --disable-hsts --disable-websockets --disable-openssl-auto-load-config \
    --without-zlib --without-brotli --without-zstd --without-libidn2 --without-libpsl --without-libssh2 \
    --without-libssh --without-librtmp --without-gssapi --without-hyper \
    >"$work/configure.log" 2>&1 || { tail -30 "$work/configure.log" >&2; exit 1; }
make -C lib -j"$(nproc)" >"$work/make.log" 2>&1 || { tail -30 "$work/make.log" >&2; exit 1; }

mkdir -p "$out/lib" "$out/include/curl"
cp lib/.libs/libcurl.a "$out/lib/"
cp include/curl/*.h "$out/include/curl/"
sed -n '/Configured to build curl/,$p' "$work/configure.log" > "$out/configure.txt"
echo "$version ($applied Debian patches)" > "$out/VERSION"
cd "$out" && rm -rf "$work"
echo "built libcurl $version (trimmed, $applied Debian patches, ${h2:-no h2}) in $out"
