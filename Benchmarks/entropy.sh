#!/usr/bin/env bash
# Huffman decoding alone: libjpeg-turbo's decoders against Tessera's (jpeg_entropy.c: baseline
# and progressive), the same files at each DCT scale, interleaved runs, best of RUNS. The
# checksums must match.
#
#   Benchmarks/entropy.sh [DIR (default ../shared/corpus/photos)] [RUNS (3)] [SCALES ("1 2 3 4 8")]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir=${1:-$root/../shared/corpus/photos}
runs=${2:-3}
scales=${3:-1 2 3 4 8}
bin=$(mktemp -d)/entropy_loop
trap 'rm -rf "$(dirname "$bin")"' EXIT
cc -O2 -o "$bin" "$root/Benchmarks/entropy/entropy_loop.c" "$root/Sources/TesseraShim/jpeg_entropy.c" \
    -I"$root/Sources/TesseraShim/include" -I"$root/Sources/TesseraShim" -ljpeg -lpthread
shopt -s nullglob
files=("$dir"/*.jpg "$dir"/*.jpeg "$dir"/*.JPG)
[ ${#files[@]} -gt 0 ] || { echo "no JPEGs in $dir" >&2; exit 2; }
printf '| scale | libjpeg-turbo | Tessera | Tessera / libjpeg-turbo |\n| --- | --- | --- | --- |\n'
for s in $scales; do
    best0=999 best1=999 sum0="" sum1=""
    for _ in $(seq "$runs"); do
        for own in 0 1; do
            out=$("$bin" "$own" "$s" 1 "${files[@]}")
            t=$(sed -E 's/.* in ([0-9.]+) s.*/\1/' <<< "$out"); c=${out##* }
            if [ "$own" = 0 ]; then best0=$(echo "if ($t < $best0) $t else $best0" | bc); sum0=$c
            else best1=$(echo "if ($t < $best1) $t else $best1" | bc); sum1=$c; fi
        done
    done
    [ "$sum0" = "$sum1" ] || { echo "checksums differ at $s/8: $sum0 / $sum1" >&2; exit 1; }
    printf '| %s/8 | %.3f s | %.3f s | %.3f× |\n' "$s" "$best0" "$best1" "$(echo "$best1 / $best0" | bc -l)"
done
echo "($(basename "$dir"): ${#files[@]} files, baseline and progressive (other multi-scan files skipped); best of $runs)"
