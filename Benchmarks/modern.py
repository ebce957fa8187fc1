#!/usr/bin/env python3
"""HEIC and WebP in, WebP and AVIF out: Tessera against libvips on the same files.

Sets (made in a temporary directory, nothing committed):
  heic  the corpus' phone HEICs, plus the corpus photos rendered upright (tessera, PNG)
        and encoded with heif-enc (x265, quality 50, a 320 px thumbnail item like an iPhone's)
  webp  the corpus' WebPs, plus the corpus photos encoded with cwebp -q 80
Decode side, per set and box (256 px, 1280x720), REPEATS interleaved runs, one thread:
  tessera render -t 1                      vipsthumbnail (VIPS_CONCURRENCY=1), and libvips 8.18
                                           from PyPI (pyvips-binary) timed in-process as bench.py
                                           does, on the sets it can read
  heic only, primary forced on both sides: tessera render --primary  vs  vips thumbnail_image
  (which loads the whole primary image: vips has no switch to ignore thumbnail items)
  images/s (median), peak RSS, SSIM against a gold reference: the full primary image
  (decoded upright and converted to sRGB by tessera: libheif/libwebp, as vips uses),
  resized in float Lanczos-3 in linear light by quality.py.
Encode side, on the corpus photos at 1280x720: JPEG, WebP and AVIF over a quality sweep;
bytes at the SSIM of JPEG q0.8 (interpolated), encode milliseconds per image.
Writes Benchmarks/results/<date>-<host>-modern.{md,json}.

usage: Benchmarks/modern.py [--photos DIR] [--modern DIR] [--count N] [--repeats 3]
"""
import argparse
import datetime
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
TESSERA = os.path.join(ROOT, ".build/release/tessera")
from bench import PYVIPS_LOOP, pyvips_version  # noqa: E402  (the same in-process loop as bench.py's)


def run(cmd, env=None, self_timed=False):
    """Wall seconds and peak RSS (kB) of one command; `self_timed`: the seconds it prints last
    on stderr ("seconds S", the in-process loop), not the process's."""
    timef = tempfile.mktemp()
    full = ["/usr/bin/time", "-o", timef, "-f", "%e %M"] + cmd
    r = subprocess.run(full, check=True, capture_output=True, text=True, env=dict(os.environ, **(env or {})))
    secs, rss = open(timef).read().split()[-2:]
    os.unlink(timef)
    if self_timed:
        secs = r.stderr.strip().splitlines()[-1].split()[-1]
    return float(secs), int(rss)


def pyvips_reads(path):
    """Whether the PyPI libvips loads this file (its build may leave out a format, as HEVC)."""
    probe = "import sys, pyvips; pyvips.Image.new_from_file(sys.argv[1]).avg()"
    return subprocess.run([sys.executable, "-c", probe, path], capture_output=True).returncode == 0


def make_sets(photos, modern, work, count):
    names = sorted(f for f in os.listdir(photos) if f.lower().endswith((".jpg", ".jpeg")))[:count]
    upright = f"{work}/upright"
    subprocess.run([TESSERA, "render"] + [f"{photos}/{n}" for n in names] + ["-p", "default", "--format", "png",
                   "-o", upright, "--quiet"], check=True, capture_output=True)
    sets = {"heic": f"{work}/heic", "webp": f"{work}/webp"}
    for d in sets.values():
        os.makedirs(d, exist_ok=True)
    for n in sorted(os.listdir(upright)):
        stem = os.path.splitext(n)[0]
        subprocess.run(["heif-enc", "-q", "50", "-t", "320", f"{upright}/{n}", "-o", f"{sets['heic']}/{stem}.heic"],
                       check=True, capture_output=True)
        subprocess.run(["cwebp", "-quiet", "-q", "80", f"{upright}/{n}", "-o", f"{sets['webp']}/{stem}.webp"],
                       check=True, capture_output=True)
    if modern and os.path.isdir(modern):
        for n in os.listdir(modern):
            ext = os.path.splitext(n)[1].lower()
            if ext == ".heic":
                shutil.copy(f"{modern}/{n}", sets["heic"])
            elif ext == ".webp":
                shutil.copy(f"{modern}/{n}", sets["webp"])
    return sets


def gold_sources(src, work):
    """Full-size primary decodes (upright, sRGB) as PNG: quality.py's sources."""
    out = f"{work}/gold-{os.path.basename(src)}"
    if not os.path.isdir(out):
        subprocess.run([TESSERA, "render", src, "-p", "default", "--format", "png", "--primary", "-o", out, "--quiet"],
                       check=True, capture_output=True)
    return out


def ssim(sources, outdir, cache):
    r = subprocess.run([sys.executable, f"{HERE}/quality.py", sources, outdir, "--json", "--cache", cache],
                       check=True, capture_output=True, text=True)
    s = json.loads(r.stdout)
    return s[outdir]["mean_ssim"] if outdir in s else float("nan")


def decode_side(sets, work, repeats, cache):
    rows = []
    one = {"VIPS_CONCURRENCY": "1"}
    version = pyvips_version()
    vips818 = f"libvips {version} (PyPI, in-process loop)" if version else None
    for set_name, src in sets.items():
        files = sorted(f"{src}/{f}" for f in os.listdir(src))
        n = len(files)
        gold = gold_sources(src, work)
        in_process = vips818 is not None and all(pyvips_reads(f) for f in files)
        if vips818 and not in_process:
            print(f"{set_name}: the PyPI libvips cannot read every file of this set; not timed", file=sys.stderr)
        for box in ((256, 256), (1280, 720)):
            w, h = box
            recipe = f"{work}/r{w}x{h}.json"
            json.dump({"format": "tessera.recipe", "version": 1, "name": "b",
                       "operations": [{"op": "resize", "width": w, "height": h}],
                       "output": {"format": "jpeg", "quality": 0.8, "optimize": False}}, open(recipe, "w"))
            tools = {
                "tessera render": lambda out: ([TESSERA, "render", src, "-r", recipe, "-o", out, "-t", "1", "--quiet"], {}),
                "vipsthumbnail": lambda out: (["vipsthumbnail", "--size", f"{w}x{h}", "-o", f"{out}/%s.jpg[Q=80]"] + files, one),
            }
            if in_process:
                tools[vips818] = lambda out: ([sys.executable, "-c", PYVIPS_LOOP, out, str(w), str(h)] + files, one)
            if set_name == "heic":
                tools["tessera render --primary"] = lambda out: ([TESSERA, "render", src, "-r", recipe, "-o", out, "-t", "1",
                                                                  "--quiet", "--primary"], {})
                tools["vips thumbnail_image (primary)"] = lambda out: (
                    ["sh", "-c", " && ".join(f"vips thumbnail_image '{f}' '{out}/{os.path.splitext(os.path.basename(f))[0]}.jpg[Q=80]' {w} --height {h}"
                                             for f in files)], one)
            times = {t: [] for t in tools}
            rss = {t: 0 for t in tools}
            for _ in range(repeats):
                for t, build in tools.items():
                    out = f"{work}/out-{set_name}-{w}-{t.replace(' ', '_')}"
                    shutil.rmtree(out, ignore_errors=True)
                    os.makedirs(out)
                    cmd, env = build(out)
                    s, m = run(cmd, env, self_timed=t == vips818)
                    times[t].append(s)
                    rss[t] = max(rss[t], m)
            for t in tools:
                out = f"{work}/out-{set_name}-{w}-{t.replace(' ', '_')}"
                med = statistics.median(times[t])
                rows.append({"set": set_name, "box": f"{w}x{h}", "tool": t, "images": n, "seconds": med,
                             "images_per_second": n / med, "runs": times[t], "peak_rss_mb": rss[t] / 1024,
                             "ssim": ssim(gold, out, cache)})
                print(f"{set_name} {w}x{h} {t}: {n / med:.1f} images/s, peak {rss[t] / 1024:.0f} MB, SSIM {rows[-1]['ssim']:.4f}",
                      file=sys.stderr)
    return rows


def encode_side(photos, work, count, cache):
    names = sorted(f for f in os.listdir(photos) if f.lower().endswith((".jpg", ".jpeg")))[:count]
    src = f"{work}/encode-src"
    os.makedirs(src, exist_ok=True)
    for n in names:
        os.symlink(f"{photos}/{n}", f"{src}/{n}")
    results = {}
    for fmt in ("jpeg", "webp", "avif"):
        for q in (0.4, 0.5, 0.6, 0.7, 0.8, 0.9):
            out = f"{work}/enc-{fmt}-{q}"
            shutil.rmtree(out, ignore_errors=True)
            r = subprocess.run([TESSERA, "render", src, "-s", "1280x720", "--format", fmt, "-q", str(q), "-o", out, "-t", "1",
                                "--json"], check=True, capture_output=True, text=True)
            lines = [json.loads(l) for l in r.stdout.splitlines()]
            recs = [l for l in lines if l.get("type") == "record"]
            total = sum(o["bytes"] for r in recs for o in r["outputs"])
            enc_ms = statistics.mean(r["timingsMilliseconds"]["encode"] for r in recs)
            s = ssim(src, out, cache)
            results.setdefault(fmt, []).append({"quality": q, "bytes": total, "ssim": s, "encode_ms": enc_ms})
            print(f"encode {fmt} q{q}: {total / 1e6:.2f} MB, SSIM {s:.4f}, {enc_ms:.1f} ms/image", file=sys.stderr)
    target = next(r["ssim"] for r in results["jpeg"] if r["quality"] == 0.8)

    def bytes_at(rows, s):
        rows = sorted(rows, key=lambda r: r["ssim"])
        for a, b in zip(rows, rows[1:]):
            if a["ssim"] <= s <= b["ssim"]:
                t = (s - a["ssim"]) / (b["ssim"] - a["ssim"]) if b["ssim"] != a["ssim"] else 0
                return a["bytes"] + t * (b["bytes"] - a["bytes"]), a["encode_ms"] + t * (b["encode_ms"] - a["encode_ms"])
        return None, None

    equal = {fmt: bytes_at(rows, target) for fmt, rows in results.items()}
    return {"photos": len(names), "ssim_target": target, "sweep": results,
            "at_target": {f: {"bytes": b, "encode_ms": e} for f, (b, e) in equal.items()}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--photos", default=os.path.join(ROOT, "../shared/corpus/photos"))
    ap.add_argument("--modern", default=os.path.join(ROOT, "../shared/corpus/modern"))
    ap.add_argument("--count", type=int, default=12)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    if not os.path.exists(TESSERA):
        subprocess.run(["swift", "build", "-c", "release"], cwd=ROOT, check=True)
    work = tempfile.mkdtemp(prefix="tessera-modern-")
    cache = f"{work}/gold-cache"
    try:
        sets = make_sets(os.path.realpath(args.photos), os.path.realpath(args.modern), work, args.count)
        decode = decode_side(sets, work, args.repeats, cache)
        encode = encode_side(os.path.realpath(args.photos), work, args.count, cache)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    stamp = f"{datetime.date.today().isoformat()}-{socket.gethostname()}"
    os.makedirs(f"{HERE}/results", exist_ok=True)
    json.dump({"decode": decode, "encode": encode}, open(f"{HERE}/results/{stamp}-modern.json", "w"), indent=1)
    md = ["| set | box | tool | images/s | × vs vipsthumbnail | × vs libvips 8.18 in-process | peak RSS | SSIM |",
          "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for row in decode:
        same = [r for r in decode if r["set"] == row["set"] and r["box"] == row["box"]]
        ref = next(r for r in same if r["tool"] == "vipsthumbnail")
        new = next((r for r in same if r["tool"].startswith("libvips ")), None)
        vs_new = f"{row['images_per_second'] / new['images_per_second']:.2f}" if new else "(cannot read the set)"
        md.append(f"| {row['set']} ({row['images']}) | {row['box']} | {row['tool']} | {row['images_per_second']:.1f} | "
                  f"{row['images_per_second'] / ref['images_per_second']:.2f} | {vs_new} | {row['peak_rss_mb']:.0f} MB | {row['ssim']:.4f} |")
    md += ["", f"Encode, {encode['photos']} photos at 1280x720, bytes at the SSIM of JPEG q0.8 ({encode['ssim_target']:.4f}):", "",
           "| format | bytes (relative to JPEG) | encode ms/image |", "| --- | --- | --- |"]
    jpeg = encode["at_target"]["jpeg"]["bytes"]
    for f, v in encode["at_target"].items():
        if v["bytes"] is None:
            md.append(f"| {f} | (SSIM target outside the sweep) | |")
        else:
            md.append(f"| {f} | {v['bytes'] / 1e6:.2f} MB ({v['bytes'] / jpeg:.2f}) | {v['encode_ms']:.1f} |")
    open(f"{HERE}/results/{stamp}-modern.md", "w").write("\n".join(md) + "\n")
    print("\n".join(md))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
