#!/usr/bin/env bash
# Worker-pool figures (release build):
#  1. tasks/s through the coordinator with no-op tasks (N tasks, 2 workers)
#  2. tessera run with 1 and 2 workers on a photo directory (fresh journal each run)
#  3. planning time and coordinator peak memory for a 100,000-file job
# usage: Benchmarks/pool.sh [PHOTO_DIR] [NOOP_TASKS]
set -euo pipefail
cd "$(dirname "$0")/.."
photos=$(realpath "${1:-../shared/corpus/photos}")
noop_tasks=${2:-200000}
tessera=$PWD/.build/release/tessera
[ -x "$tessera" ] || swift build -c release >/dev/null
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
now() { date +%s.%N; }
peak_kb() { awk '/VmHWM/ {print $2}' "/proc/$1/status"; }

start_pool() { # journal workers worker-args...
    local journal=$1 n=$2; shift 2
    "$tessera" coordinator --bind "ipc://$work/c.sock" --journal "$journal" --log-level warning &
    coord=$!
    until "$tessera" status --coordinator "ipc://$work/c.sock" --timeout 1 >/dev/null 2>&1; do sleep 0.05; done
    workers=()
    for _ in $(seq "$n"); do
        "$tessera" worker --connect "ipc://$work/c.sock" --log-level warning "$@" & workers+=($!)
    done
}
stop_pool() { kill "${workers[@]}" "$coord" 2>/dev/null || true; wait 2>/dev/null || true; }

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r)"

# 1. No-op throughput: a manifest of paths that need not exist (no-op tasks never read them).
python3 -c "
import sys
with open('$work/noop.txt', 'w') as f:
    for i in range($noop_tasks): f.write(f'/nonexistent/d{i // 1000}/f{i}.jpg\n')"
printf 'name: noop\nkind: noop\ninputs: [{manifest: %s}]\noutput: %s/noop-out\n' "$work/noop.txt" "$work" > "$work/noop.yaml"
start_pool "$work/noop.sqlite" 2 --prefetch 4000
sleep 0.5
job=$("$tessera" submit "$work/noop.yaml" --coordinator "ipc://$work/c.sock" --json | python3 -c "import json,sys; print(json.load(sys.stdin)['job'])")
t0=$(now)
"$tessera" wait "$job" --coordinator "ipc://$work/c.sock" --timeout 600 >/dev/null
t1=$(now)
noop_peak=$(peak_kb "$coord")
stop_pool
python3 -c "print(f'no-op tasks: $noop_tasks in {$t1-$t0:.2f} s = {$noop_tasks/($t1-$t0):,.0f} tasks/s through the coordinator (2 workers, journaled); coordinator peak RSS {$noop_peak/1024:.0f} MB')"

# 2. tessera run, 1 vs 2 workers, same photos, three runs each, interleaved.
for n in 1 2; do : > "$work/run$n.txt"; done
for rep in 1 2 3; do
    for n in 1 2; do
        out=$work/out-$n-$rep
        printf 'name: bench\ninputs: [%s]\noutput: %s\noutputs: [{preset: thumbnail}, {preset: favicon}]\n' "$photos" "$out" > "$work/run.yaml"
        "$tessera" run "$work/run.yaml" --workers $n --json | tail -1 | python3 -c "import json,sys; d=json.load(sys.stdin); print(d['tasksPerSecond'], d['tasks'], d['elapsedSeconds'])" >> "$work/run$n.txt"
    done
done
python3 - "$work" <<'PY'
import sys, statistics
w = sys.argv[1]
rates = {}
for n in (1, 2):
    rows = [list(map(float, l.split())) for l in open(f"{w}/run{n}.txt")]
    rates[n] = statistics.median(r[0] for r in rows)
    print(f"tessera run, {n} worker(s): median {rates[n]:.1f} images/s over {len(rows)} runs of {int(rows[0][1])} photos (thumbnail+favicon): {[round(r[0],1) for r in rows]}")
print(f"2 workers / 1 worker: {rates[2] / rates[1]:.2f}x")
PY

# 3. Planning a 100,000-file job (real files in 100 directories) and the coordinator's memory.
python3 -c "
import os
for d in range(100):
    os.makedirs(f'$work/many/d{d:03}', exist_ok=True)
    for i in range(1000): open(f'$work/many/d{d:03}/img{i:04}.jpg', 'wb').close()"
printf 'name: plan\nkind: noop\ninputs: [%s]\noutput: %s/plan-out\n' "$work/many" "$work" > "$work/plan.yaml"
start_pool "$work/plan.sqlite" 0
base=$(peak_kb "$coord")
"$tessera" submit "$work/plan.yaml" --coordinator "ipc://$work/c.sock" --json > "$work/plan.json"
after=$(awk '/VmRSS/ {print $2}' "/proc/$coord/status")
peak=$(peak_kb "$coord")
stop_pool
python3 -c "
import json
d = json.load(open('$work/plan.json'))
print(f\"planning 100,000 files: {d['tasks']} tasks in {d['planMilliseconds']:.0f} ms (walk + journal insert); coordinator RSS {$base/1024:.0f} MB idle, {$after/1024:.0f} MB holding the job, peak {$peak/1024:.0f} MB\")"
