#!/usr/bin/env bash
# The container image, built and run: deploy/docker/build-rootfs.sh makes the root
# filesystem (Debian packages read from the Dockerfile's runtime stage + the static release
# binary) and, with buildah, the OCI image; then `tessera run` runs a job on the bundled
# sample images inside it, as the Dockerfile's user (10001), under podman when it can run
# containers here, else in a mount+PID namespace with chroot (unshare). Checks: the job's
# outputs exist and belong to 10001, every package of the Dockerfile's runtime stage is
# installed, and prints the sizes. Needs root and mmdebstrap; skipped with the reason otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
skip() { echo "container test: skipped ($1)"; exit 0; }
[ "$(id -u)" -eq 0 ] || skip "needs root: mmdebstrap and chroot"
command -v mmdebstrap >/dev/null || skip "mmdebstrap is not installed (apt-get install mmdebstrap)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
deploy/docker/build-rootfs.sh "$work/image"
rootfs="$work/image/rootfs"

# Every runtime package of the Dockerfile is in the image.
# shellcheck disable=SC2016 # a dpkg-query format, not a shell expansion
installed=$(chroot "$rootfs" dpkg-query -W -f='${Package}\n')
while read -r p; do
    grep -qx "$p" <<<"$installed" || { echo "container test: $p (Dockerfile runtime stage) is not installed" >&2; exit 1; }
done < "$work/image/packages.txt"

mkdir -p "$work/data"
cat > "$work/data/job.yaml" <<'EOF'
name: container
inputs:
  - /images
output: /var/lib/tessera/out
outputs:
  - preset: widget
    path: "{dir}/{stem}.{ext}"
EOF
chown -R 10001:10001 "$work/data"
images="$PWD/examples/images"

ran=""
if command -v podman >/dev/null && [ -f "$work/image/tessera.oci.tar" ]; then
    id=$(podman load -q -i "$work/image/tessera.oci.tar" 2>/dev/null | awk '{print $NF}') || id=""
    if [ -n "$id" ] && podman run --rm -v "$work/data:/var/lib/tessera" -v "$images:/images:ro" "$id" \
            run job.yaml -w 2 > "$work/run.log" 2>&1; then
        ran="podman"
    else
        echo "container test: podman cannot run containers here ($(tail -1 "$work/run.log" 2>/dev/null)); using unshare+chroot"
    fi
    if [ -n "$id" ]; then podman rmi -f "$id" >/dev/null 2>&1 || true; fi
fi
if [ -z "$ran" ]; then
    mkdir -p "$rootfs/images"
    unshare --mount --pid --fork sh -c "
        mount --bind '$work/data' '$rootfs/var/lib/tessera' && mount --bind -o ro '$images' '$rootfs/images' &&
        mount -t proc proc '$rootfs/proc' && mount -t tmpfs tmpfs '$rootfs/tmp' &&
        chroot --userspec=10001:10001 '$rootfs' sh -c 'cd /var/lib/tessera && HOME=/var/lib/tessera tessera run job.yaml -w 2'
    " > "$work/run.log" 2>&1 || { cat "$work/run.log" >&2; echo "container test: tessera run failed" >&2; exit 1; }
    ran="unshare+chroot"
fi

outputs=$(find "$work/data/out" -type f \( -name '*.jpg' -o -name '*.png' -o -name '*.webp' \) | wc -l)
inputs=$(find "$images" -type f \( -iname '*.jpg' -o -iname '*.png' -o -iname '*.heic' -o -iname '*.avif' -o -iname '*.webp' \) | wc -l)
[ "$outputs" -eq "$inputs" ] || { cat "$work/run.log" >&2; echo "container test: $outputs outputs for $inputs inputs" >&2; exit 1; }
owners=$(find "$work/data/out" -type f -printf '%u:%g\n' | sort -u)
[ "$owners" = "10001:10001" ] || { echo "container test: outputs owned by $owners, not 10001" >&2; exit 1; }
size=$(du -sm "$rootfs" | cut -f1)
gz=$(tar -C "$rootfs" -c . | gzip -6 | wc -c)
echo "container test: ok ($ran): $outputs outputs as uid 10001; image $size MB, $((gz / 1048576)) MB gzip;" \
    "$(grep -m1 'images in' "$work/run.log" || tail -1 "$work/run.log")"
