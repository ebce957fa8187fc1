#!/usr/bin/env bash
# The container image, built and run: deploy/docker/build-rootfs.sh makes the root
# filesystem (the packages of deploy/docker/runtime-packages, extracted as the Dockerfile's
# runtime stage does, + the static release binary) and, with buildah, the OCI image; then
# `tessera run` runs a job on the bundled sample images inside it, as the Dockerfile's user
# (10001), under podman when it can run containers here, else in a mount+PID namespace
# with chroot (unshare). Checks: the job's
# outputs exist and belong to 10001, every runtime package is in the image and no package
# manager or distribution shell is, and prints the sizes (unpacked, and the OCI archive's
# gzip layer: what a registry stores and a node pulls); then builds the Dockerfile's rootfs
# stage with buildah and checks it extracts the same packages. Needs root and mmdebstrap;
# skipped with the reason otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
skip() { echo "container test: skipped ($1)"; exit 0; }
[ "$(id -u)" -eq 0 ] || skip "needs root: mmdebstrap and chroot"
command -v mmdebstrap >/dev/null || skip "mmdebstrap is not installed (apt-get install mmdebstrap)"

work=$(mktemp -d)
images_made=()  # podman images this test made (removed at exit, also after Ctrl-C)
cleanup() {
    [ ${#images_made[@]} -eq 0 ] || podman rmi -f "${images_made[@]}" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
deploy/docker/build-rootfs.sh "$work/image"
rootfs="$work/image/rootfs"

# Every package of deploy/docker/runtime-packages (what the Dockerfile's runtime stage
# extracts, with the same script) is in the image, recorded where image scanners look.
while read -r p; do
    [ -f "$rootfs/var/lib/dpkg/status.d/$p" ] || { echo "container test: $p (deploy/docker/runtime-packages) is not in the image" >&2; exit 1; }
done < <(grep -v '^\s*\(#\|$\)' deploy/docker/runtime-packages)
# Distroless: no package manager or distribution shell, only busybox's applets.
for absent in dpkg apt-get bash; do
    [ ! -e "$rootfs/usr/bin/$absent" ] || { echo "container test: /usr/bin/$absent is in the image" >&2; exit 1; }
done

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

# podman with its default runtime (crun) first; where that cannot start containers (this
# project's CI sandbox: crun refuses its hybrid cgroup hierarchy, and rlimits at the host's
# hard limits are refused), runc with rlimits below them; else unshare+chroot.
ran=""
try_podman() {  # RUNTIME "GLOBAL OPTIONS" "RUN OPTIONS"
    local -a global run
    read -ra global <<<"$2"
    read -ra run <<<"$3"
    if podman "${global[@]}" run --rm "${run[@]}" -v "$work/data:/var/lib/tessera" -v "$images:/images:ro" \
            "$id" run job.yaml -w 2 > "$work/run.log" 2>&1; then
        ran="podman with $1"
    else
        echo "container test: podman with $1 cannot run containers here: $(tail -1 "$work/run.log")"
        return 1
    fi
}
if command -v podman >/dev/null && [ -f "$work/image/tessera.oci.tar" ]; then
    id=$(podman load -q -i "$work/image/tessera.oci.tar" 2>/dev/null | awk '{print $NF}') || id=""
    [ -z "$id" ] || images_made+=("$id")
    if [ -n "$id" ]; then
        try_podman crun "" "" \
            || { command -v runc >/dev/null \
                 && try_podman runc "--runtime runc" "--ulimit nofile=16384:16384 --ulimit nproc=4096:4096"; } \
            || echo "container test: using unshare+chroot"
    fi
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
if [ -f "$work/image/tessera.oci.tar" ]; then gz=$(stat -c %s "$work/image/tessera.oci.tar"); else gz=$(tar -C "$rootfs" -c . | gzip -6 | wc -c); fi
echo "container test: ok ($ran): $outputs outputs as uid 10001; image $size MB unpacked, $((gz / 1048576)) MB compressed;" \
    "$(grep -m1 'images in' "$work/run.log" || tail -1 "$work/run.log")"

# The Dockerfile's own rootfs stage, built by a Dockerfile builder (buildah bud; no registry
# here, so its debian:bookworm-slim is a stand-in made by mmdebstrap): it must extract the
# same packages as the image above. Its builder stage (the swift image) is not built.
if command -v buildah >/dev/null; then
    mmdebstrap --variant=minbase bookworm "$work/slim.tar" http://deb.debian.org/debian > "$work/slim.log" 2>&1 \
        || { tail -20 "$work/slim.log" >&2; echo "container test: the base stand-in failed" >&2; exit 1; }
    images_made+=(localhost/tessera-test-bookworm-slim localhost/tessera-test-rootfs-stage)
    podman import -q "$work/slim.tar" localhost/tessera-test-bookworm-slim >/dev/null
    tag=localhost/tessera-test-rootfs-stage
    buildah bud --isolation chroot --target rootfs --build-arg RUNTIME_IMAGE=localhost/tessera-test-bookworm-slim \
        -f deploy/docker/Dockerfile -t "$tag" . > "$work/bud.log" 2>&1 \
        || { tail -30 "$work/bud.log" >&2; echo "container test: the Dockerfile's rootfs stage failed" >&2; exit 1; }
    c=$(buildah from "$tag")
    stage=$(ls "$(buildah mount "$c")/out/rootfs/var/lib/dpkg/status.d")
    buildah umount "$c" >/dev/null && buildah rm "$c" >/dev/null
    [ "$stage" = "$(cat "$work/image/packages.txt")" ] \
        || { diff <(echo "$stage") "$work/image/packages.txt" >&2; echo "container test: the Dockerfile's stage extracts other packages" >&2; exit 1; }
    echo "container test: the Dockerfile's rootfs stage (buildah bud) extracts the same $(wc -l < "$work/image/packages.txt") packages"
fi
