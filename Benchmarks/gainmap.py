#!/usr/bin/env python3
"""Ultra HDR JPEG sources: Tessera against libvips 8.18 (PyPI pyvips-binary, libultrahdr inside),
on the same files, in one run, the gain map kept by both.

  Benchmarks/gainmap.py [--photos DIR] [--count 8] [--repeats 3]

The set: the corpus' Ultra HDR JPEG (sharp's fixture, when ../shared/corpus is there) and `count`
photos made HDR and written by vips 8.18's `uhdrsave` (libultrahdr computes the SDR base and the
gain map): each photo at 4032 px wide (a phone's 12 MP), highlights above 55 % luminance boosted up
to 4x in linear light.
For 256 px and 1280x720 thumbnails (quality 80 both):
  speed    `tessera render -t 1` (map kept; and --gain-map drop) against pyvips `thumbnail` +
           `jpegsave` in a loop in one process (VIPS_CONCURRENCY=1), interleaved repeats, median
           wall time: images/s;
  bytes    total output bytes, each tool with the map and Tessera without;
  HDR      each output's HDR rendition (the ISO 21496-1 formula, the map upsampled bilinearly, full
           headroom) against the source's own rendition area-resized to the output's size: PSNR
           in linear light, peak the reference's brightest value (median over files);
  readable how many of Tessera's outputs vips 8.18 reads as Ultra HDR (a gain map attached).
Needs: pip install pyvips pyvips-binary numpy pillow; a release build (.build/release/tessera).
"""
import argparse, glob, io, os, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESSERA = os.environ.get("TESSERA", os.path.join(ROOT, ".build/release/tessera"))
CORPUS = os.path.join(ROOT, "..", "shared", "corpus", "photos")

VIPS_THUMBS = """
import pyvips, sys, os
out, w, h = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for f in sys.argv[4:]:
    pyvips.Image.thumbnail(f, w, height=h).jpegsave(os.path.join(out, os.path.basename(f)), Q=80)
"""


def make_set(photos, work, count):
    import pyvips
    files = []
    sharp = os.path.join(CORPUS, "sharp_gain-map.jpg")
    os.makedirs(os.path.join(work, "set"), exist_ok=True)
    if os.path.exists(sharp):
        dst = os.path.join(work, "set", "sharp_gain-map.jpg")
        with open(sharp, "rb") as a, open(dst, "wb") as b:
            b.write(a.read())
        files.append(dst)
    candidates = [f for f in sorted(glob.glob(os.path.join(photos, "*.jpg"))) if "gain-map" not in f]
    for f in candidates:
        if len(files) >= count + 1:
            break
        im = pyvips.Image.new_from_file(f)
        if im.width * im.height < 6e6 or im.bands != 3:
            continue
        im = im.autorot().thumbnail_image(4032)
        lin = im.colourspace("scrgb")
        y = lin.colourspace("b-w")
        g = (y - 0.55) / 0.45
        g = (g > 0).ifthenelse(g, 0)
        g = (g < 1).ifthenelse(g, 1)
        hdr = (lin * (g * g * (3 - 2 * g) * 3 + 1)).copy(interpretation="scrgb")
        dst = os.path.join(work, "set", os.path.basename(f))
        hdr.uhdrsave(dst, Q=90)
        files.append(dst)
    return files


def timed(cmd, env=None):
    t = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, **(env or {})))
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stderr[-2000:]}")
    return time.monotonic() - t


# --- the HDR rendition (ISO 21496-1 / Ultra HDR), from the files' own metadata as vips reads it ---

def rendition(path):
    import numpy as np
    import pyvips
    from PIL import Image
    im = pyvips.Image.new_from_file(path)
    sdr = np.asarray(Image.open(path).convert("RGB")).astype(np.float64) / 255
    sdr = np.where(sdr <= 0.04045, sdr / 12.92, ((sdr + 0.055) / 1.055) ** 2.4)
    gm = Image.open(io.BytesIO(im.get("gainmap-data")))
    h, w = sdr.shape[:2]
    m = gm.convert("RGB" if gm.mode == "RGB" else "L")
    m = np.stack([np.asarray(Image.fromarray(np.asarray(m, np.float32)[..., c] if gm.mode == "RGB" else np.asarray(m, np.float32))
                             .resize((w, h), Image.BILINEAR)) for c in range(3 if gm.mode == "RGB" else 1)], -1) / 255
    mn = np.log2(np.array(im.get("gainmap-min-content-boost")))
    mx = np.log2(np.array(im.get("gainmap-max-content-boost")))
    gamma = np.array(im.get("gainmap-gamma"))
    osdr, ohdr = np.array(im.get("gainmap-offset-sdr")), np.array(im.get("gainmap-offset-hdr"))
    rec = np.clip(m, 0, 1) ** (1 / gamma)
    return (sdr + osdr) * np.exp2(mn * (1 - rec) + mx * rec) - ohdr


def area(img, w, h):
    import numpy as np
    from PIL import Image
    return np.stack([np.asarray(Image.fromarray(img[..., c].astype(np.float32)).resize((w, h), Image.BOX)) for c in range(3)], -1)


def psnr(a, ref):
    import numpy as np
    mse = float(((a - ref) ** 2).mean())
    return 10 * np.log10(float(ref.max()) ** 2 / max(mse, 1e-20))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--photos", default=CORPUS)
    ap.add_argument("--count", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    import pyvips
    print(f"libvips {pyvips.version(0)}.{pyvips.version(1)}.{pyvips.version(2)}")
    work = tempfile.mkdtemp(prefix="gainmap-")
    files = make_set(args.photos, work, args.count)
    mp = sum(pyvips.Image.new_from_file(f).width * pyvips.Image.new_from_file(f).height for f in files) / 1e6
    print(f"{len(files)} Ultra HDR JPEGs, {mp:.0f} MP, {sum(os.path.getsize(f) for f in files) / 1e6:.1f} MB")
    references = {f: rendition(f) for f in files}
    rows = []
    for label, (w, h) in (("256 px", (256, 256)), ("1280x720", (1280, 720))):
        times = {"keep": [], "drop": [], "vips": []}
        outs = {}
        for _ in range(args.repeats):
            for tool in times:
                out = tempfile.mkdtemp(dir=work)
                if tool == "vips":
                    times[tool].append(timed([sys.executable, "-c", VIPS_THUMBS, out, str(w), str(h)] + files,
                                             env={"VIPS_CONCURRENCY": "1"}))
                else:
                    times[tool].append(timed([TESSERA, "render", os.path.join(work, "set"), "-s", f"{w}x{h}", "-q", "0.8",
                                              "-t", "1", "--gain-map", tool, "-o", out, "--quiet"]))
                outs[tool] = out
        size = {t: sum(os.path.getsize(os.path.join(outs[t], os.path.basename(f))) for f in files) for t in outs}
        readable = sum(1 for f in files if "gainmap-data" in pyvips.Image.new_from_file(os.path.join(outs["keep"], os.path.basename(f))).get_fields())
        scores = {"keep": [], "vips": []}
        for f in files:
            for t in scores:
                o = os.path.join(outs[t], os.path.basename(f))
                r = rendition(o)
                ref = area(references[f], r.shape[1], r.shape[0])
                scores[t].append(psnr(r, ref))
        med = {t: statistics.median(v) for t, v in times.items()}
        rows.append((label, len(files) / med["keep"], len(files) / med["drop"], len(files) / med["vips"], size["keep"], size["drop"],
                     size["vips"], statistics.median(scores["keep"]), statistics.median(scores["vips"]), readable, len(files)))
    print("\n| thumbnails | tessera img/s (map kept) | tessera img/s (dropped) | vips 8.18 img/s | ratio | keep cost: time | "
          "bytes kept / dropped / vips | keep cost: bytes | HDR PSNR tessera / vips | vips reads ours as Ultra HDR |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for label, k, d, v, bk, bd, bv, pk, pv, readable, n in rows:
        print(f"| {label} | {k:.1f} | {d:.1f} | {v:.1f} | {k / v:.2f}x | +{(d / k - 1) * 100:.0f} % | "
              f"{bk / 1e3:.0f} / {bd / 1e3:.0f} / {bv / 1e3:.0f} kB | +{(bk / bd - 1) * 100:.0f} % | {pk:.1f} / {pv:.1f} dB | {readable}/{n} |")


if __name__ == "__main__":
    main()
