#!/usr/bin/env python3
"""GIF sources: Tessera against libvips 8.18 (PyPI pyvips-binary), on the same files, in one run.

  Benchmarks/gif.py [--photos DIR] [--repeats 3]

Sets, made from the photos with libvips' gifsave (so both tools read identical files):
  still     one frame, 1600 px wide, 256-colour palette with dithering (what a converted photo is);
  animated  12 frames of 800 px (the photo panned), disposal "none", looping: frame 0 is the still.
Each set: 256 px thumbnails of frame 0, `tessera render -t 1` against pyvips `thumbnail` +
`jpegsave` in a loop in one process (VIPS_CONCURRENCY=1), interleaved repeats, median wall
time; images/s and peak RSS (GNU time).
Needs: pip install pyvips pyvips-binary; a release build (.build/release/tessera).
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


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--photos", default=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared", "corpus", "photos"))
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    import pyvips
    work = tempfile.mkdtemp(prefix="tessera-gif-")
    print(f"libvips {pyvips.version(0)}.{pyvips.version(1)}.{pyvips.version(2)}; tessera {TESSERA}")
    thumbnails(make_sets(args.photos, work), work, args.repeats)
