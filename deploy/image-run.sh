#!/bin/sh
# Runs the relay inside an unpacked image root (umoci unpack), as the image's user 65532, without a container
# runtime: chroot plus a /proc mount (Swift finds its command line through /proc/self). Needs root.
#   usage: deploy/image-run.sh ROOTFS [ARGS...]      environment: passed through as given (env -i VAR=… works)
set -eu
root=${1:?usage: image-run.sh ROOTFS [ARGS...]}
shift
mkdir -p "$root/proc"
mount -t proc proc "$root/proc"
trap 'umount "$root/proc"' EXIT INT TERM
status=0
chroot --userspec=65532:65532 "$root" /usr/local/bin/prefect-push "$@" || status=$?
exit $status
