#!/usr/bin/env bash
# Filter operations' cost (release build): the corpus photos rendered at 256 px and at
# 1280x720 with each operation alone, one thread, best of REPEATS; the cost of an
# operation is its time minus the plain render's, per image.
# usage: Benchmarks/filters.sh [PHOTO_DIR] [REPEATS]
set -euo pipefail
cd "$(dirname "$0")/.."
photos=$(realpath "${1:-../shared/corpus/photos}")
repeats=${2:-3}
tessera=${TESSERA:-$PWD/.build/release/tessera}
[ -x "$tessera" ] || swift build -c release >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
count=$(find "$photos" -maxdepth 1 -type f \( -iname '*.jpg' -o -iname '*.jpeg' -o -iname '*.png' \) | wc -l)

recipe() { # name box-json operations-after-resize [operations-before-resize]
    printf '{"format":"tessera.recipe","version":2,"name":"%s","operations":[%s{"op":"resize",%s}%s],"output":{"format":"jpeg","quality":0.8}}' \
        "$1" "${4:+$4,}" "$2" "$3" > "$work/$1.json"
}
best() { # recipe-file -> seconds (best of $repeats)
    local b=999 s e
    for _ in $(seq "$repeats"); do
        rm -rf "$work/out"
        s=$(date +%s.%N)
        "$tessera" render "$photos" -r "$1" -o "$work/out" --threads 1 >/dev/null 2>&1 || true
        e=$(date +%s.%N)
        b=$(python3 -c "print(min($b, $e - $s))")
    done
    echo "$b"
}

echo "machine: $(nproc) cores; $count photos; one thread, best of $repeats"
for box in '"width":256,"height":256' '"width":1280,"height":720'; do
    label=$(echo "$box" | tr -dc '0-9,' | tr ',' 'x')
    recipe plain "$box" ""
    base=$(best "$work/plain.json")
    echo "$label plain: $(python3 -c "print(f'{1000 * $base / $count:.1f} ms/image')")"
    # NAME:JSON after the resize; NAME:<JSON before it.
    for op in 'sharpen:{"op":"sharpen","sigma":0.8,"amount":0.6}' 'blur:{"op":"blur","sigma":1.5}' \
              'adjust:{"op":"adjust","exposure":0.3,"contrast":1.1,"saturation":1.2,"sepia":0.2}' \
              'tint+vignette:{"op":"adjust","tint":"#ffaa5a","tintAmount":0.5,"vignette":0.4}' \
              'pad:{"op":"pad","top":16,"right":16,"bottom":16,"left":16}' \
              'pad-blur:{"op":"pad","top":40,"bottom":40,"fill":"blur"}' \
              "overlay:{\"op\":\"overlay\",\"path\":\"$PWD/examples/recipes/mark.png\",\"width\":0.25,\"opacity\":0.7,\"margin\":8}" \
              'crop:<{"op":"crop","x":0.1,"y":0.1,"width":0.8,"height":0.8,"units":"fractions"}' \
              'crop-attention:<{"op":"crop","aspect":1,"gravity":"attention"}' \
              'trim:<{"op":"trim"}' \
              'gravity:' 'attention:'; do
        name=${op%%:*}
        json=${op#*:}
        if [ "$name" = gravity ] || [ "$name" = attention ]; then
            recipe "$name" "$box,\"mode\":\"fill\",\"gravity\":\"$( [ "$name" = gravity ] && echo north || echo attention)\"" ""
        elif [ "${json:0:1}" = "<" ]; then
            recipe "$name" "$box" "" "${json:1}"
        else
            recipe "$name" "$box" ",$json"
        fi
        t=$(best "$work/$name.json")
        python3 -c "print(f'$label $name: {1000 * ($t - $base) / $count:+.1f} ms/image over plain')"
    done
done
