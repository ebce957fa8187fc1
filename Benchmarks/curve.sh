#!/usr/bin/env bash
# What CURVE costs: the same jobs through a coordinator on TCP with keys on and off,
# in one run, interleaved (release build):
#  1. no-op tasks (message overhead only), N tasks, 2 workers
#  2. thumbnails of a photo directory with --inline workers (every input and output byte
#     crosses the socket, encrypted with CURVE), 2 workers
# usage: Benchmarks/curve.sh [PHOTO_DIR] [NOOP_TASKS] [REPEATS]
set -euo pipefail
cd "$(dirname "$0")/.."
photos=$(realpath "${1:-../shared/corpus/photos}")
noop_tasks=${2:-50000}
repeats=${3:-3}
tessera=$PWD/.build/release/tessera
[ -x "$tessera" ] || swift build -c release >/dev/null
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
now() { date +%s.%N; }

for name in coordinator worker client; do "$tessera" keygen "$name" -o "$work/keys" >/dev/null; done
mkdir -p "$work/allow" && cp "$work/keys/worker.pub" "$work/keys/client.pub" "$work/allow/"
port=$((20000 + RANDOM % 20000))

start_pool() { # mode(curve|plain) journal worker-args...
    local mode=$1 journal=$2; shift 2
    endpoint=tcp://127.0.0.1:$port
    port=$((port + 1))
    local keys=() wkeys=()
    if [ "$mode" = curve ]; then
        keys=(--curve-secret "$work/keys/coordinator.secret" --allow "$work/allow")
        wkeys=(--curve-secret "$work/keys/worker.secret" --server-key "$work/keys/coordinator.pub")
        ckeys=(--curve-secret "$work/keys/client.secret" --server-key "$work/keys/coordinator.pub")
    else
        ckeys=()
    fi
    "$tessera" coordinator --bind "$endpoint" --journal "$journal" --log-level warning "${keys[@]}" &
    coord=$!
    until "$tessera" status --coordinator "$endpoint" --timeout 1 "${ckeys[@]}" >/dev/null 2>&1; do sleep 0.05; done
    workers=()
    for _ in 1 2; do
        "$tessera" worker --connect "$endpoint" --log-level warning "${wkeys[@]}" "$@" & workers+=($!)
    done
}
stop_pool() { kill "${workers[@]}" "$coord" 2>/dev/null || true; wait 2>/dev/null || true; }

run_job() { # jobfile -> seconds
    local job t0 t1
    job=$("$tessera" submit "$1" --coordinator "$endpoint" --json "${ckeys[@]}" | python3 -c "import json,sys; print(json.load(sys.stdin)['job'])")
    t0=$(now)
    "$tessera" wait "$job" --coordinator "$endpoint" "${ckeys[@]}" >/dev/null
    t1=$(now)
    python3 -c "print($t1 - $t0)"
}

python3 -c "
with open('$work/noop.txt', 'w') as f:
    for i in range($noop_tasks): f.write(f'/nonexistent/d{i // 1000}/f{i}.jpg\n')"
printf 'name: noop\nkind: noop\ninputs: [{manifest: %s}]\noutput: %s/noop-out\n' "$work/noop.txt" "$work" > "$work/noop.yaml"
images=$(find "$photos" -type f \( -iname '*.jpg' -o -iname '*.jpeg' -o -iname '*.png' \) | wc -l)
bytes=$(find "$photos" -type f \( -iname '*.jpg' -o -iname '*.jpeg' -o -iname '*.png' \) -printf '%s\n' | awk '{s+=$1} END {print s}')

echo "machine: $(nproc) cores, $(uname -r); $noop_tasks no-op tasks; $images photos ($((bytes / 1000000)) MB) from $photos"
: > "$work/results.txt"
for rep in $(seq "$repeats"); do
    for mode in plain curve; do
        start_pool "$mode" "$work/noop-$mode-$rep.sqlite" --prefetch 2000
        echo "noop $mode $(run_job "$work/noop.yaml")" >> "$work/results.txt"
        stop_pool
        printf 'name: inline\ninputs: [%s]\noutput: %s/out-%s-%s\noutputs: [{preset: thumbnail}]\n' "$photos" "$work" "$mode" "$rep" > "$work/inline.yaml"
        start_pool "$mode" "$work/inline-$mode-$rep.sqlite" --inline --prefetch 0
        echo "inline $mode $(run_job "$work/inline.yaml")" >> "$work/results.txt"
        stop_pool
    done
done
python3 - "$work/results.txt" "$noop_tasks" "$images" "$bytes" <<'PY'
import sys, statistics
rows = [l.split() for l in open(sys.argv[1])]
noop, images, mb = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]) / 1e6
def med(kind, mode): return statistics.median(float(s) for k, m, s in rows if k == kind and m == mode)
for kind, n, unit in (("noop", noop, "tasks"), ("inline", images, "images")):
    p, c = med(kind, "plain"), med(kind, "curve")
    extra = f", {mb / p:.1f} vs {mb / c:.1f} MB/s of input" if kind == "inline" else ""
    print(f"{kind:6s}: plain {n / p:,.0f} {unit}/s, CURVE {n / c:,.0f} {unit}/s (median of {len(rows) // 4}): "
          f"CURVE costs {100 * (c - p) / p:+.1f}% time{extra}")
PY
