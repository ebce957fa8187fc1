#!/usr/bin/env bash
# The image's root filesystem, distroless-style: the packages of deploy/docker/runtime-packages
# and their dependencies extracted from Debian bookworm (mmdebstrap --variant=extract: no
# dpkg, apt, shell or coreutils — busybox provides sh, kill and sleep), the tessera user
# (uid 10001), and /usr/local/bin/tessera built with --static-swift-stdlib. The Dockerfile's
# runtime stage runs this script too, so the two cannot differ. With buildah, also an OCI
# image (entrypoint, user, workdir, ports as in the Dockerfile; layers gzip-compressed, as
# a registry stores them).
#
#   deploy/docker/build-rootfs.sh OUTDIR [BINARY | -]
#
# Writes OUTDIR/rootfs/ (a directory tree: chroot, unshare or systemd-nspawn can run it),
# OUTDIR/packages.txt (every package extracted, dependencies included; each also has
# rootfs/var/lib/dpkg/status.d/NAME, which image scanners such as trivy and syft read) and,
# with a binary and buildah, OUTDIR/tessera.oci.tar (podman load -i ...). BINARY defaults
# to a fresh static release build; "-" leaves the binary out (the Dockerfile copies its own).
set -euo pipefail
usage="usage: build-rootfs.sh OUTDIR [BINARY | -]"
if [ $# -lt 1 ] || [ $# -gt 2 ] || [ "${1#-}" != "$1" ]; then echo "$usage" >&2; exit 2; fi
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out=$1
binary=${2:-}
command -v mmdebstrap >/dev/null || { echo "build-rootfs.sh: mmdebstrap is not installed (apt-get install mmdebstrap)" >&2; exit 1; }
mkdir -p "$out"
out="$(cd "$out" && pwd)"
packages=$(grep -v '^\s*\(#\|$\)' "$here/runtime-packages" | paste -sd, -)

if [ -z "$binary" ]; then
    (cd "$root" && swift build -c release --static-swift-stdlib --product tessera --scratch-path .build-static >&2)
    binary="$root/.build-static/release/tessera"
fi

rootfs="$out/rootfs"
rm -rf "$rootfs"
# Extracted, not installed: no maintainer scripts run, so nothing of dpkg or a shell is
# needed at build time or left in the image. Merged /usr by mmdebstrap's hook; no
# recommends; no docs (but their copyright files), man pages or locales.
# shellcheck disable=SC2016 # $1 is the hook's argument (the rootfs), expanded by mmdebstrap
mmdebstrap --mode=chrootless --variant=extract --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --aptopt='APT::Install-Recommends "false"' --include="$packages" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --extract-hook='mkdir -p "$1/var/lib/dpkg/status.d"
        for deb in "$1"/var/cache/apt/archives/*.deb; do
            name=$(dpkg-deb -f "$deb" Package)
            { dpkg-deb -f "$deb"; echo "Status: install ok installed"; } > "$1/var/lib/dpkg/status.d/$name"
        done' \
    bookworm "$rootfs" http://deb.debian.org/debian >&2
ls "$rootfs/var/lib/dpkg/status.d" > "$out/packages.txt"

# What the packages' maintainer scripts would have done, and no more.
cat "$rootfs"/usr/share/ca-certificates/mozilla/*.crt > "$rootfs/etc/ssl/certs/ca-certificates.crt"
for applet in sh kill sleep; do ln -sf busybox "$rootfs/usr/bin/$applet"; done
# Users and name lookup without base-passwd: root, and the Dockerfile's user 10001.
printf 'root:x:0:0:root:/root:/usr/sbin/nologin\ntessera:x:10001:10001:tessera:/var/lib/tessera:/usr/sbin/nologin\n' > "$rootfs/etc/passwd"
printf 'root:x:0:\ntessera:x:10001:\n' > "$rootfs/etc/group"
printf 'passwd: files\ngroup: files\nhosts: files dns\n' > "$rootfs/etc/nsswitch.conf"
install -d -m 1777 "$rootfs/tmp"
install -d -m 0755 "$rootfs/proc" "$rootfs/sys" "$rootfs/dev" "$rootfs/run"  # mount points
install -d -o 10001 -g 10001 -m 0700 "$rootfs/var/lib/tessera" "$rootfs/keys"
# Not needed by a binary that converts text with ICU: glibc's iconv modules (9 MB; UTF-8,
# UTF-16/32 and Latin-1 are built into glibc), the package tools' leftovers.
rm -rf "$rootfs/usr/lib/x86_64-linux-gnu/gconv" "$rootfs/var/cache/apt" "$rootfs/var/lib/apt" "$rootfs/etc/apt" \
    "$rootfs/var/lib/dpkg/"{status,status-old,available,arch,diversions,lock,lock-frontend,triggers,updates,info} \
    "$rootfs/var/log"/* "$rootfs/usr/share/lintian" "$rootfs/usr/share/bash-completion" "$rootfs/usr/share/gdb"
if [ "$binary" != - ]; then
    install -D -m 0755 "$binary" "$rootfs/usr/local/bin/tessera"
    strip "$rootfs/usr/local/bin/tessera"  # symbols: about half the static binary
fi
du -sm "$rootfs" | awk '{print "rootfs: " $1 " MB"}' >&2

if [ "$binary" != - ] && command -v buildah >/dev/null 2>&1; then
    c=$(buildah from scratch)
    buildah copy "$c" "$rootfs" / >/dev/null
    buildah config --user 10001:10001 --workingdir /var/lib/tessera --port 5555 --port 9090 \
        --volume /var/lib/tessera --entrypoint '["tessera"]' --cmd '--help' "$c"
    buildah commit --rm --disable-compression=false "$c" oci-archive:"$out/tessera.oci.tar" >/dev/null
    stat -c %s "$out/tessera.oci.tar" | awk '{printf "image: %.1f MB (OCI archive, gzip layer)\n", $1 / 1048576}' >&2
fi
