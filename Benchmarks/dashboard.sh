#!/usr/bin/env bash
# Dashboard figures (release build): for a no-op job of N tasks (default 1,000,000) and of
# 100 tasks, with the dashboard on: the page's first paint in headless chromium (Selenium),
# the size and fetch time of one state snapshot, the interval between pushed updates,
# and the big job's throughput with the dashboard on and off (the probe runs during the
# first, so compare on/off over several runs).
# usage: Benchmarks/dashboard.sh [TASKS]   (needs chromium, chromium-driver, python3 selenium)
set -euo pipefail
cd "$(dirname "$0")/.."
big=${1:-1000000}
tessera=${TESSERA:-$PWD/.build/release/tessera}
[ -x "$tessera" ] || swift build -c release >/dev/null
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

cat > "$work/probe.py" <<'PY'
import json, sys, time, urllib.request
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
url = sys.argv[1]
o = webdriver.ChromeOptions()
for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]: o.add_argument(a)
o.binary_location = "/usr/bin/chromium"
d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=o)
t0 = time.time(); d.get(url)
while not d.find_elements("css selector", "#job h2"): time.sleep(0.01)
paint = time.time() - t0
# Updates: the status line changes on every event.
seen, t1 = [], time.time()
last = d.execute_script("return document.getElementById('status').textContent")
while time.time() - t1 < 5:
    now = d.execute_script("return document.getElementById('status').textContent")
    if now != last: seen.append(time.time()); last = now
    time.sleep(0.02)
d.quit()
t2 = time.time(); body = urllib.request.urlopen(url + "api/state").read(); fetch = time.time() - t2
gaps = [b - a for a, b in zip(seen, seen[1:])]
print(f"first paint {paint * 1000:.0f} ms; state snapshot {len(body) / 1024:.1f} kB fetched in {fetch * 1000:.1f} ms; "
      f"updates every {sum(gaps) / max(1, len(gaps)):.2f} s ({len(seen)} in 5 s)")
PY

run() { # tasks dashboard(0/1)
    local n=$1 dash=$2 dir=$work/run-$1-$2
    mkdir -p "$dir"
    python3 -c "
with open('$dir/m.txt', 'w') as f:
    for i in range($n): f.write(f'/nonexistent/d{i // 1000}/f{i}.jpg\n')"
    printf 'name: noop-%s\nkind: noop\ninputs: [{manifest: %s/m.txt}]\noutput: %s/out\n' "$n" "$dir" "$dir" > "$dir/job.yaml"
    local args=(coordinator --bind "ipc://$dir/c.sock" --journal "$dir/j.sqlite" --log-level warning)
    [ "$dash" = 1 ] && args+=(--metrics-port "$port" --dashboard)
    "$tessera" "${args[@]}" & local coord=$!
    until "$tessera" status --coordinator "ipc://$dir/c.sock" --timeout 1 >/dev/null 2>&1; do sleep 0.05; done
    "$tessera" worker --connect "ipc://$dir/c.sock" --prefetch 4000 --log-level warning & local w1=$!
    "$tessera" worker --connect "ipc://$dir/c.sock" --prefetch 4000 --log-level warning & local w2=$!
    local job t0 t1
    job=$("$tessera" submit "$dir/job.yaml" --coordinator "ipc://$dir/c.sock" --json | python3 -c "import json,sys; print(json.load(sys.stdin)['job'])")
    t0=$(date +%s.%N)
    if [ "$dash" = 1 ]; then sleep 0.5; echo -n "$n tasks, mid-job: "; python3 "$work/probe.py" "http://127.0.0.1:$port/"; fi
    "$tessera" wait "$job" --coordinator "ipc://$dir/c.sock" --timeout 900 >/dev/null
    t1=$(date +%s.%N)
    [ "$dash" = 1 ] && [ "$n" -lt 1000 ] || python3 -c "print(f'$n tasks, dashboard $([ "$dash" = 1 ] && echo on || echo off): {$n/($t1-$t0):,.0f} tasks/s (coordinator peak RSS {int(open(\"/proc/$coord/status\").read().split(\"VmHWM:\")[1].split()[0]) / 1024:.0f} MB)')"
    kill "$w1" "$w2" "$coord"; wait "$w1" "$w2" "$coord" 2>/dev/null || true
}
echo "machine: $(nproc) cores"
run 100 1
run "$big" 1
run "$big" 0
