#!/usr/bin/env python3
"""Camera raw: Tessera against rawpy (LibRaw), dcraw_emu and exiftool + vipsthumbnail, one core, in one run.

  Benchmarks/raw.py [--photos DIR] [--files 6] [--repeats 3] [--targets 256,1440]

Sources: 24-megapixel Bayer DNGs (6000 x 4000, RGGB, 14-bit over a black level, uncompressed
strips: 48 MB of sensor data each, as a camera writes an uncompressed DNG), made here from the
photos (upscaled, the sRGB curve undone, one colour per photosite). Two sets of the same pictures:
  bare     the sensor data only: every path decodes it;
  preview  with a 1620 x 1080 JPEG preview in a second IFD (the size Nikon and Sony embed).
Tools, each over every file of a set, on one core (`tessera render -t 1`, VIPS_CONCURRENCY=1):
  tessera auto / half / full / preview  `--raw` as named (auto picks the preview when it covers
                                          the output, else half size when half covers it, else AHD);
  rawpy half + Pillow     `postprocess(half_size=True)` then `Image.thumbnail` and a JPEG, one process;
  rawpy AHD + Pillow      `postprocess()` (AHD) then the same: what a script around LibRaw does;
  dcraw_emu -h + vips     LibRaw's own half-size command (a PPM) then `vipsthumbnail` (Debian vips);
  exiftool + vips         `exiftool -b -PreviewImage` then `vipsthumbnail`: the preview route by hand.
Reported: images/s (median of interleaved repeats), peak RSS (GNU time) of one process over the
set, and the peak RSS of a single-file tessera render against the sensor bytes.
Needs: pip install rawpy pillow numpy; apt libraw-bin exiftool libvips-tools; a release build.
"""
import argparse, glob, io, os, shutil, statistics, struct, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESSERA = os.environ.get("TESSERA", os.path.join(ROOT, ".build/release/tessera"))
W, H, BITS = 6000, 4000, 14


def timed(cmd, env=None, shell=False):
    t = time.monotonic()
    full = "/usr/bin/time -f %M " + cmd if shell else ["/usr/bin/time", "-f", "%M"] + cmd
    r = subprocess.run(full, capture_output=True, text=True, shell=shell, env=dict(os.environ, **(env or {})))
    if r.returncode != 0:
        sys.exit(f"failed: {cmd}\n{r.stderr[-2000:]}")
    return time.monotonic() - t, int(r.stderr.strip().splitlines()[-1]) // 1024


def dng(path, cfa, preview=None):
    """A little-endian DNG: IFD0 the CFA sensor data (16-bit samples, uncompressed strips), IFD1 an
    optional JPEG preview (NewSubFileType 1), as `Codec.encodeDNG` writes its fixtures."""
    h, w = cfa.shape
    white = (1 << BITS) - 1
    black = white // 16
    rows = 16
    sensor = cfa.astype("<u2").tobytes()
    strips = [(y * w * 2, min(rows, h - y) * w * 2) for y in range(0, h, rows)]
    matrix = [3.2406, -1.5372, -0.4986, -0.9689, 1.8758, 0.0415, 0.0557, -0.2040, 1.0570]
    out = bytearray(b"II*\0\0\0\0\0")
    start = len(out)
    out += sensor
    raw = {254: (4, [0]), 256: (4, [w]), 257: (4, [h]), 258: (3, [16]), 259: (3, [1]), 262: (3, [32803]),
           271: (2, b"Tessera\0"), 272: (2, b"Bench CFA\0"), 273: (4, [start + o for o, _ in strips]), 274: (3, [1]),
           277: (3, [1]), 278: (4, [rows]), 279: (4, [n for _, n in strips]), 284: (3, [1]), 33421: (3, [2, 2]),
           33422: (1, bytes([0, 1, 1, 2])), 50706: (1, bytes([1, 4, 0, 0])), 50707: (1, bytes([1, 2, 0, 0])),
           50708: (2, b"Tessera Bench CFA\0"), 50714: (4, [black]), 50717: (4, [white]),
           50721: (10, [v for m in matrix for v in (round(m * 10000), 10000)]), 50728: (5, [1, 1] * 3),
           50730: (10, [0, 1]), 50778: (3, [21])}
    ifds = [raw]
    if preview is not None:
        jpeg, (pw, ph) = preview
        at = len(out)
        out += jpeg
        if len(out) % 2:
            out += b"\0"
        ifds.append({254: (4, [1]), 256: (4, [pw]), 257: (4, [ph]), 258: (3, [8, 8, 8]), 259: (3, [7]),
                     262: (3, [6]), 273: (4, [at]), 277: (3, [3]), 278: (4, [ph]), 279: (4, [len(jpeg)]),
                     284: (3, [1])})
    pointer = 4
    for entries in ifds:
        if len(out) % 2:
            out += b"\0"
        struct.pack_into("<I", out, pointer, len(out))
        ifd = len(out)
        out += struct.pack("<H", len(entries)) + bytes(12 * len(entries))
        pointer = len(out)
        out += bytes(4)
        for i, tag in enumerate(sorted(entries)):
            kind, values = entries[tag]
            if isinstance(values, bytes):
                payload, count = values, len(values)
            else:
                fmt = {3: "<H", 4: "<I", 5: "<I", 10: "<i"}[kind]
                payload = b"".join(struct.pack(fmt, v) for v in values)
                count = len(values) // 2 if kind in (5, 10) else len(values)
            at = ifd + 2 + 12 * i
            struct.pack_into("<HHI", out, at, tag, kind, count)
            if len(payload) <= 4:
                out[at + 8:at + 8 + len(payload)] = payload
            else:
                if len(out) % 2:
                    out += b"\0"
                struct.pack_into("<I", out, at + 8, len(out))
                out += payload
    with open(path, "wb") as f:
        f.write(out)


def make_sets(photos, count, work):
    import numpy as np
    from PIL import Image, ImageOps
    files = sorted(glob.glob(os.path.join(photos, "*.jpg")) + glob.glob(os.path.join(photos, "*.png")))
    files = [f for f in files if min(Image.open(f).size) >= 400][:count]
    if not files:
        sys.exit(f"no photos in {photos}")
    sets = {"bare": [], "preview": []}
    rng = np.random.default_rng(1)
    for f in files:
        im = ImageOps.exif_transpose(Image.open(f)).convert("RGB")
        if im.height > im.width:
            im = im.rotate(90, expand=True)
        # 3:2, then 6000 x 4000 with a little sensor noise so the data is not smoother than a camera's.
        w, h = im.size
        if w * 2 > h * 3:
            im = im.crop(((w - h * 3 // 2) // 2, 0, (w - h * 3 // 2) // 2 + h * 3 // 2, h))
        else:
            im = im.crop((0, (h - w * 2 // 3) // 2, w, (h - w * 2 // 3) // 2 + w * 2 // 3))
        big = im.resize((W, H), Image.BICUBIC)
        a = np.asarray(big, dtype=np.float32) / 255.0
        lin = np.where(a <= 0.04045, a / 12.92, ((a + 0.055) / 1.055) ** 2.4)
        white = (1 << BITS) - 1
        black = white // 16
        cfa = np.empty((H, W), np.float32)
        cfa[0::2, 0::2] = lin[0::2, 0::2, 0]
        cfa[0::2, 1::2] = lin[0::2, 1::2, 1]
        cfa[1::2, 0::2] = lin[1::2, 0::2, 1]
        cfa[1::2, 1::2] = lin[1::2, 1::2, 2]
        cfa = black + cfa * (white - black) + rng.normal(0, 6, cfa.shape).astype(np.float32)
        cfa = cfa.clip(0, white).astype(np.uint16)
        stem = os.path.splitext(os.path.basename(f))[0]
        buf = io.BytesIO()
        big.resize((1620, 1080), Image.LANCZOS).save(buf, "JPEG", quality=90)
        for name, preview in (("bare", None), ("preview", (buf.getvalue(), (1620, 1080)))):
            os.makedirs(os.path.join(work, name), exist_ok=True)
            path = os.path.join(work, name, stem + ".dng")
            dng(path, cfa, preview)
            sets[name].append(path)
    return sets


RAWPY = """
import rawpy, sys, os
from PIL import Image
size, half, out = int(sys.argv[1]), sys.argv[2] == "half", sys.argv[3]
for f in sys.argv[4:]:
    with rawpy.imread(f) as r:
        rgb = r.postprocess(half_size=half, use_camera_wb=True, output_bps=8)
    im = Image.fromarray(rgb)
    im.thumbnail((size, size), Image.LANCZOS)
    im.save(os.path.join(out, os.path.basename(f) + ".jpg"), quality=80)
"""


def tools(size, files, out):
    here = " ".join(files)
    t = [TESSERA, "render", "-s", str(size), "-t", "1", "-q", "0.8", "-o", out]
    return {
        "tessera auto": (t + files, False),
        "tessera half": (t + ["--raw", "half"] + files, False),
        "tessera full (AHD)": (t + ["--raw", "full"] + files, False),
        "tessera preview": (t + ["--raw", "preview"] + files, False),
        "rawpy half + Pillow": ([sys.executable, "-c", RAWPY, str(size), "half", out] + files, False),
        "rawpy AHD + Pillow": ([sys.executable, "-c", RAWPY, str(size), "full", out] + files, False),
        "dcraw_emu -h + vipsthumbnail": (
            f"sh -c 'for f in {here}; do dcraw_emu -h -w -o 1 -Z {out}/x.ppm \"$f\" && "
            f"vipsthumbnail {out}/x.ppm -s {size} -o {out}/$(basename \"$f\").jpg[Q=80]; done'", True),
        "exiftool preview + vipsthumbnail": (
            f"sh -c 'for f in {here}; do exiftool -q -b -PreviewImage \"$f\" > {out}/p.jpg && "
            f"vipsthumbnail {out}/p.jpg -s {size} -o {out}/$(basename \"$f\").jpg[Q=80]; done'", True),
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--photos", default=os.path.join(ROOT, "..", "shared", "corpus", "photos"))
    p.add_argument("--files", type=int, default=6)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--targets", default="256,1440")
    p.add_argument("--tools", help="comma-separated substrings of tool names to run")
    args = p.parse_args()
    import rawpy
    work = tempfile.mkdtemp(prefix="tessera-raw-")
    try:
        print(f"rawpy {rawpy.__version__} (LibRaw {'.'.join(map(str, rawpy.libraw_version))}); "
              f"tessera {TESSERA}; {os.cpu_count()} cores, runs pinned to one")
        sets = make_sets(args.photos, args.files, work)
        print(f"{len(sets['bare'])} files of {W} x {H} ({W * H * 2 / 1e6:.0f} MB of sensor data each)")
        for size in map(int, args.targets.split(",")):
            print(f"\n### {size} px\n")
            print("| set | tool | img/s | vs rawpy half | peak RSS MB |")
            print("| --- | --- | --- | --- | --- |")
            for name, files in sets.items():
                names = [n for n in tools(size, files, work)
                         if not args.tools or any(s in n for s in args.tools.split(","))]
                if name == "bare":
                    names = [n for n in names if "preview" not in n]
                runs = {n: [] for n in names}
                for _ in range(args.repeats):
                    for n in names:
                        out = tempfile.mkdtemp(dir=work)
                        cmd, shell = tools(size, files, out)[n]
                        cmd = f"taskset -c 0 {cmd}" if shell else ["taskset", "-c", "0"] + cmd
                        runs[n].append(timed(cmd, env={"VIPS_CONCURRENCY": "1", "OMP_NUM_THREADS": "1"}, shell=shell))
                        shutil.rmtree(out)
                base = statistics.median(s for s, _ in runs["rawpy half + Pillow"]) if "rawpy half + Pillow" in runs else None
                for n in names:
                    t = statistics.median(s for s, _ in runs[n])
                    ratio = f"{base / t:.2f}x" if base else "-"
                    print(f"| {name} | {n} | {len(files) / t:.2f} | {ratio} | {max(m for _, m in runs[n])} |")
        # Memory per worker: one file through one worker, the report's peak against the sensor bytes.
        print("\n| render of one 24 MP DNG | peak RSS MB (process) | sensor MB |")
        print("| --- | --- | --- |")
        for mode in ("half", "full", "preview"):
            f = sets["preview"][0]
            out = tempfile.mkdtemp(dir=work)
            _, m = timed([TESSERA, "render", "-s", "256" if mode != "full" else "1440", "-t", "1", "--raw", mode, "-o", out, f])
            print(f"| --raw {mode} | {m} | {W * H * 2 // 1048576} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
