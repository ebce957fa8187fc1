#!/usr/bin/env python3
"""Output quality of thumbnails against a gold reference.

Gold: full-size decode (Pillow), EXIF orientation applied, converted to sRGB when
the source has a non-sRGB ICC profile, Lanczos-3 resize in linear light in float
to the exact size of the output being judged, back to 8-bit sRGB.
SSIM: Wang et al. 2004 -- Gaussian window sigma 1.5 (11x11), K1 0.01, K2 0.03,
data range 255, computed per RGB channel over the valid region and averaged.
PSNR over all RGB samples.

usage: quality.py SOURCES_DIR OUTPUT_DIR [OUTPUT_DIR ...] [--cache DIR] [--json]
Outputs are matched to sources by file stem (OUTPUT_DIR/<stem>.<anything>).
"""
import argparse
import io
import json
import os
import sys

import numpy as np
from PIL import Image, ImageCms, ImageOps
from scipy.ndimage import gaussian_filter

Image.MAX_IMAGE_PIXELS = None


def srgb_to_linear(a):
    a = a / 255.0
    return np.where(a <= 0.04045, a / 12.92, ((a + 0.055) / 1.055) ** 2.4)


def linear_to_srgb(a):
    a = np.clip(a, 0.0, 1.0)
    return np.where(a <= 0.0031308, a * 12.92, 1.055 * np.power(a, 1 / 2.4) - 0.055) * 255.0


def load_source(path, orient=True):
    im = Image.open(path)
    icc = im.info.get("icc_profile")
    if orient:
        im = ImageOps.exif_transpose(im)
    if im.mode not in ("RGB", "L"):
        im = im.convert("RGB")
    if icc and im.mode == "RGB":
        try:
            src = ImageCms.ImageCmsProfile(io.BytesIO(icc))
            desc = ImageCms.getProfileDescription(src) or ""
            if "sRGB" not in desc:
                im = ImageCms.profileToProfile(im, src, ImageCms.createProfile("sRGB"), outputMode="RGB")
        except Exception:
            pass
    return im.convert("RGB")


def gold(source_image, size):
    lin = srgb_to_linear(np.asarray(source_image, dtype=np.float64)).astype(np.float32)
    chans = []
    for c in range(3):
        f = Image.fromarray(lin[:, :, c], mode="F")
        chans.append(np.asarray(f.resize(size, Image.Resampling.LANCZOS), dtype=np.float64))
    return np.clip(np.round(linear_to_srgb(np.stack(chans, axis=2))), 0, 255)


def ssim_channel(x, y):
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    f = lambda a: gaussian_filter(a, 1.5, truncate=3.5)  # 11x11 window
    mx, my = f(x), f(y)
    sxx = f(x * x) - mx * mx
    syy = f(y * y) - my * my
    sxy = f(x * y) - mx * my
    m = ((2 * mx * my + c1) * (2 * sxy + c2)) / ((mx * mx + my * my + c1) * (sxx + syy + c2))
    r = 5
    if m.shape[0] > 2 * r and m.shape[1] > 2 * r:
        m = m[r:-r, r:-r]
    return float(m.mean())


def gold_png(cache_dir, src_path, size, orient=True):
    """Where the gold reference of `src_path` at `size` is cached."""
    stem = os.path.splitext(os.path.basename(src_path))[0]
    return os.path.join(cache_dir, f"{stem}_{size[0]}x{size[1]}{'' if orient else '_raw'}.png")


def compare(out_path, ref_cache, src_path, cache_dir, orient=True):
    """SSIM and PSNR of one output against the gold reference at the output's size.
    orient=False compares with an unrotated gold (for tools that ignore EXIF orientation)."""
    out = Image.open(out_path).convert("RGB")
    size = out.size
    key = (src_path, size, orient)
    if key not in ref_cache:
        cached = None
        if cache_dir:
            cached = gold_png(cache_dir, src_path, size, orient)
            if os.path.exists(cached):
                ref_cache[key] = np.asarray(Image.open(cached).convert("RGB"), dtype=np.float64)
        if key not in ref_cache:
            if (src_path, orient) not in ref_cache:
                ref_cache.clear()  # keep one decoded source in memory
                ref_cache[(src_path, orient)] = load_source(src_path, orient)
            g = gold(ref_cache[(src_path, orient)], size)
            ref_cache[key] = g
            if cached:
                os.makedirs(cache_dir, exist_ok=True)
                Image.fromarray(g.astype(np.uint8)).save(cached)
    ref = ref_cache[key]
    x = np.asarray(out, dtype=np.float64)
    ssim = np.mean([ssim_channel(x[:, :, c], ref[:, :, c]) for c in range(3)])
    mse = np.mean((x - ref) ** 2)
    psnr = float("inf") if mse == 0 else 10 * np.log10(255 ** 2 / mse)
    return ssim, psnr, size


def ssimulacra2_score(out_path, src_path, cache_dir, size, orient=True):
    """SSIMULACRA2 (PyPI `ssimulacra2`) of one output of `size` against its gold reference,
    the PNG `compare` cached (call `compare` first)."""
    import ssimulacra2
    return float(ssimulacra2.compute_ssimulacra2(gold_png(cache_dir, src_path, size, orient), out_path))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("sources")
    ap.add_argument("outputs", nargs="+")
    ap.add_argument("--cache", default=os.environ.get("TESSERA_GOLD_CACHE", "/tmp/tessera-gold"))
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    sources = {}
    for name in sorted(os.listdir(args.sources)):
        if name.lower().endswith((".jpg", ".jpeg", ".png")):
            sources[os.path.splitext(name)[0]] = os.path.join(args.sources, name)
    results = {}
    ref_cache = {}
    for stem, src in sources.items():
        for d in args.outputs:
            match = [f for f in os.listdir(d) if os.path.splitext(f)[0] == stem]
            if not match:
                continue
            s, p, size = compare(os.path.join(d, match[0]), ref_cache, src, args.cache)
            results.setdefault(d, []).append({"file": stem, "ssim": s, "psnr": p, "size": size})
            if args.verbose:
                print(f"{d}\t{stem}\t{size[0]}x{size[1]}\tSSIM {s:.4f}\tPSNR {p:.2f}", file=sys.stderr)
    summary = {}
    for d, rows in results.items():
        summary[d] = {
            "count": len(rows),
            "mean_ssim": float(np.mean([r["ssim"] for r in rows])),
            "mean_psnr": float(np.mean([r["psnr"] for r in rows if np.isfinite(r["psnr"])])),
            "files": rows,
        }
    if args.json:
        print(json.dumps(summary))
    else:
        for d, s in summary.items():
            print(f"{d}: {s['count']} images, mean SSIM {s['mean_ssim']:.4f}, mean PSNR {s['mean_psnr']:.2f} dB")


if __name__ == "__main__":
    main()
