#!/usr/bin/env python3
"""Tessera's JPEG efforts against libjpeg-turbo (effort 0) on many photos: bytes at equal
SSIMULACRA2 70 and 80 (pareto.py's method), bytes at the SSIM effort 0 reaches at q60 and q80
(Gaussian SSIM, as bench.py), and at the same setting (q80) the SSIM and SSIMULACRA2 deltas and
the bytes ratio.

  Benchmarks/jpeg_efforts.py [--photos DIR] [--count 31] [--box 1280x720] [--jobs 2] [--times-only]

Every photo is rendered once, losslessly, to the box; each effort encodes that PNG at
qualities 50…90; the figures are geometric (bytes) or arithmetic (deltas) means over photos.
Then encode time: each effort renders the photos to 256 px and to 1280×720 at q80 on one
thread, 5 times; per photo the least `encode` milliseconds of its records, and the median over
photos (the encoder alone: decode and resize are the same for every effort).
Needs: pip install ssimulacra2 numpy pillow; a release build.
"""
import argparse, glob, json, math, os, shutil, statistics, subprocess, sys, tempfile
from concurrent.futures import ProcessPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pareto, quality  # noqa: E402

QUALITIES = [50, 60, 70, 80, 90]
VARIANTS = [("effort 0 (libjpeg-turbo)", ["--effort", "0"]), ("effort 1 (tables)", ["--effort", "1"]),
            ("effort 2 (dead zone; default)", ["--effort", "2"]),
            ("effort 2 progressive", ["--effort", "2", "--progressive"]),
            ("effort 3 (trellis)", ["--effort", "3"]), ("effort 3 progressive", ["--effort", "3", "--progressive"])]


def sweep(refs, work, n, extra):
    """(photo, quality) -> (bytes, path) for one variant."""
    r = pareto.tessera_sweep(refs, work, "jpeg", None, f"v{n}", extra, qualities=QUALITIES)
    return {key: (b, path) for key, (b, _, path) in r.items()}


def both(args):
    import numpy as np
    from PIL import Image
    ref, path = args
    x = np.asarray(Image.open(path).convert("RGB"), dtype=np.float64)
    y = np.asarray(Image.open(ref).convert("RGB"), dtype=np.float64)
    ssim = float(np.mean([quality.ssim_channel(x[:, :, c], y[:, :, c]) for c in range(3)]))
    return pareto.score(args), ssim


def encode_times(photos, work, box, extra, runs=5):
    """Median over photos of the least encode ms over `runs` renders."""
    best = {}
    for run in range(runs):
        d = os.path.join(work, f"time-{run}")
        r = subprocess.run([pareto.TESSERA, "render", *photos, "-s", box, "--format", "jpeg", "-q", "0.8", "-t", "1",
                            "-o", d, "--json", *extra], capture_output=True, text=True)
        shutil.rmtree(d, ignore_errors=True)
        for line in r.stdout.splitlines():
            rec = json.loads(line)
            if rec.get("type") == "record" and rec["status"] == "succeeded":
                ms = rec["timingsMilliseconds"]["encode"]
                best[rec["input"]] = min(ms, best.get(rec["input"], ms))
    return statistics.median(best.values())


def gmean(xs):
    return math.exp(statistics.mean(map(math.log, xs))) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--photos", default=pareto.CORPUS)
    ap.add_argument("--count", type=int, default=31)
    ap.add_argument("--box", default="1280x720")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--times-only", action="store_true", help="only the encode times")
    args = ap.parse_args()
    photos = sorted(glob.glob(os.path.join(args.photos, "*.jpg")))[: args.count]
    work = tempfile.mkdtemp(prefix="tessera-jpeg-efforts-")
    try:
        if not args.times_only:
            sweeps(args, photos, work)
        print(f"\nEncode time, ms per image (median over {len(photos)} photos of the best of 5 runs, one thread, q80)\n")
        print("| variant | 256 px | 1280×720 |")
        print("| --- | --- | --- |")
        base = None
        for label, extra in VARIANTS:
            t = [encode_times(photos, work, box, extra) for box in ("256x256", "1280x720")]
            base = base or t
            print(f"| {label} | {t[0]:.2f} ({t[0] / base[0]:.2f}x) | {t[1]:.2f} ({t[1] / base[1]:.2f}x) |", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def sweeps(args, photos, work):
    refs = os.path.join(work, "refs")
    subprocess.run([pareto.TESSERA, "render", *photos, "-s", args.box, "--format", "png", "-o", refs, "-t",
                    str(args.jobs), "--quiet"], check=True, capture_output=True)
    results = {label: sweep(refs, work, n, extra) for n, (label, extra) in enumerate(VARIANTS)}
    jobs = [(os.path.join(refs, s + ".png"), p) for r in results.values() for (s, _), (_, p) in r.items()]
    with ProcessPoolExecutor(args.jobs) as pool:
        scores = dict(zip([j[1] for j in jobs], pool.map(both, jobs, chunksize=4)))
    base = results[VARIANTS[0][0]]
    stems = sorted({s for (s, _) in base})
    print(f"{len(stems)} photos at {args.box}; relative to effort 0 (libjpeg-turbo)\n")
    print("| variant | bytes at SSIMULACRA2 70 | at 80 | bytes at effort 0's SSIM at q60 | at q80 "
          "| same setting (q80): SSIM, SSIMULACRA2, bytes |")
    print("| --- | --- | --- | --- | --- | --- |")
    for label, r in results.items():
        cells = []
        for target in (70, 80):
            ratios = []
            for stem in stems:
                m = pareto.at_target([(b, scores[p][0]) for (s, _), (b, p) in r.items() if s == stem], target)
                t = pareto.at_target([(b, scores[p][0]) for (s, _), (b, p) in base.items() if s == stem], target)
                if m and t:
                    ratios.append(m / t)
            cells.append(f"{gmean(ratios):.3f}x")
        for bq in (60, 80):
            ratios = []
            for stem in stems:
                target = scores[base[(stem, bq)][1]][1]
                m = pareto.at_target([(b, scores[p][1]) for (s, _), (b, p) in r.items() if s == stem], target)
                if m:
                    ratios.append(m / base[(stem, bq)][0])
            cells.append(f"{gmean(ratios):.3f}x")
        dss = statistics.mean(scores[r[(s, 80)][1]][1] - scores[base[(s, 80)][1]][1] for s in stems)
        ds2 = statistics.mean(scores[r[(s, 80)][1]][0] - scores[base[(s, 80)][1]][0] for s in stems)
        br = gmean([r[(s, 80)][0] / base[(s, 80)][0] for s in stems])
        print(f"| {label} | {' | '.join(cells)} | {dss:+.4f}, {ds2:+.2f}, {br:.3f}x |", flush=True)


if __name__ == "__main__":
    main()
