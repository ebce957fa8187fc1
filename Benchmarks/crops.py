#!/usr/bin/env python3
"""The filter chain measured (issue 18), release build, one thread.

1. Attention agreement: each photo is made a PNG of long side 800 (vips thumbnail, the
   same pixels for both tools); vips `smartcrop --interesting attention` and Tessera's
   `crop aspect … gravity attention` each cut a square and a 16:9 (9:16 for portraits)
   window out of it with no resampling; each window's position is found by exact match
   in the PNG, and the IoU of the two windows is reported — with the IoU of a centre crop
   against vips for scale (how much a naive crop already agrees).
2. Speed with the same operations: `vipsthumbnail -s 256x256 --smartcrop attention` and
   pyvips thumbnail(crop=attention).sharpen() (one process each, VIPS_CONCURRENCY=1),
   against `tessera render -s 256x256 --fit fill --gravity attention [--sharpen 0.8]
   --threads 1`. Best of REPEATS wall times.
3. SSIM of each operation against a float reference (numpy/scipy) applied to the same
   input: the plain 1280x720 (or 256) PNG output, then each operation by Tessera vs by
   the reference.

usage: Benchmarks/crops.py [--photos DIR] [--repeats N] [--limit N]
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
from PIL import Image
from scipy.ndimage import gaussian_filter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from quality import ssim_channel  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sh(cmd, env=None):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)


def recipe_file(work, name, ops, fmt="png", quality=0.9):
    path = os.path.join(work, name + ".json")
    with open(path, "w") as f:
        json.dump({"format": "tessera.recipe", "version": 2, "name": name, "operations": ops,
                   "output": {"format": fmt, "quality": quality}}, f)
    return path


def tessera_render(tessera, inputs, recipe, out):
    shutil.rmtree(out, ignore_errors=True)
    sh([tessera, "render", *inputs, "-r", recipe, "-o", out, "--threads", "1"])
    files = sorted(glob.glob(os.path.join(out, "**", "*.*"), recursive=True))
    return files


def locate(big, window):
    """(x, y) where `window` sits in `big`, by exact match (no resampling on either side)."""
    H, W = big.shape[:2]
    h, w = window.shape[:2]
    for y in range(H - h + 1):
        for x in range(W - w + 1):
            if np.array_equal(big[y, x:x + w], window[0]) and np.array_equal(big[y:y + h, x:x + w], window):
                return (x, y)
    return None


def iou(a, b, w, h):
    ix = max(0, min(a[0] + w, b[0] + w) - max(a[0], b[0]))
    iy = max(0, min(a[1] + h, b[1] + h) - max(a[1], b[1]))
    inter = ix * iy
    return inter / (2 * w * h - inter)


def attention(tessera, photos, work):
    import pyvips
    rows = []
    for src in photos:
        name = os.path.splitext(os.path.basename(src))[0]
        small = os.path.join(work, name + ".png")
        pyvips.Image.thumbnail(src, 800, height=800).colourspace("srgb").extract_band(0, n=3).write_to_file(small)
        big = np.asarray(Image.open(small).convert("RGB"))
        H, W = big.shape[:2]
        for label, aspect in (("1:1", 1.0), ("16:9", 16 / 9 if W >= H else 9 / 16)):
            w = W if W / H <= aspect else int(round(H * aspect))
            h = H if W / H >= aspect else int(round(W / aspect))
            w, h = min(w, W), min(h, H)
            if (w, h) == (W, H):
                continue
            vout = os.path.join(work, "v.png")
            pyvips.Image.new_from_file(small).smartcrop(w, h, interesting="attention").write_to_file(vout)
            vwin = np.asarray(Image.open(vout).convert("RGB"))
            r = recipe_file(work, "att", [{"op": "crop", "aspect": w / h, "gravity": "attention"}])
            out = tessera_render(tessera, [small], r, os.path.join(work, "t"))
            twin = np.asarray(Image.open(out[0]).convert("RGB"))
            if twin.shape != vwin.shape:
                print(f"  {name} {label}: sizes differ {twin.shape} vs {vwin.shape}", file=sys.stderr)
                continue
            vp, tp = locate(big, vwin), locate(big, twin)
            if vp is None or tp is None:
                print(f"  {name} {label}: window not found", file=sys.stderr)
                continue
            centre = ((W - w) // 2, (H - h) // 2)
            rows.append((name, label, iou(tp, vp, w, h), iou(centre, vp, w, h)))
    return rows


def best_time(cmd, repeats, env=None, before=None):
    best = float("inf")
    for _ in range(repeats):
        if before:
            before()
        t = time.perf_counter()
        cmd() if callable(cmd) else sh(cmd, env=env)
        best = min(best, time.perf_counter() - t)
    return best


def speed(tessera, photos, work, repeats):
    env = dict(os.environ, VIPS_CONCURRENCY="1")
    out = os.path.join(work, "speed")
    reset = lambda: (shutil.rmtree(out, ignore_errors=True), os.makedirs(out))
    res = {}
    res["vipsthumbnail attention"] = best_time(
        ["vipsthumbnail", "-s", "256x256", "--smartcrop", "attention", "-o", out + "/%s.jpg[Q=80]", *photos], repeats, env, reset)
    res["tessera attention"] = best_time(
        [tessera, "render", *photos, "-s", "256x256", "--fit", "fill", "--gravity", "attention", "-q", "0.8",
         "--threads", "1", "-o", out], repeats, env, reset)
    script = ("import pyvips,sys,os\npyvips.cache_set_max(0)\n"
              "for i,f in enumerate(sys.argv[2:]):\n"
              "    pyvips.Image.thumbnail(f,256,height=256,crop='attention').sharpen(sigma=0.8).write_to_file(os.path.join(sys.argv[1],f'{i}.jpg[Q=80]'))\n")
    res["pyvips attention+sharpen"] = best_time([sys.executable, "-c", script, out, *photos], repeats, env, reset)
    res["tessera attention+sharpen"] = best_time(
        [tessera, "render", *photos, "-s", "256x256", "--fit", "fill", "--gravity", "attention", "--sharpen", "0.8",
         "-q", "0.8", "--threads", "1", "-o", out], repeats, env, reset)
    return res


# Float references of each operation, on float arrays of sRGB values 0…255.
def ref_sharpen(a, sigma=0.8, amount=0.6, threshold=2):
    b = np.stack([gaussian_filter(a[..., c], sigma, mode="nearest", truncate=3) for c in range(3)], axis=2)
    d = a - b
    return np.where(np.abs(d) > threshold, a + amount * d, a)


def ref_blur(a, sigma=1.5):
    return np.stack([gaussian_filter(a[..., c], sigma, mode="nearest", truncate=3) for c in range(3)], axis=2)


def ref_adjust(a, exposure=0.3, brightness=0.05, contrast=1.1, saturation=1.2, sepia=0.2):
    v = a / 255
    lin = np.where(v <= 0.04045, v / 12.92, ((v + 0.055) / 1.055) ** 2.4) * 2 ** exposure
    lin = np.minimum(lin, 1)
    v = np.where(lin <= 0.0031308, lin * 12.92, 1.055 * lin ** (1 / 2.4) - 0.055)
    v = np.clip(((v + brightness) - 0.5) * contrast + 0.5, 0, 1) * 255
    l = np.array([0.2126, 0.7152, 0.0722])
    y = (v * l).sum(axis=2, keepdims=True)
    v = y + (v - y) * saturation
    sep = np.array([[0.393, 0.769, 0.189], [0.349, 0.686, 0.168], [0.272, 0.534, 0.131]])
    v = (1 - sepia) * v + sepia * (v @ sep.T)
    return v


def ref_vignette(a, amount=0.4):
    h, w = a.shape[:2]
    x = (np.arange(w) + 0.5 - w / 2) / (w / 2)
    y = (np.arange(h) + 0.5 - h / 2) / (h / 2)
    d = np.sqrt(x[None, :] ** 2 / 2 + y[:, None] ** 2 / 2)
    t = np.clip((d - 0.5) / 0.5, 0, 1)
    return a * (1 - amount * t * t)[..., None]


def ref_tint(a, tint=(255, 170, 90), amount=0.5):
    y = (a * np.array([0.2126, 0.7152, 0.0722])).sum(axis=2, keepdims=True)
    return (1 - amount) * a + amount * y * np.array(tint) / 255


def ref_overlay(a, mark, x0, y0, opacity):
    out = a.copy()
    h, w = mark.shape[:2]
    m = mark[..., :3].astype(np.float64)
    alpha = mark[..., 3:4] / 255 * opacity
    out[y0:y0 + h, x0:x0 + w] = out[y0:y0 + h, x0:x0 + w] * (1 - alpha) + m * alpha
    return out


def ssim(a, b):
    a = np.clip(np.round(a), 0, 255)
    return float(np.mean([ssim_channel(a[..., c], b[..., c].astype(np.float64)) for c in range(3)]))


def fidelity(tessera, photos, work, box):
    """Per operation: mean and minimum SSIM of Tessera's result against the reference."""
    mark_path = os.path.join(work, "mark.png")
    mark = np.zeros((40, 120, 4), np.uint8)
    mark[..., 0], mark[..., 1], mark[..., 2] = 255, 255, 255
    mark[..., 3] = np.linspace(60, 255, 120, dtype=np.uint8)[None, :]
    Image.fromarray(mark, "RGBA").save(mark_path)
    resize = {"op": "resize", "width": box[0], "height": box[1], "mode": "fit"}
    plain = tessera_render(tessera, photos, recipe_file(work, "plain", [resize]), os.path.join(work, "plain"))
    ops = {
        "sharpen": ({"op": "sharpen", "sigma": 0.8, "amount": 0.6, "threshold": 2}, ref_sharpen),
        "blur": ({"op": "blur", "sigma": 1.5}, ref_blur),
        "adjust": ({"op": "adjust", "exposure": 0.3, "brightness": 0.05, "contrast": 1.1, "saturation": 1.2, "sepia": 0.2}, ref_adjust),
        "tint": ({"op": "adjust", "tint": "#ffaa5a", "tintAmount": 0.5}, ref_tint),
        "vignette": ({"op": "adjust", "vignette": 0.4}, ref_vignette),
        "overlay": ({"op": "overlay", "path": mark_path, "gravity": "southeast", "margin": 10, "opacity": 0.7}, None),
    }
    res = {}
    for name, (op, ref) in ops.items():
        outs = tessera_render(tessera, photos, recipe_file(work, name, [resize, op]), os.path.join(work, name))
        scores = []
        for p, o in zip(plain, outs):
            a = np.asarray(Image.open(p).convert("RGB"), dtype=np.float64)
            b = np.asarray(Image.open(o).convert("RGB"))
            if ref is None:
                h, w = a.shape[:2]
                r = ref_overlay(a, mark, w - 10 - mark.shape[1], h - 10 - mark.shape[0], 0.7)
            else:
                r = ref(a)
            scores.append(ssim(r, b))
        res[name] = (float(np.mean(scores)), float(np.min(scores)))
    # Crop and trim: exact windows of the decoded source (no resize on either side).
    scores = []
    for src in photos[:6]:
        a = np.asarray(Image.open(tessera_render(tessera, [src], recipe_file(work, "whole", []), os.path.join(work, "whole"))[0]).convert("RGB"))
        h, w = a.shape[:2]
        outs = tessera_render(tessera, [src], recipe_file(work, "crop", [{"op": "crop", "x": 0.2, "y": 0.1, "width": 0.5, "height": 0.6, "units": "fractions"}]), os.path.join(work, "crop"))
        b = np.asarray(Image.open(outs[0]).convert("RGB"))
        x0, y0 = round(0.2 * w), round(0.1 * h)
        scores.append(ssim(a[y0:y0 + b.shape[0], x0:x0 + b.shape[1]].astype(np.float64), b))
    res["crop"] = (float(np.mean(scores)), float(np.min(scores)))
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--photos", default=os.path.join(ROOT, "..", "shared", "corpus", "photos"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--tessera", default=os.path.join(ROOT, ".build", "release", "tessera"))
    ap.add_argument("--only", choices=["attention", "speed", "fidelity"])
    args = ap.parse_args()
    photos = sorted(p for p in glob.glob(os.path.join(args.photos, "*")) if p.lower().endswith((".jpg", ".jpeg", ".png")))
    if args.limit:
        photos = photos[:args.limit]
    work = tempfile.mkdtemp()
    try:
        print(f"{len(photos)} photos from {args.photos}; {os.cpu_count()} cores; release tessera, one thread")
        if args.only in (None, "attention"):
            rows = attention(args.tessera, photos, work)
            for label in ("1:1", "16:9"):
                sel = [r for r in rows if r[1] == label]
                if sel:
                    t = np.array([r[2] for r in sel]); c = np.array([r[3] for r in sel])
                    print(f"attention {label}: {len(sel)} windows; IoU with vips: tessera mean {t.mean():.3f} median {np.median(t):.3f}, "
                          f"≥0.5 in {np.mean(t >= 0.5) * 100:.0f} %; centre crop mean {c.mean():.3f}, ≥0.5 in {np.mean(c >= 0.5) * 100:.0f} %")
        if args.only in (None, "speed"):
            res = speed(args.tessera, photos, work, args.repeats)
            n = len(photos)
            for k, v in res.items():
                print(f"speed {k}: {n / v:.1f} images/s ({1000 * v / n:.1f} ms/image)")
            print(f"ratio attention: {res['vipsthumbnail attention'] / res['tessera attention']:.2f}x; "
                  f"attention+sharpen: {res['pyvips attention+sharpen'] / res['tessera attention+sharpen']:.2f}x")
        if args.only in (None, "fidelity"):
            for box in ((1280, 720), (256, 256)):
                res = fidelity(args.tessera, photos, work, box)
                print(f"SSIM vs float reference at {box[0]}x{box[1]}: " +
                      ", ".join(f"{k} {m:.4f} (min {lo:.4f})" for k, (m, lo) in res.items()))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
