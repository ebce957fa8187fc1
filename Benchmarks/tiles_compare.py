#!/usr/bin/env python3
"""Compare two Deep Zoom (or IIIF) pyramids tile by tile: the grid (levels, tile names),
every tile's dimensions, and SSIM of every tile's content (luma and chroma, 11x11
Gaussian window; tiles under 16 px on a side are compared by mean absolute error only).

  Benchmarks/tiles_compare.py OURS_files VIPS_files        # Deep Zoom: the _files folders
  Benchmarks/tiles_compare.py --iiif OURS_dir VIPS_dir     # IIIF: the pyramid folders

Suffixes may differ (.jpg vs .jpeg). Prints per level: tiles, worst and mean SSIM; ends
with `grid: same|DIFFERENT`, `dimensions: N mismatches`, `ssim: min X mean Y`; exits 1
when the grid or a dimension differs, or a tile's SSIM is under --min (default 0.98).
"""
import argparse
import os
import sys
from collections import defaultdict

import numpy as np
from PIL import Image
from scipy.ndimage import gaussian_filter


def ssim_channel(x, y):
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    f = lambda a: gaussian_filter(a, 1.5, truncate=3.5)
    mx, my = f(x), f(y)
    sxx, syy, sxy = f(x * x) - mx * mx, f(y * y) - my * my, f(x * y) - mx * my
    m = ((2 * mx * my + c1) * (2 * sxy + c2)) / ((mx * mx + my * my + c1) * (sxx + syy + c2))
    return float(m.mean())


def ycc(img):
    return np.asarray(img.convert("YCbCr"), dtype=np.float64)


def tiles(root, iiif):
    """{(level, name-without-suffix): path}"""
    out = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            stem, ext = os.path.splitext(f)
            if ext.lower() not in (".jpg", ".jpeg", ".png"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, f), root)
            if iiif:
                parts = rel.split(os.sep)  # region/size/0/default.jpg
                size = parts[1].rstrip(",").split(",")[0]
                out[(parts[0], size)] = os.path.join(dirpath, f)
            else:
                out[(rel.split(os.sep)[0], stem)] = os.path.join(dirpath, f)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ours")
    ap.add_argument("reference")
    ap.add_argument("--iiif", action="store_true")
    ap.add_argument("--min", type=float, default=0.98)
    a = ap.parse_args()
    ours, ref = tiles(a.ours, a.iiif), tiles(a.reference, a.iiif)
    same_grid = set(ours) == set(ref)
    if not same_grid:
        print(f"only ours: {sorted(set(ours) - set(ref))[:10]}  only reference: {sorted(set(ref) - set(ours))[:10]}")
    per_level = defaultdict(list)
    dims_bad = 0
    for key in sorted(set(ours) & set(ref)):
        x, y = Image.open(ours[key]), Image.open(ref[key])
        if x.size != y.size:
            dims_bad += 1
            if dims_bad <= 10:
                print(f"size differs: {key}: ours {x.size}, reference {y.size}")
            continue
        X, Y = ycc(x), ycc(y)
        if min(x.size) < 16:
            s = 1.0 - float(np.abs(X - Y).mean()) / 255
        else:
            s = (4 * ssim_channel(X[..., 0], Y[..., 0]) + ssim_channel(X[..., 1], Y[..., 1])
                 + ssim_channel(X[..., 2], Y[..., 2])) / 6
        per_level[key[0]].append((s, key))
    worst_all, all_s = 1.0, []
    for level in sorted(per_level, key=lambda l: (len(l), l)):
        v = per_level[level]
        ss = [s for s, _ in v]
        all_s += ss
        w = min(v)
        worst_all = min(worst_all, w[0])
        print(f"level {level:>24}: {len(v):5d} tiles, ssim min {w[0]:.4f} ({w[1][1]}), mean {np.mean(ss):.4f}")
    print(f"grid: {'same' if same_grid else 'DIFFERENT'} ({len(ours)} tiles ours, {len(ref)} reference)")
    print(f"dimensions: {dims_bad} mismatches")
    print(f"ssim: min {worst_all:.4f} mean {np.mean(all_s):.4f} over {len(all_s)} tiles")
    ok = same_grid and dims_bad == 0 and worst_all >= a.min
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
