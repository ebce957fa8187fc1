#!/usr/bin/env python3
"""TIFF sources: Tessera against libvips 8.18 (PyPI pyvips-binary), on the same files, in one run.

  Benchmarks/tiff.py [--photos DIR] [--repeats 3] [--big]

Sets, made from the photos with libvips (so both tools read identical files):
  strip    8-bit RGB, LZW with the horizontal predictor, strips (a scanner's master);
  pyramid  tiled 256x256 JPEG tiles, pyramidal (`tiffsave --tile --pyramid --compression jpeg`).
Each set: 256 px thumbnails, `tessera render -t 1` against pyvips `thumbnail` + `jpegsave` in a
loop in one process (VIPS_CONCURRENCY=1), interleaved repeats, median wall time; images/s and
peak RSS (GNU time).
--huge: the same two comparisons on a 50000 x 50000 JPEG-tiled BigTIFF (2.5 gigapixels: the
memory bound per worker on a huge source).
--big: a 20000 x 15000 px strip TIFF and a tiled BigTIFF of it: Deep Zoom with 2 workers against
`dzsave` on 2 threads, wall time, peak RSS, tile counts; and a pyramidal TIFF of each
(`--layout tiff`) against `tiffsave --tile --pyramid --compression jpeg`, sizes and level widths.
Needs: pip install pyvips pyvips-binary; a release build (.build/release/tessera).
"""
import argparse, glob, os, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESSERA = os.environ.get("TESSERA", os.path.join(ROOT, ".build/release/tessera"))


def timed(cmd, env=None):
    t = time.monotonic()
    r = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, capture_output=True, text=True,
                       env=dict(os.environ, **(env or {})))
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stderr[-2000:]}")
    return time.monotonic() - t, int(r.stderr.strip().splitlines()[-1]) // 1024


VIPS_THUMBS = """
import pyvips, sys, os
out = sys.argv[1]
for f in sys.argv[2:]:
    pyvips.Image.thumbnail(f, 256).jpegsave(os.path.join(out, os.path.basename(f) + ".jpg"), Q=80)
"""


def make_sets(photos, work):
    import pyvips
    files = sorted(glob.glob(os.path.join(photos, "*.jpg")))
    sets = {"strip": [], "pyramid": []}
    for f in files:
        im = pyvips.Image.new_from_file(f).autorot()
        stem = os.path.splitext(os.path.basename(f))[0]
        for name, kw in (("strip", dict(compression="lzw", predictor="horizontal")),
                         ("pyramid", dict(compression="jpeg", Q=85, tile=True, tile_width=256, tile_height=256, pyramid=True))):
            os.makedirs(os.path.join(work, name), exist_ok=True)
            path = os.path.join(work, name, stem + ".tif")
            im.tiffsave(path, **kw)
            sets[name].append(path)
    return sets


def thumbnails(sets, work, repeats):
    rows = []
    for name, files in sets.items():
        mp = 0
        import pyvips
        for f in files:
            h = pyvips.Image.new_from_file(f)
            mp += h.width * h.height / 1e6
        runs = {"tessera": [], "vips": []}
        for _ in range(repeats):
            out = tempfile.mkdtemp(dir=work)
            runs["tessera"].append(timed([TESSERA, "render", os.path.join(work, name), "-s", "256", "-t", "1", "-o", out,
                                          "--max-megapixels", "1000"]))
            out = tempfile.mkdtemp(dir=work)
            runs["vips"].append(timed([sys.executable, "-c", VIPS_THUMBS, out] + files, env={"VIPS_CONCURRENCY": "1"}))
        t = statistics.median(s for s, _ in runs["tessera"])
        v = statistics.median(s for s, _ in runs["vips"])
        rows.append((name, len(files), mp, len(files) / t, len(files) / v, max(m for _, m in runs["tessera"]),
                     max(m for _, m in runs["vips"])))
    print("\n| set | files | MP | tessera img/s | vips 8.18 img/s | ratio | tessera RSS MB | vips RSS MB |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, n, mp, t, v, tm, vm in rows:
        print(f"| {name} | {n} | {mp:.0f} | {t:.1f} | {v:.1f} | {t / v:.2f}x | {tm} | {vm} |")


def big(work, huge=False):
    import pyvips
    src = sorted(glob.glob(os.path.join(args.photos, "*.jpg")))[0]
    im = pyvips.Image.new_from_file(src)
    if huge:
        # 50000 x 50000 (2.5 gigapixels): a photo at 2500 px wide, repeated; JPEG tiles keep the file at 0.4 GB.
        im = im.resize(2500 / im.width)
        im = im.replicate(50000 // im.width + 1, 50000 // im.height + 1).crop(0, 0, 50000, 50000)
        files = {"50k tiled BigTIFF, JPEG": os.path.join(work, "huge.tif")}
        im.tiffsave(files["50k tiled BigTIFF, JPEG"], compression="jpeg", Q=85, tile=True, tile_width=256, tile_height=256,
                    bigtiff=True)
    else:
        im = im.resize(20000 / im.width, kernel="linear")
        im = im.crop(0, 0, 20000, min(im.height, 15000))
        files = {"strip": os.path.join(work, "big-strip.tif"), "tiled BigTIFF": os.path.join(work, "big-tiled.tif")}
        im.tiffsave(files["strip"], compression="lzw", predictor="horizontal")
        im.tiffsave(files["tiled BigTIFF"], compression="deflate", tile=True, tile_width=256, tile_height=256, bigtiff=True)
    print("\n| source | tessera tiles -w 2 s | RSS/worker MB | vips dzsave (2 threads) s | RSS MB | ratio | tiles |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, f in files.items():
        out = tempfile.mkdtemp(dir=work)
        t0 = time.monotonic()
        r = subprocess.run([TESSERA, "tiles", f, "-o", out, "-w", "2", "--json"], capture_output=True, text=True, check=True)
        tt = time.monotonic() - t0
        import json
        summary = json.loads(r.stdout.strip().splitlines()[-1])
        peaks = summary.get("workerPeakRSSBytes", {})
        rss = max((v if isinstance(v, int) else v.get("bytes", 0) for v in peaks.values()), default=0) // 1048576
        vout = tempfile.mkdtemp(dir=work)
        vt, vm = timed([sys.executable, "-c", "import pyvips,sys; pyvips.Image.new_from_file(sys.argv[1], access='sequential')"
                        ".dzsave(sys.argv[2])", f, vout + "/p"], env={"VIPS_CONCURRENCY": "2"})
        ours = sum(1 for _, _, fs in os.walk(out) for x in fs if x.endswith(".jpg"))
        theirs = sum(1 for _, _, fs in os.walk(vout) for x in fs if x.endswith(".jpeg"))
        print(f"| {name} | {tt:.1f} | {rss} | {vt:.1f} | {vm} | {vt / tt:.2f}x | {ours} / {theirs} |")
    # Pyramidal TIFF out: `tessera tiles --layout tiff` against `tiffsave --tile --pyramid --compression jpeg`.
    print("\n| source | tessera --layout tiff -w 2 s | RSS/worker MB | vips tiffsave (2 threads) s | RSS MB | ratio | bytes (tessera / vips) | levels |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, f in files.items():
        out = tempfile.mkdtemp(dir=work)
        t0 = time.monotonic()
        r = subprocess.run([TESSERA, "tiles", f, "-o", out, "-w", "2", "--layout", "tiff", "--json"], capture_output=True,
                           text=True, check=True)
        tt = time.monotonic() - t0
        import json
        summary = json.loads(r.stdout.strip().splitlines()[-1])
        peaks = summary.get("workerPeakRSSBytes", {})
        rss = max((v if isinstance(v, int) else v.get("bytes", 0) for v in peaks.values()), default=0) // 1048576
        vout = os.path.join(tempfile.mkdtemp(dir=work), "p.tif")
        vt, vm = timed([sys.executable, "-c", "import pyvips,sys; pyvips.Image.new_from_file(sys.argv[1], access='sequential')"
                        ".tiffsave(sys.argv[2], tile=True, pyramid=True, compression='jpeg', Q=75, tile_width=256, tile_height=256)",
                        f, vout], env={"VIPS_CONCURRENCY": "2"})
        ours = os.path.join(out, os.path.splitext(os.path.basename(f))[0] + ".tif")
        levels = [(pyvips.Image.new_from_file(x, page=p).width for p in range(pyvips.Image.new_from_file(x).get("n-pages")))
                  for x in (ours, vout)]
        same = list(levels[0]) == list(levels[1])
        print(f"| {name} | {tt:.1f} | {rss} | {vt:.1f} | {vm} | {vt / tt:.2f}x | {os.path.getsize(ours) / 1e6:.1f} / "
              f"{os.path.getsize(vout) / 1e6:.1f} MB | {'same as vips' if same else 'DIFFER'} |")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--photos", default=os.path.join(ROOT, "..", "shared", "corpus", "photos"))
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--big", action="store_true")
    p.add_argument("--big-only", action="store_true", help="only the Deep Zoom comparison")
    p.add_argument("--huge", action="store_true", help="the Deep Zoom and pyramidal TIFF comparisons on a 50000 x 50000 BigTIFF")
    args = p.parse_args()
    work = tempfile.mkdtemp(prefix="tessera-tiff-")
    import pyvips
    print(f"libvips {pyvips.version(0)}.{pyvips.version(1)}.{pyvips.version(2)}; tessera {TESSERA}")
    if not args.big_only and not args.huge:
        thumbnails(make_sets(args.photos, work), work, args.repeats)
    if args.big or args.big_only:
        big(work)
    if args.huge:
        big(work, huge=True)
