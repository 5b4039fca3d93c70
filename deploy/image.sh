#!/bin/sh
# Builds the container image without a container daemon or a base image: assembles a root file system from the
# release binary and the few files it needs at run time, then packs it into an OCI image layout with umoci.
#
#   usage: deploy/image.sh BINARY LAYOUT TAG
#
# The root holds only: the binary; the glibc-family libraries and loader `ldd` lists for it (everything else is linked
# in); the CA bundle and the same roots one file each by subject hash; passwd/group with the non-root user 65532;
# nsswitch.conf and hosts (DNS); /tmp; and /data, the volume for the SQLite file. File times are set to
# SOURCE_DATE_EPOCH (default: the last commit), so the same binary gives the same image digest.
set -eu
bin=${1:?usage: image.sh BINARY LAYOUT TAG}
layout=${2:?usage: image.sh BINARY LAYOUT TAG}
tag=${3:?usage: image.sh BINARY LAYOUT TAG}
uid=65532
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
# The labels' version and revision are the binary's own (`make build` stamps them from git: BuildInfo.swift);
# IMAGE_SOURCE, when set, is the repository's address.
version=$("$bin" --version | awk '{print $2}')
revision=$("$bin" --version | sed -n 's/.*(commit \([^)]*\)).*/\1/p')
source=${IMAGE_SOURCE:-}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/rootfs
mkdir -p "$root/usr/local/bin" "$root/etc/ssl/certs" "$root/usr/lib/ssl" "$root/tmp" "$root/data"

install -m 0755 "$bin" "$root/usr/local/bin/prefect-push"

# Shared libraries at the paths the loader looks for them (`ldd` prints them resolved; copy the real files).
ldd "$bin" | awk '/=> \//{print $3} /^\t\/[^ ]+ \(/{print $1}' | while read -r lib; do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
done

cp -L /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
# The same roots one file each, named by subject hash (Debian's links, made by update-ca-certificates): the relay
# reads the one a chain names when it needs it instead of parsing the whole bundle at start-up (SystemRoots;
# README "Footprint"). So SSL_CERT_FILE is not set: it would ask for the bundle.
roots=0
for cert in /etc/ssl/certs/[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f].[0-9]*; do
    [ -e "$cert" ] || continue  # the pattern itself when nothing matched
    cp -L "$cert" "$root/etc/ssl/certs/" && roots=$((roots + 1))
done
[ "$roots" -gt 0 ] || { echo "image.sh: no hashed CA certificates in /etc/ssl/certs (install ca-certificates)" >&2; exit 1; }
# OpenSSL's built-in default paths (OPENSSLDIR=/usr/lib/ssl), as on Debian.
ln -s /etc/ssl/certs/ca-certificates.crt "$root/usr/lib/ssl/cert.pem"
ln -s /etc/ssl/certs "$root/usr/lib/ssl/certs"

cat > "$root/etc/passwd" <<EOF
root:x:0:0:root:/root:/sbin/nologin
nonroot:x:$uid:$uid:prefect-push:/data:/sbin/nologin
EOF
cat > "$root/etc/group" <<EOF
root:x:0:
nonroot:x:$uid:
EOF
# glibc 2.34+ has the files and dns backends built in, so no libnss_*.so is needed.
cat > "$root/etc/nsswitch.conf" <<EOF
passwd: files
group: files
hosts: files dns
EOF
# Container runtimes and Kubernetes mount their own /etc/hosts and /etc/resolv.conf over these.
printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' > "$root/etc/hosts"
: > "$root/etc/resolv.conf"

chmod 1777 "$root/tmp"
chown "$uid:$uid" "$root/data"
chmod 0750 "$root/data"
find "$root" -exec touch -h -d "@$epoch" {} +

# Pack: an empty image, one layer with the root, then the run-time configuration.
rm -rf "$layout"
umoci init --layout "$layout"
umoci new --image "$layout:$tag"
umoci insert --image "$layout:$tag" --history.created "$created" --history.created_by "deploy/image.sh" \
    --history.comment "prefect-push $version" "$root" /
umoci config --image "$layout:$tag" --no-history --created "$created" \
    --architecture "$(dpkg --print-architecture 2>/dev/null || echo amd64)" --os linux \
    --config.entrypoint /usr/local/bin/prefect-push \
    --config.user "$uid:$uid" \
    --config.workingdir /data \
    --config.volume /data \
    --config.exposedports 8080/tcp \
    --config.env PATH=/usr/local/bin \
    --config.env DB_PATH=/data/prefect-push.db \
    --config.env PORT=8080 \
    --config.stopsignal SIGTERM \
    --config.label org.opencontainers.image.title=prefect-push \
    --config.label org.opencontainers.image.version="$version" \
    --config.label org.opencontainers.image.revision="${revision:-unknown}" \
    --config.label org.opencontainers.image.created="$created" \
    --config.label org.opencontainers.image.licenses=Apache-2.0 \
    ${source:+--config.label "org.opencontainers.image.source=$source"} \
    --config.label org.opencontainers.image.description="Relays Prefect flow-run pauses to iPhones via APNs"
umoci gc --layout "$layout"
