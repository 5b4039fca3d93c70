#!/bin/sh
# Builds the container image without a container daemon or a base image: assembles a root file system from the
# release binary and the few files it needs at run time, then packs it into an OCI image layout.
#
#   usage: deploy/image.sh BINARY LAYOUT TAG       the image, tagged TAG, in the OCI layout LAYOUT (replaced)
#          deploy/image.sh --root BINARY DIR       only the root file system, in DIR (new; deploy/Dockerfile)
#
# The root holds only: the binary; the glibc-family libraries and loader `ldd` lists for it (everything else is linked
# in); the CA bundle and the same roots one file each by subject hash; passwd/group with the non-root user 65532;
# nsswitch.conf and hosts (DNS); /tmp; /data, the volume for the SQLite file; and the SBOM, a CycloneDX document of
# the binary and the libraries it is built from (deploy/sbom.py), at /usr/share/doc/prefect-push/sbom.cdx.json.
#
# The layer is written by GNU tar, not umoci: umoci 0.4.7 (Debian 12) leaves out the tar's end-of-archive blocks and
# the last file's padding, which tar and Python's tarfile refuse ("Unexpected EOF in archive"), and names the root
# "/". Here it is a plain ustar archive (no pax time stamps), entries sorted by name, numeric owners, every time
# SOURCE_DATE_EPOCH (default: the last commit), so the same binary gives the same image digest; umoci adds it as it is
# (`raw add-layer`) and writes the configuration. tools/check-image.py checks all of that (make image-check).
set -eu
usage="usage: image.sh BINARY LAYOUT TAG | image.sh --root BINARY DIR"
root_only=
if [ "${1:-}" = --root ]; then root_only=1; shift; fi
bin=${1:?$usage}
here=$(cd "$(dirname "$0")" && pwd)
uid=65532
sbom=/usr/share/doc/prefect-push/sbom.cdx.json
# The Swift file `make build` compiled into the binary: its list of libraries is the SBOM's (deploy/build-stamp.sh).
stamp=${BUILD_STAMP:-$here/../Sources/Relay/Process/BuildStamp.generated.swift}
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
# The labels' version and revision are the binary's own (`make build` stamps them from git: BuildInfo.swift);
# IMAGE_SOURCE, when set, is the repository's address.
version=$("$bin" --version | awk '{print $2}')
revision=$("$bin" --version | sed -n 's/.*(commit \([^)]*\)).*/\1/p')
source=${IMAGE_SOURCE:-}
# Where people read about the image (the repository's README unless IMAGE_DOCUMENTATION says otherwise).
documentation=${IMAGE_DOCUMENTATION:-$source}
# The files' modes are the image's: not this shell's umask.
umask 022
fail() { echo "image.sh: $*" >&2; exit 1; }

# The root file system: in DIR with --root, else in a directory of its own that becomes the layer.
if [ -n "$root_only" ]; then
    root=${2:?$usage}
    [ ! -e "$root" ] || fail "$root exists: give a new directory"
else
    layout=${2:?$usage}
    tag=${3:?$usage}
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    root=$work/rootfs
fi
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
# docs/benchmarks.md "Footprint"). So SSL_CERT_FILE is not set: it would ask for the bundle.
roots=0
for cert in /etc/ssl/certs/[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f].[0-9]*; do
    [ -e "$cert" ] || continue  # the pattern itself when nothing matched
    cp -L "$cert" "$root/etc/ssl/certs/" && roots=$((roots + 1))
done
[ "$roots" -gt 0 ] || fail "no hashed CA certificates in /etc/ssl/certs (install ca-certificates)"
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

${PYTHON:-python3} "$here/sbom.py" --stamp "$stamp" --binary "$bin" --created "$created" ${source:+--source "$source"} \
    "$root$sbom"

chmod 1777 "$root/tmp"
chown "$uid:$uid" "$root/data"
chmod 0750 "$root/data"
find "$root" -exec touch -h -d "@$epoch" {} +

[ -z "$root_only" ] || exit 0

# The layer: every path below the root, sorted bytewise, as ustar (GNU tar refuses a name ustar can't hold rather
# than adding a pax header).
(cd "$root" && find . -mindepth 1 -printf '%P\n' | LC_ALL=C sort) > "$work/files"
tar --create --file "$work/layer.tar" --directory "$root" --format=ustar --numeric-owner --mtime="@$epoch" \
    --no-recursion --verbatim-files-from --files-from "$work/files"

# Pack: an empty image, the layer, then the run-time configuration (deploy/Dockerfile declares the same). Port 9747
# is the metrics listener's when METRICS_PORT=9747 is set, as deploy/k8s does.
rm -rf "$layout"
umoci init --layout "$layout"
umoci new --image "$layout:$tag"
umoci raw add-layer --image "$layout:$tag" --history.created "$created" --history.created_by "deploy/image.sh" \
    --history.comment "prefect-push $version" "$work/layer.tar"
# The OCI keys, one "key=value" a line: each is a label on the config (what `podman inspect` shows) and an annotation
# on the manifest (what registries show), the same.
oci="title=prefect-push
version=$version
revision=${revision:-unknown}
created=$created
licenses=Apache-2.0${source:+
source=$source
url=$source}${documentation:+
documentation=$documentation}"
set --
while IFS= read -r pair; do
    set -- "$@" --config.label "org.opencontainers.image.$pair" --manifest.annotation "org.opencontainers.image.$pair"
done <<KEYS
$oci
KEYS
umoci config --image "$layout:$tag" --no-history --created "$created" \
    --architecture "$(dpkg --print-architecture 2>/dev/null || echo amd64)" --os linux \
    --config.entrypoint /usr/local/bin/prefect-push \
    --config.user "$uid:$uid" \
    --config.workingdir /data \
    --config.volume /data \
    --config.exposedports 8080/tcp \
    --config.exposedports 9747/tcp \
    --config.env PATH=/usr/local/bin \
    --config.env DB_PATH=/data/prefect-push.db \
    --config.env PORT=8080 \
    --config.stopsignal SIGTERM \
    "$@" \
    --config.label org.opencontainers.image.description="Relays Prefect flow-run pauses to iPhones via APNs" \
    --config.label prefect-push.sbom="$sbom"
umoci gc --layout "$layout"
