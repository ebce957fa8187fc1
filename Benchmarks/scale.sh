#!/usr/bin/env bash
# The coordinator at scale (release build): a no-op job of N tasks (default 1,000,000)
# from a manifest, 2 workers.
#  1. submit time and coordinator peak RSS during planning (no workers yet)
#  2. workers run it; after about a third, the coordinator is SIGKILLed and restarted on
#     the same journal: time until `status` answers, peak RSS after the restart
#  3. the rest of the job: tasks/s, coordinator peak RSS over the run; every task exactly once
# usage: Benchmarks/scale.sh [TASKS]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1000000}
tessera=${TESSERA:-$PWD/.build/release/tessera}  # TESSERA=another build, to compare
[ -x "$tessera" ] || swift build -c release >/dev/null
work=$(mktemp -d)
trap 'kill -9 $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
now() { date +%s.%N; }
kb() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }
sock=ipc://$work/c.sock

coordinator() {
    "$tessera" coordinator --bind "$sock" --journal "$work/j.sqlite" --log-level warning &
    coord=$!
    until "$tessera" status --coordinator "$sock" --timeout 1 >/dev/null 2>&1; do sleep 0.02; done
}

python3 -c "
with open('$work/m.txt', 'w') as f:
    for i in range($n): f.write(f'/nonexistent/d{i // 1000}/f{i}.jpg\n')"
printf 'name: scale\nkind: noop\ninputs: [{manifest: %s}]\noutput: %s/out\n' "$work/m.txt" "$work" > "$work/job.yaml"

coordinator
base=$(kb $coord VmRSS)
t0=$(now)
job=$("$tessera" submit "$work/job.yaml" --coordinator "$sock" --json | python3 -c "import json,sys; print(json.load(sys.stdin)['job'])")
t1=$(now)
submit_peak=$(kb $coord VmHWM)
after_submit=$(kb $coord VmRSS)

workers=()
for _ in 1 2; do "$tessera" worker --connect "$sock" --log-level warning --prefetch 4000 & workers+=($!); done
done_count() { "$tessera" status "$job" --coordinator "$sock" --json --timeout 30 | python3 -c "
import json,sys; d=json.load(sys.stdin); j=d['jobs'][0] if 'jobs' in d else d; print(j['succeeded']+j['failed']+j['skipped']+j['cancelled'])"; }
while [ "$(done_count)" -lt $((n / 3)) ]; do sleep 0.2; done
run_peak=$(kb $coord VmHWM)
kill -9 $coord; wait $coord 2>/dev/null || true
t3=$(now)
coordinator
t4=$(now)
restart_rss=$(kb $coord VmRSS)
before=$(done_count)
t5=$(now)
"$tessera" wait "$job" --coordinator "$sock" --timeout 1200 >/dev/null
t6=$(now)
restart_peak=$(kb $coord VmHWM)
kill "${workers[@]}" "$coord" 2>/dev/null || true; wait 2>/dev/null || true
results=$(python3 -c "
import sqlite3; db = sqlite3.connect('$work/j.sqlite')
print(*db.execute('SELECT COUNT(*), COUNT(DISTINCT task) FROM results WHERE job = ?', ('$job',)).fetchone())")
python3 - <<PY
n=$n
print(f"machine: $(nproc) cores; tasks: {n:,} (no-op, manifest, 2 workers --prefetch 4000)")
print(f"submit: {$t1-$t0:.2f} s; coordinator RSS {$base/1024:.0f} MB idle, {$after_submit/1024:.0f} MB after submit, peak {$submit_peak/1024:.0f} MB")
print(f"run to a third: {$before:,} done; coordinator peak RSS {$run_peak/1024:.0f} MB before the SIGKILL")
print(f"restart: status answered {$t4-$t3:.2f} s after starting again; RSS {$restart_rss/1024:.0f} MB")
print(f"rest of the job: {n-$before:,} tasks in {$t6-$t5:.2f} s = {(n-$before)/($t6-$t5):,.0f} tasks/s; coordinator peak RSS after restart {$restart_peak/1024:.0f} MB")
rows, tasks = map(int, "$results".split())
print(f"journal: {rows:,} result rows for {tasks:,} tasks (expected {n:,} each)")
PY
