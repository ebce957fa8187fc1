#!/usr/bin/env bash
# Tile pyramid of one very large JPEG: Tessera with 1 and 2 local workers vs
# `vips dzsave` (Debian's 8.14, and 8.18 from PyPI on 2 threads, timed inside Python when
# pyvips-binary is installed), same file, same settings (Deep Zoom, 254 px tiles, overlap 1, JPEG q75),
# interleaved, REPEATS runs each; median wall time, peak RSS of every worker (Tessera's
# per-task accounting) and of the whole command (GNU time: the largest of the process and
# its children), then the grid, dimension and SSIM check of Tessera's pyramid against
# vips' (Benchmarks/tiles_compare.py).
#
# usage: Benchmarks/tiles.sh [SOURCE.jpg] [REPEATS]
#   Without SOURCE, makes a 12,000 x 9,000 (108 MP) baseline JPEG (q90, 4:2:0, no restart
#   markers) by tiling 4000x3000 crops of nine corpus photos with vips, and a copy with a
#   restart marker every MCU row (both kinds are measured).
# Outputs go under $TMPDIR (default /tmp): TMPDIR=/dev/shm takes the disk out of the comparison.
# TESSERA_BASELINE=/path/to/an/older/tessera adds it (1 and 2 workers), interleaved with this
# build, for a before/after in one run.
# Needs libvips-tools (vips, vipsheader), GNU time; pip installs numpy, scipy and pillow
# into .build-bench-venv/ for the SSIM check.
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=${2:-3}
tessera=$PWD/.build/release/tessera
[ -x "$tessera" ] || swift build -c release --product tessera >/dev/null
command -v vips >/dev/null || { echo "needs vips (apt-get install libvips-tools)" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-tiles.XXXXXX")
trap 'rm -rf "$work"' EXIT
venv=$PWD/.build-bench-venv
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import numpy, scipy, PIL' 2>/dev/null; then
    python3 -m venv "$venv" && "$venv/bin/pip" install -q numpy scipy pillow
fi

sources=()
if [ -n "${1:-}" ]; then
    sources=("$(realpath "$1")")
else
    photos=../shared/corpus/photos
    i=0
    for f in "$photos"/*.jpg; do
        if [ "$(vipsheader -f width "$f")" -lt 4000 ] || [ "$(vipsheader -f height "$f")" -lt 3000 ]; then continue; fi
        vips crop "$f" "$work/c$i.v" 0 0 4000 3000
        i=$((i + 1)); [ $i -eq 9 ] && break
    done
    [ $i -eq 9 ] || { echo "need nine corpus photos of at least 4000x3000" >&2; exit 1; }
    vips arrayjoin "$(for j in $(seq 0 8); do printf '%s ' "$work/c$j.v"; done)" "$work/big.v" --across 3
    vips jpegsave "$work/big.v" "$work/big108.jpg" --Q 90
    # 12000 px / 16 px MCUs = 750 MCUs per row.
    vips jpegsave "$work/big.v" "$work/big108-rst.jpg" --Q 90 --restart-interval 750
    rm -f "$work"/*.v
    sources=("$work/big108.jpg" "$work/big108-rst.jpg")
fi

# Deleting thousands of files leaves the file system busy (journal commits, discards) for
# a while: settle before every timed run, so that no run pays for the one before.
settle() { rm -rf "$@"; sync; sleep 3; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

for src in "${sources[@]}"; do
    name=$(basename "$src" .jpg)
    echo "== $name: $(vipsheader "$src" | cut -d: -f2-), $(( $(stat -c %s "$src") / 1000000 )) MB, restart interval $("$tessera" inspect "$src" --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["info"].get("restartInterval") or 0)' 2>/dev/null || echo '?')"
    cat > "$work/job.yaml" <<YAML
name: pyramid $name
kind: tiles
inputs: ["$src"]
output: $work/tess
tiles: {layout: deepzoom, tileSize: 254, overlap: 1, format: jpeg, quality: 0.75}
options: {incremental: false}
YAML
    declare -A secs=() rss=() wrss=()
    for _ in $(seq "$repeats"); do
        for w in 1 2 b1 b2; do
            bin=$tessera; n=$w
            if [ "${w#b}" != "$w" ]; then
                [ -n "${TESSERA_BASELINE:-}" ] || continue
                bin=$TESSERA_BASELINE; n=${w#b}
            fi
            settle "$work/tess"
            /usr/bin/time -o "$work/time" -f '%e %M' "$bin" run "$work/job.yaml" -w "$n" --journal "$work/j$w.sqlite" --json >"$work/out.json"
            read -r s m <"$work/time"
            key=w$w; [ "${w#b}" != "$w" ] && key=$w
            secs[$key]+="$s "; rss[$key]+="$m "
            wrss[$key]=$(python3 -c 'import json,sys
s=[json.loads(l) for l in open(sys.argv[1]) if "workerPeakRSSBytes" in l][-1]
print(" ".join("%.1f" % (v/1e6) for v in sorted(s["workerPeakRSSBytes"].values())))' "$work/out.json")
            rm -f "$work/j$w.sqlite"*
        done
        settle "$work/vips" "$work/vips_files" "$work/vips.dzi"
        /usr/bin/time -o "$work/time" -f '%e %M' vips dzsave "$src" "$work/vips" --tile-size 254 --overlap 1 --suffix .jpeg[Q=75]
        read -r s m <"$work/time"
        secs[vips]+="$s "; rss[vips]+="$m "
        if python3 -c 'import pyvips' 2>/dev/null; then
            settle "$work/v18" "$work/v18_files" "$work/v18.dzi"
            /usr/bin/time -o "$work/time" -f '%e %M' env VIPS_CONCURRENCY=2 python3 -c '
import sys, time, pyvips
t = time.perf_counter()
pyvips.Image.new_from_file(sys.argv[1], access="sequential").dzsave(sys.argv[2], tile_size=254, overlap=1, suffix=".jpeg[Q=75]")
print("%.2f" % (time.perf_counter() - t), file=open(sys.argv[3], "w"))' "$src" "$work/v18" "$work/v18.secs"
            read -r s m <"$work/time"
            secs[v18]+="$(cat "$work/v18.secs") "; rss[v18]+="$m "
        fi
    done
    for t in w1 w2 b1 b2 vips v18; do
        [ -n "${secs[$t]:-}" ] || continue
        s=$(echo "${secs[$t]}" | tr ' ' '\n' | grep -v '^$' | median)
        m=$(echo "${rss[$t]}" | tr ' ' '\n' | grep -v '^$' | sort -n | tail -1)
        label=$t; [ "$t" = w1 ] && label="tessera, 1 worker"; [ "$t" = w2 ] && label="tessera, 2 workers"; [ "$t" = b1 ] && label="baseline, 1 worker"; [ "$t" = b2 ] && label="baseline, 2 workers"; [ "$t" = vips ] && label="vips dzsave"; [ "$t" = v18 ] && label="vips 8.18 dzsave (2 thr)"
        extra=""; [ -n "${wrss[$t]:-}" ] && extra="; worker peak RSS (MB): ${wrss[$t]}"
        printf '%-20s %6.2f s (runs: %s) peak RSS of the command %6.1f MB%s\n' "$label" "$s" "${secs[$t]}" "$(echo "$m / 1024" | bc -l)" "$extra"
    done
    grep -h '"pyramids"' "$work/out.json" | python3 -c 'import json,sys; p=json.loads(sys.stdin.read())["pyramids"]; print("tessera:", p["tiles"], "tiles,", p["tasks"], "tasks, scales", p["scales"], "band starts", p["seeks"])' || true
    "$venv/bin/python" Benchmarks/tiles_compare.py "$work/tess/${name}_files" "$work/vips_files" | tail -4
    unset secs rss wrss
done
