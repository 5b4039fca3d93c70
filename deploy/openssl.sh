#!/bin/sh
# Builds the OpenSSL the release binary links: Debian's own OpenSSL 3.0 source (the newest bookworm or
# bookworm-security has), configured with only what the relay and libwebsockets use. Debian's libcrypto.a carries
# every algorithm, and the default provider's tables reach nearly all of them, so the linker keeps 3.3 MB of it; this
# one is 1.6 MB (docs/benchmarks.md "Footprint").
#
#   deploy/openssl.sh OUT      -> OUT/lib/libcrypto.a, OUT/lib/libssl.a, OUT/VERSION (skipped when already built)
#
# Kept: TLS 1.2 and 1.3 clients and servers (the fake APNs uses this build too), ECDHE with X25519 and the NIST
# curves, RSA and ECDSA certificates, AES-GCM, ChaCha20-Poly1305, SHA-1/2/3, PEM and PKCS#8 keys, X.509
# verification. Left out: old protocols (SSL 3, TLS 1.0/1.1, DTLS), legacy and national ciphers and digests,
# finite-field DH and DSA, engines, dynamic modules, CMS/TS/CT/OCSP, and config-file autoloading. OPENSSLDIR is
# Debian's (/usr/lib/ssl), so the system CA bundle and SSL_CERT_FILE are found exactly as before. A symbol the
# relay or libwebsockets needs from a part left out fails the link; nothing degrades silently.
#
# Compiled -Os with a section per function and no unwind tables (C code that never unwinds; the hand-written
# assembly keeps its own CFI), so the linker drops every function nothing calls. About 35 s on 2 cores.
# The source: deploy/debian-source.sh (apt, checked against Debian's signed index).
set -eu
out=${1:?usage: openssl.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
# Exactly the installed libssl-dev's version (its headers are what the relay compiles against), built again when
# Debian ships another (a security fix arrives with `apt-get upgrade`, and the next build picks it up).
installed=$(dpkg-query -W -f='${Version}' libssl-dev 2>/dev/null) || { echo "openssl.sh: libssl-dev is not installed" >&2; exit 1; }
if [ -f "$out/lib/libcrypto.a" ] && [ -f "$out/lib/libssl.a" ] && [ "$(cat "$out/INSTALLED" 2>/dev/null)" = "$installed" ]; then
    exit 0
fi
# OpenSSL's name for this machine's architecture.
case $(uname -m) in
    x86_64) target=linux-x86_64 ;;
    aarch64 | arm64) target=linux-aarch64 ;;
    *) echo "openssl.sh: no OpenSSL target for $(uname -m); add one here (./Configure LIST names them)" >&2; exit 1 ;;
esac

work="$out/src"
rm -rf "$work"
tarball=$(sh "$(dirname "$0")/debian-source.sh" openssl "$work" "$installed")
version=$(cat "$work/VERSION")
upstream=${version%%-*}
case "$upstream" in 3.0.*) ;; *) echo "openssl.sh: expected OpenSSL 3.0.x from Debian 12, found '$version'" >&2; exit 1 ;; esac

tar -xzf "$tarball" -C "$work"
cd "$work/openssl-$upstream"
./Configure "$target" --prefix="$out" --openssldir=/usr/lib/ssl --libdir=lib \
    no-shared no-module no-dso no-engine no-legacy no-autoload-config no-tests no-ui-console no-async no-comp \
    no-ssl3 no-tls1 no-tls1_1 no-dtls no-sctp no-srtp no-weak-ssl-ciphers no-psk no-srp no-ssl-trace \
    no-idea no-rc2 no-rc4 no-rc5 no-des no-bf no-cast no-camellia no-aria no-seed no-sm2 no-sm3 no-sm4 no-gost \
    no-whirlpool no-md4 no-mdc2 no-rmd160 no-blake2 no-siphash no-cmac no-scrypt no-siv no-ocb \
    no-dh no-dsa no-ec2m no-ct no-cms no-ts no-ocsp no-rfc3779 no-filenames \
    no-padlockeng no-capieng no-afalgeng no-devcryptoeng \
    -Os -ffunction-sections -fdata-sections -fno-asynchronous-unwind-tables -fno-unwind-tables >"$work/configure.log" 2>&1 \
    || { tail -20 "$work/configure.log" >&2; exit 1; }
make -j"$(nproc)" build_libs >"$work/make.log" 2>&1 || { tail -30 "$work/make.log" >&2; exit 1; }
mkdir -p "$out/lib"
cp libcrypto.a libssl.a "$out/lib/"
echo "$version" > "$out/VERSION"
echo "$installed" > "$out/INSTALLED"  # the -dev package it was built for: another one builds it again
cd "$out" && rm -rf "$work"
echo "built OpenSSL $version (trimmed) in $out"
