#!/usr/bin/env bash
# Quick single-core comparison at one box size: tessera render (1 thread) vs
# vipsthumbnail (VIPS_CONCURRENCY=1), both one process over the same JPEGs, each
# run 3 times, interleaved; median images/s, peak RSS, then SSIM/PSNR against the
# gold reference (Benchmarks/quality.py).
# usage: Benchmarks/thumb256.sh [PHOTO_DIR] [SIZE] [QUALITY]
set -euo pipefail
cd "$(dirname "$0")/.."
src=${1:-../shared/corpus/photos}
size=${2:-256}
q=${3:-80}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src"
for f in "$src"/*.jpg "$src"/*.jpeg; do [ -e "$f" ] && ln -s "$(realpath "$f")" "$work/src/"; done
n=$(find "$work/src" -mindepth 1 -maxdepth 1 | wc -l)
printf '{"format":"tessera.recipe","version":1,"operations":[{"op":"resize","width":%d,"height":%d}],"output":{"format":"jpeg","quality":%s}}\n' \
    "$size" "$size" "0.$q" > "$work/recipe.json"
tessera=.build/release/tessera
[ -x $tessera ] || swift build -c release >/dev/null
run() { # command... ; prints wall seconds and peak RSS (kB)
    /usr/bin/time -o "$work/time" -f '%e %M' "$@" >/dev/null 2>&1 || true
    tail -1 "$work/time"
}
declare -A secs rss
for _ in 1 2 3; do
    rm -rf "$work/tess" "$work/vips"; mkdir -p "$work/vips"
    read -r s m < <(run $tessera render "$work/src" --recipe "$work/recipe.json" -o "$work/tess" -t 1 --quiet)
    secs[tessera]+="$s "; rss[tessera]+="$m "
    read -r s m < <(run env VIPS_CONCURRENCY=1 vipsthumbnail "$work"/src/* --size "${size}x${size}" -o "$work/vips/%s.jpg[Q=$q]")
    secs[vips]+="$s "; rss[vips]+="$m "
done
median() { tr ' ' '\n' | grep -v '^$' | sort -n | sed -n 2p; }
echo "$n JPEGs from $src, box ${size}x${size}, quality $q, one core, median of 3"
for t in tessera vips; do
    s=$(echo "${secs[$t]}" | median); m=$(echo "${rss[$t]}" | tr ' ' '\n' | grep -v '^$' | sort -n | tail -1)
    printf '%-8s %6.2f s  %6.1f images/s  peak RSS %6.1f MB   (runs: %s)\n' "$t" "$s" "$(echo "$n / $s" | bc -l)" "$(echo "$m / 1024" | bc -l)" "${secs[$t]}"
done
python3 Benchmarks/quality.py "$work/src" "$work/tess" "$work/vips" | sed "s|$work/||"
