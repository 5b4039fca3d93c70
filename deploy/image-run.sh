#!/bin/sh
# Runs the relay inside an unpacked image root (umoci unpack), as the image's user 65532, without a container
# runtime: chroot plus what a runtime would provide, /proc (Swift finds its command line through /proc/self) and a
# minimal /dev (null, zero, random, urandom; libwebsockets seeds from /dev/urandom). Needs root.
#   usage: deploy/image-run.sh ROOTFS [ARGS...]      the environment is passed through (env -i VAR=… works)
set -eu
root=${1:?usage: image-run.sh ROOTFS [ARGS...]}
shift
mkdir -p "$root/proc" "$root/dev"
mount -t proc proc "$root/proc"
mount -t tmpfs -o mode=0755,size=64k dev "$root/dev"
trap 'umount "$root/dev"; umount "$root/proc"' EXIT INT TERM
mknod -m 0666 "$root/dev/null" c 1 3
mknod -m 0666 "$root/dev/zero" c 1 5
mknod -m 0666 "$root/dev/random" c 1 8
mknod -m 0666 "$root/dev/urandom" c 1 9
status=0
chroot --userspec=65532:65532 "$root" /usr/local/bin/prefect-push "$@" || status=$?
exit $status
