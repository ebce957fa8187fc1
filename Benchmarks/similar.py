#!/usr/bin/env python3
"""`tessera similar` on many fingerprints: N records with random pHashes, a tenth of them with
a near copy (1 to 10 random bits flipped), grouped at the default threshold; wall time and peak
RSS of the command, and whether every planted pair was found.

  Benchmarks/similar.py [--records 100000] [--repeats 3]
"""
import argparse, json, os, random, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESSERA = os.environ.get("TESSERA", os.path.join(ROOT, ".build/release/tessera"))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--records", type=int, default=100000)
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()
    rng = random.Random(1)
    hashes = [rng.getrandbits(64) for _ in range(a.records - a.records // 10)]
    planted = []
    for k in range(a.records // 10):
        i = rng.randrange(len(hashes))
        v = hashes[i]
        for _ in range(1 + k % 10):
            v ^= 1 << rng.randrange(64)
        planted.append((i, len(hashes)))
        hashes.append(v)
    work = tempfile.mkdtemp(prefix="tessera-similar-")
    path = os.path.join(work, "records.jsonl")
    with open(path, "w") as f:
        for n, h in enumerate(hashes):
            f.write(json.dumps({"type": "record", "version": 1, "input": f"/photos/{n}.jpg", "status": "succeeded",
                                "fingerprints": {"phash": f"{h:016x}", "dhash": "0" * 16, "averageColor": "#000000",
                                                 "dominantColor": "#000000"}}) + "\n")
    times, rss, out = [], [], ""
    for _ in range(a.repeats):
        t = time.monotonic()
        r = subprocess.run(["/usr/bin/time", "-f", "%M", TESSERA, "similar", path, "--json"], capture_output=True, text=True)
        times.append(time.monotonic() - t)
        if r.returncode != 0:
            sys.exit(r.stderr[-2000:])
        rss.append(int(r.stderr.strip().splitlines()[-1]) // 1024)
        out = r.stdout
    group = {}
    for g, line in enumerate(out.splitlines()):
        for name in json.loads(line):
            group[int(name.split("/")[-1].split(".")[0])] = g
    found = sum(1 for i, j in planted if i in group and group.get(i) == group.get(j))
    print(f"{len(hashes)} records, {len(out.splitlines())} groups; planted pairs found {found} of {len(planted)}; "
          f"wall {statistics.median(times):.2f} s (min {min(times):.2f}, max {max(times):.2f}), peak RSS {max(rss)} MB")


if __name__ == "__main__":
    main()
