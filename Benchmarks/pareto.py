#!/usr/bin/env python3
"""Bytes at equal SSIMULACRA2, and encode time, for every encoder and effort: where each
format's defaults should sit, and how Tessera's JPEGs compare with the newest JPEG encoders.

  Benchmarks/pareto.py [--photos DIR] [--count 6] [--box 1280x720] [--jobs 2] [--formats jpeg,webp,avif,jxl]

Method (the same pixels for every encoder):
  1. each photo rendered once, losslessly, to the box (`tessera render -s BOX --format png`);
  2. each encoder codes that PNG over a quality sweep; SSIMULACRA2 (PyPI `ssimulacra2`) of each
     result against the PNG;
  3. per photo, the bytes at SSIMULACRA2 70 and 80 interpolated (log-bytes, linear in score)
     between the two sweep points around it; the figure is the geometric mean over photos of
     bytes relative to Tessera's JPEG at effort 0 (libjpeg-turbo as it comes: the standard's
     tables, optimised Huffman tables, 4:2:0);
  4. encode time: the median per image, from Tessera's records (`encode` ms) for its encoders,
     timed in-process for pyjpegli and pyvips (VIPS_CONCURRENCY=1).
Encoders: tessera jpeg at efforts 0 (libjpeg-turbo), 1 (Tessera's tables), 2 (and its dead-zone
quantiser and Huffman tables; the default), 3 (its trellis quantiser), 0 and 2 progressive; jpegli (PyPI pyjpegli); libvips 8.18 jpegsave with mozjpeg's options
(trellis_quant, overshoot_deringing, optimize_scans, quant_table 3; PyPI pyvips-binary);
tessera webp at methods 2/4/6; tessera avif at speeds 9/8/7/6; tessera jxl at efforts 3/5/7.
Needs: pip install ssimulacra2 pyjpegli pyvips pyvips-binary pillow; a release build.
"""
import argparse, glob, json, math, os, shutil, statistics, subprocess, sys, tempfile, time
from concurrent.futures import ProcessPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESSERA = os.environ.get("TESSERA", os.path.join(ROOT, ".build/release/tessera"))
CORPUS = os.path.join(ROOT, "..", "shared", "corpus", "photos")
QUALITIES = {"jpeg": [50, 65, 75, 85, 92], "webp": [50, 65, 75, 85, 92], "avif": [35, 50, 62, 75, 88],
             "jxl": [45, 60, 72, 82, 90]}
TARGETS = (70, 80)


def tessera_sweep(refs, work, fmt, effort, label, extra=(), qualities=None):
    """(photo, quality) -> (bytes, encode ms, path) for one Tessera encoder setting."""
    out = {}
    for q in qualities or QUALITIES[fmt]:
        d = os.path.join(work, f"{label}-{q}")
        cmd = [TESSERA, "render", refs, "--format", fmt, "-q", f"{q / 100:.2f}", "-t", "1", "-o", d, "--json"]
        if effort is not None:
            cmd += ["--effort", str(effort)]
        cmd += list(extra)
        r = subprocess.run(cmd, capture_output=True, text=True)
        for line in r.stdout.splitlines():
            rec = json.loads(line)
            if rec.get("type") != "record" or rec["status"] != "succeeded":
                continue
            o = rec["outputs"][0]
            stem = os.path.splitext(os.path.basename(rec["input"]))[0]
            out[(stem, q)] = (o["bytes"], rec["timingsMilliseconds"]["encode"], os.path.join(d, os.path.basename(o["path"])))
    return out


def python_sweep(refs, work, label, encode):
    from PIL import Image
    out = {}
    for ref in sorted(glob.glob(os.path.join(refs, "*.png"))):
        stem = os.path.splitext(os.path.basename(ref))[0]
        im = Image.open(ref).convert("RGB")
        for q in QUALITIES["jpeg"]:
            d = os.path.join(work, f"{label}-{q}")
            os.makedirs(d, exist_ok=True)
            path = os.path.join(d, stem + ".jpg")
            t = time.monotonic()
            data = encode(ref, im, q)
            ms = (time.monotonic() - t) * 1000
            open(path, "wb").write(data)
            out[(stem, q)] = (len(data), ms, path)
    return out


def jpegli(ref, im, q):
    import pyjpegli
    return pyjpegli.encode(im.tobytes(), im.width, im.height, quality=q)


def vips_mozjpeg(ref, im, q):
    import pyvips
    return pyvips.Image.new_from_file(ref, access="sequential").jpegsave_buffer(
        Q=q, optimize_coding=True, trellis_quant=True, overshoot_deringing=True, optimize_scans=True, quant_table=3,
        keep="none")


def score(args):
    ref, path = args
    import ssimulacra2
    if path.endswith((".avif", ".jxl", ".webp")):
        # ssimulacra2 reads what Pillow reads: decode to PNG first (Tessera's own decoders).
        png = path + ".png"
        subprocess.run([TESSERA, "render", path, "--format", "png", "-o", os.path.dirname(png), "--template",
                        "{stem}." + path.rsplit(".", 1)[1] + ".png", "--quiet"], check=True, capture_output=True)
        path = png
    return ssimulacra2.compute_ssimulacra2(ref, path)


def at_target(points, target):
    """Bytes at `target` score: log-bytes interpolated linearly in score between the sweep
    points around it (None when the sweep does not reach it)."""
    pts = sorted(points, key=lambda p: p[1])
    for (b0, s0), (b1, s1) in zip(pts, pts[1:]):
        if s0 <= target <= s1 and s1 > s0:
            f = (target - s0) / (s1 - s0)
            return math.exp(math.log(b0) + f * (math.log(b1) - math.log(b0)))
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--photos", default=CORPUS)
    ap.add_argument("--count", type=int, default=6)
    ap.add_argument("--box", default="1280x720")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--formats", default="jpeg,webp,avif,jxl", help="comma-separated: which encoders to sweep")
    args = ap.parse_args()
    os.environ["VIPS_CONCURRENCY"] = "1"
    work = tempfile.mkdtemp(prefix="pareto-")
    src = os.path.join(work, "src")
    os.makedirs(src)
    photos = sorted(glob.glob(os.path.join(args.photos, "*.jpg")))
    photos = [p for p in photos if os.path.getsize(p) > 500_000][: args.count]
    for p in photos:
        shutil.copy(p, src)
    refs = os.path.join(work, "refs")
    subprocess.run([TESSERA, "render", src, "-s", args.box, "--format", "png", "-o", refs, "--quiet"], check=True)
    settings = [("tessera jpeg (libjpeg-turbo)", lambda: tessera_sweep(refs, work, "jpeg", 0, "jpeg")),
                ("tessera jpeg effort 0 progressive", lambda: tessera_sweep(refs, work, "jpeg", 0, "jpeg0p", ["--progressive"])),
                ("tessera jpeg effort 1 (tables)", lambda: tessera_sweep(refs, work, "jpeg", 1, "jpeg1")),
                ("tessera jpeg effort 2 (tables + dead zone; default)", lambda: tessera_sweep(refs, work, "jpeg", 2, "jpeg2")),
                ("tessera jpeg effort 2 progressive", lambda: tessera_sweep(refs, work, "jpeg", 2, "jpeg2p", ["--progressive"])),
                ("tessera jpeg effort 3 (tables + trellis)", lambda: tessera_sweep(refs, work, "jpeg", 3, "jpeg3")),
                ("jpegli (pyjpegli)", lambda: python_sweep(refs, work, "jpegli", jpegli)),
                ("vips 8.18 mozjpeg options", lambda: python_sweep(refs, work, "moz", vips_mozjpeg))]
    formats = set(args.formats.split(","))
    if "jpeg" not in formats:
        settings = []
    for m in (2, 4, 6) if "webp" in formats else ():
        settings.append((f"tessera webp method {m}", lambda m=m: tessera_sweep(refs, work, "webp", m, f"webp{m}")))
    for s in (9, 8, 7, 6) if "avif" in formats else ():
        settings.append((f"tessera avif speed {s}", lambda s=s: tessera_sweep(refs, work, "avif", 9 - s, f"avif{s}")))
    for e in (3, 5, 7) if "jxl" in formats else ():
        settings.append((f"tessera jxl effort {e}", lambda e=e: tessera_sweep(refs, work, "jxl", e, f"jxl{e}")))
    results = {}
    for label, sweep in settings:
        results[label] = sweep()
        print(f"encoded: {label}", file=sys.stderr)
    jobs = [(os.path.join(refs, stem + ".png"), path) for r in results.values() for (stem, q), (_, _, path) in r.items()]
    with ProcessPoolExecutor(args.jobs) as pool:
        scores = dict(zip([j[1] for j in jobs], pool.map(score, jobs)))
    stems = sorted({stem for r in results.values() for (stem, _) in r})
    base = results["tessera jpeg (libjpeg-turbo)"]
    print(f"\n{len(stems)} photos rendered to {args.box}; bytes at equal SSIMULACRA2 relative to Tessera's JPEG "
          f"(geometric mean over photos), and the median encode time per image\n")
    print("| encoder | bytes at 70 | bytes at 80 | encode ms/image | photos reaching 70 / 80 |")
    print("| --- | --- | --- | --- | --- |")
    for label, r in results.items():
        cells, counts = [], []
        for target in TARGETS:
            ratios = []
            for stem in stems:
                mine = at_target([(b, scores[p]) for (s, q), (b, _, p) in r.items() if s == stem], target)
                theirs = at_target([(b, scores[p]) for (s, q), (b, _, p) in base.items() if s == stem], target)
                if mine and theirs:
                    ratios.append(mine / theirs)
            cells.append(f"{math.exp(statistics.mean(map(math.log, ratios))):.3f}x" if ratios else "—")
            counts.append(str(len(ratios)))
        ms = statistics.median(t for (_, t, _) in r.values())
        print(f"| {label} | {cells[0]} | {cells[1]} | {ms:.1f} | {' / '.join(counts)} |")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
