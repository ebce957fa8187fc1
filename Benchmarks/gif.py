#!/usr/bin/env python3
"""GIF sources: Tessera against libvips 8.18 (PyPI pyvips-binary), on the same files, in one run.

  Benchmarks/gif.py [--photos DIR] [--repeats 3]

Sets, made from the photos with libvips' gifsave (so both tools read identical files):
  still     one frame, 1600 px wide, 256-colour palette with dithering (what a converted photo is);
  animated  12 frames of 800 px (the photo panned), disposal "none", looping: frame 0 is the still.
Each set: 256 px thumbnails of frame 0, `tessera render -t 1` against pyvips `thumbnail` +
`jpegsave` in a loop in one process (VIPS_CONCURRENCY=1), interleaved repeats, median wall
time; images/s and peak RSS (GNU time).
Then GIF out: each animated set file to a 256 px animated GIF, `tessera render --animated --format
gif` against pyvips `thumbnail(n=-1)` + `gifsave` (cgif and libimagequant in vips 8.18): bytes,
time, and SSIMULACRA2 of every frame against the same tool's own unquantised frame (higher is
better; 90 is visually lossless, 70 high quality, 50 medium).
Needs: pip install pyvips pyvips-binary ssimulacra2; a release build (.build/release/tessera).
"""
import argparse, glob, os, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tiff import thumbnails, TESSERA  # noqa: E402  (the same comparison as for TIFF sources)

def make_sets(photos, work):
    import pyvips
    sets = {"still": [], "animated": []}
    for f in sorted(glob.glob(os.path.join(photos, "*.jpg"))):
        im = pyvips.Image.thumbnail(f, 1600).copy_memory()
        stem = os.path.splitext(os.path.basename(f))[0]
        os.makedirs(os.path.join(work, "still"), exist_ok=True)
        path = os.path.join(work, "still", stem + ".gif")
        im.gifsave(path)
        sets["still"].append(path)
        small = pyvips.Image.thumbnail(f, 800).copy_memory()
        w = small.width - 60
        frames = [small.crop(k * 5, 0, w, small.height) for k in range(12)]
        anim = pyvips.Image.arrayjoin(frames, across=1).copy()
        anim.set_type(pyvips.GValue.gint_type, "page-height", small.height)
        anim.set_type(pyvips.GValue.array_int_type, "delay", [80] * 12)
        anim.set_type(pyvips.GValue.gint_type, "loop", 0)
        os.makedirs(os.path.join(work, "animated"), exist_ok=True)
        path = os.path.join(work, "animated", stem + ".gif")
        anim.gifsave(path)
        sets["animated"].append(path)
    return sets


def gif_out(files, work):
    """256 px animated GIFs from the animated set: Tessera's writer against vips 8.18's."""
    import subprocess, time, statistics
    import pyvips
    from PIL import Image
    from ssimulacra2 import compute_ssimulacra2
    os.environ["VIPS_CONCURRENCY"] = "1"
    rows = {"tessera": [], "vips 8.18": []}
    for f in files:
        stem = os.path.splitext(os.path.basename(f))[0]
        out = os.path.join(work, "gifout")
        os.makedirs(out, exist_ok=True)
        # Tessera: the GIF, and each frame's own unquantised render (PNG) as its reference.
        t0 = time.perf_counter()
        subprocess.run([TESSERA, "render", "-t", "1", f, "-s", "256", "--animated", "--format", "gif", "-o", out,
                        "--template", "{stem}.tessera.{ext}"], check=True, capture_output=True)
        t_time = time.perf_counter() - t0
        # vips: thumbnail of every page, gifsave; its pages as PNG are its reference.
        t0 = time.perf_counter()
        v = pyvips.Image.thumbnail(f + "[n=-1]", 256)
        v.gifsave(os.path.join(out, stem + ".vips.gif"))
        v_time = time.perf_counter() - t0
        page = v.get("page-height")
        for tool, gif in [("tessera", os.path.join(out, stem + ".tessera.gif")), ("vips 8.18", os.path.join(out, stem + ".vips.gif"))]:
            im = Image.open(gif)
            scores = []
            for k in range(im.n_frames):
                im.seek(k)
                dist = os.path.join(out, f"{stem}.{k}.dist.png")
                im.convert("RGB").save(dist)
                ref = os.path.join(out, f"{stem}.{k}.ref.png")
                if tool == "tessera":
                    subprocess.run([TESSERA, "render", "-t", "1", f, "-s", "256", "--frame", str(k), "--format", "png", "-o", out,
                                    "--template", f"{{stem}}.{k}.ref.{{ext}}", "--quiet"], check=True, capture_output=True)
                else:
                    v.crop(0, k * page, v.width, page).pngsave(ref)
                scores.append(compute_ssimulacra2(ref, dist))
            rows[tool].append((os.path.getsize(gif), t_time if tool == "tessera" else v_time, statistics.mean(scores)))
    print("\nGIF out: 256 px animated GIFs of the animated set (12 frames each), one core")
    print(f"{'writer':10} {'kB/file':>8} {'ms/file':>8} {'SSIMULACRA2':>12}")
    for tool, r in rows.items():
        print(f"{tool:10} {statistics.mean(x[0] for x in r) / 1000:8.1f} {statistics.mean(x[1] for x in r) * 1000:8.0f} "
              f"{statistics.mean(x[2] for x in r):12.1f}")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--photos", default=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared", "corpus", "photos"))
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    import pyvips
    work = tempfile.mkdtemp(prefix="tessera-gif-")
    print(f"libvips {pyvips.version(0)}.{pyvips.version(1)}.{pyvips.version(2)}; tessera {TESSERA}")
    sets = make_sets(args.photos, work)
    thumbnails(sets, work, args.repeats)
    gif_out(sets["animated"], work)
