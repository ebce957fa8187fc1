#!/usr/bin/env bash
# The container image without a Docker engine or a registry: a root filesystem from
# Debian's packages (mmdebstrap) with exactly the runtime packages the Dockerfile's runtime
# stage installs (read from the Dockerfile, so the two cannot drift), the tessera user
# (uid 10001) and /usr/local/bin/tessera built with --static-swift-stdlib; then, when
# buildah is there, an OCI image (entrypoint, user, workdir, ports as in the Dockerfile).
#
#   deploy/docker/build-rootfs.sh OUTDIR [BINARY]
#
# Writes OUTDIR/rootfs/ (a directory tree: chroot, unshare or systemd-nspawn can run it),
# OUTDIR/packages.txt (the runtime packages), and with buildah OUTDIR/tessera.oci.tar
# (podman load -i ...). BINARY defaults to a fresh static release build.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out=${1:?usage: build-rootfs.sh OUTDIR [BINARY]}
binary=${2:-}
mkdir -p "$out"
out="$(cd "$out" && pwd)"

# The runtime stage's apt-get install list: the lines between its install command and the
# cleanup, one package per line.
awk '/^FROM .* AS runtime/ {r=1} r && /apt-get install/ {p=1; next} p && /rm -rf/ {exit} p {gsub(/[\\ ]/, ""); if ($0 != "") print}' \
    "$here/Dockerfile" > "$out/packages.txt"
[ -s "$out/packages.txt" ] || { echo "no runtime packages found in the Dockerfile" >&2; exit 1; }

if [ -z "$binary" ]; then
    (cd "$root" && swift build -c release --static-swift-stdlib --product tessera --scratch-path .build-static >&2)
    binary="$root/.build-static/release/tessera"
fi

rm -rf "$out/rootfs"
# essential: dpkg, coreutils, bash... (what bookworm-slim has, without apt); merged /usr by
# mmdebstrap's hook rather than the usrmerge package (which pulls in perl); no recommends;
# no docs, man pages or locales, as the slim images drop them.
mmdebstrap --variant=essential --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --aptopt='APT::Install-Recommends "false"' --include="$(paste -sd, "$out/packages.txt")" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    bookworm "$out/rootfs" http://deb.debian.org/debian >&2
# The Dockerfile's user and directories.
echo "tessera:x:10001:10001:tessera:/var/lib/tessera:/usr/sbin/nologin" >> "$out/rootfs/etc/passwd"
echo "tessera:x:10001:" >> "$out/rootfs/etc/group"
install -d -o 10001 -g 10001 -m 0700 "$out/rootfs/var/lib/tessera" "$out/rootfs/keys"
install -D -m 0755 "$binary" "$out/rootfs/usr/local/bin/tessera"
strip "$out/rootfs/usr/local/bin/tessera"  # symbols: 99 MB -> about half
rm -rf "$out/rootfs/var/cache/apt" "$out/rootfs/var/lib/apt/lists" "$out/rootfs/var/log"/*.log
du -sm "$out/rootfs" | awk '{print "rootfs: " $1 " MB"}' >&2

if command -v buildah >/dev/null 2>&1; then
    c=$(buildah from scratch)
    buildah copy "$c" "$out/rootfs" / >/dev/null
    buildah config --user 10001:10001 --workingdir /var/lib/tessera --port 5555 --port 9090 \
        --volume /var/lib/tessera --entrypoint '["tessera"]' --cmd '--help' "$c"
    buildah commit --rm "$c" oci-archive:"$out/tessera.oci.tar" >/dev/null
    stat -c %s "$out/tessera.oci.tar" | awk '{printf "image: %.1f MB (OCI archive)\n", $1 / 1048576}' >&2
fi
