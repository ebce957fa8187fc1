#!/usr/bin/env python3
"""Writes the committed seed corpora of the fuzz targets into Fuzz/corpus/TARGET/.

    python3 Fuzz/seeds.py

Every seed is made here (Pillow, deterministic), small (a few kB) and covers a structure
the parser must walk: baseline and progressive JPEGs in each subsampling, grayscale and
CMYK, EXIF (orientation, GPS, copyright, a thumbnail), ICC and XMP segments, restart
markers; PNGs of each colour type and bit depth with text, gamma, ICC and eXIf chunks;
EXIF payloads on their own; job files in YAML and JSON. The wire target's seeds are written
by the fuzz binary itself (FUZZ_WRITE_SEEDS), from the real encoders.
"""
import io, json, os, shutil, struct, zlib
from PIL import Image, ImageDraw

here = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(here, "corpus")


def picture(w, h, mode="RGB"):
    im = Image.new("RGB", (w, h), (200, 120, 40))
    d = ImageDraw.Draw(im)
    for i in range(0, w, 7):
        d.line([(i, 0), (w - i, h)], fill=(i * 5 % 255, 80, 255 - i * 3 % 255))
    d.ellipse([w // 4, h // 4, w * 3 // 4, h * 3 // 4], fill=(30, 200, 90))
    return im.convert(mode)


def exif_bytes(orientation=6, gps=True, copyright=True, thumbnail=False):
    e = Image.Exif()
    e[0x0112] = orientation
    if copyright:
        e[0x8298] = "(c) Tessera fuzz seed"
    e[0x010F] = "TesseraCam"
    if gps:
        e[0x8825] = {1: "N", 2: (48.0, 51.0, 29.0), 3: "E", 4: (2.0, 17.0, 40.0)}
    data = e.tobytes()
    if thumbnail:
        # IFD1 with a JPEG thumbnail, appended by hand (Pillow writes IFD0 only).
        thumb = io.BytesIO()
        picture(16, 12).save(thumb, "JPEG", quality=50)
        t = thumb.getvalue()
        tiff = bytearray(data[6:])  # without "Exif\0\0"
        little = tiff[:2] == b"II"
        fmt = "<" if little else ">"
        ifd0 = struct.unpack(fmt + "I", tiff[4:8])[0]
        n = struct.unpack(fmt + "H", tiff[ifd0:ifd0 + 2])[0]
        next_ptr = ifd0 + 2 + 12 * n
        ifd1 = len(tiff)
        tiff[next_ptr:next_ptr + 4] = struct.pack(fmt + "I", ifd1)
        entries = [(0x0103, 3, 1, 6), (0x0201, 4, 1, ifd1 + 2 + 12 * 3 + 4), (0x0202, 4, 1, len(t))]
        tiff += struct.pack(fmt + "H", len(entries))
        for tag, typ, count, value in entries:
            if typ == 3:
                tiff += struct.pack(fmt + "HHIHH", tag, typ, count, value, 0)
            else:
                tiff += struct.pack(fmt + "HHII", tag, typ, count, value)
        tiff += struct.pack(fmt + "I", 0) + t
        data = b"Exif\x00\x00" + bytes(tiff)
    return data


def icc():
    from PIL import ImageCms
    return ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()


def xmp_segment(jpeg):
    """Inserts an XMP APP1 and a COM segment after SOI."""
    xmp = b"http://ns.adobe.com/xap/1.0/\x00<x:xmpmeta xmlns:x='adobe:ns:meta/'><rdf:RDF/></x:xmpmeta>"
    app1 = b"\xff\xe1" + struct.pack(">H", len(xmp) + 2) + xmp
    com = b"\xff\xfe" + struct.pack(">H", 12) + b"fuzz seed!"
    return jpeg[:2] + app1 + com + jpeg[2:]


def jpegs():
    seeds = {}
    for sub, name in [(0, "444"), (1, "422"), (2, "420")]:
        for progressive in (False, True):
            b = io.BytesIO()
            picture(37, 29).save(b, "JPEG", quality=70, subsampling=sub, progressive=progressive,
                                 exif=exif_bytes(thumbnail=(sub == 2)))
            seeds[f"{'prog' if progressive else 'base'}_{name}.jpg"] = b.getvalue()
    for progressive in (False, True):
        b = io.BytesIO()
        picture(40, 24, "L").save(b, "JPEG", quality=60, progressive=progressive)
        seeds[f"{'prog' if progressive else 'base'}_gray.jpg"] = b.getvalue()
    b = io.BytesIO()
    picture(24, 16, "CMYK").save(b, "JPEG", quality=60)
    seeds["cmyk.jpg"] = b.getvalue()
    b = io.BytesIO()
    picture(33, 21).save(b, "JPEG", quality=80, icc_profile=icc(), progressive=True, optimize=True)
    seeds["prog_icc_optimized.jpg"] = xmp_segment(b.getvalue())
    b = io.BytesIO()
    picture(64, 48).save(b, "JPEG", quality=75, exif=exif_bytes(orientation=3, gps=False))
    seeds["base_orient3_64x48.jpg"] = b.getvalue()
    # Restart markers every MCU row (Pillow has no option for them: insert DRI by hand is
    # not enough, the scan must carry RSTn). Use libjpeg via Pillow's 'restart_marker_blocks'
    # where available, else skip.
    try:
        b = io.BytesIO()
        picture(48, 32).save(b, "JPEG", quality=70, restart_marker_blocks=2)
        seeds["base_restart.jpg"] = b.getvalue()
        b = io.BytesIO()
        picture(48, 32).save(b, "JPEG", quality=70, restart_marker_blocks=2, progressive=True)
        seeds["prog_restart.jpg"] = b.getvalue()
    except (TypeError, OSError):
        pass
    return seeds


def ultra_hdr(primary, gain_map, xmp=True, iso=True, channels=1):
    """An Ultra HDR JPEG as libultrahdr lays it out: the primary with an ISO 21496-1 version
    block and an MPF index; the gain map JPEG with hdrgm XMP and ISO 21496-1 metadata."""
    def seg(marker, payload):
        return b"\xff" + bytes([marker]) + struct.pack(">H", len(payload) + 2) + payload
    sig = b"urn:iso:std:iso:ts:21496:-1\x00"
    per = [(0, 2500000, 1000000, 15625, 15625)] * channels  # min, max (log2 x 1e6), gamma, offsets
    body = b"\x00\x00\x00\x00" + bytes([(0x80 if channels == 3 else 0) | 0x40 | 0x08])
    body += struct.pack(">III", 1000000, 0, 2500000)
    for mn, mx, g, o1, o2 in per:
        body += struct.pack(">iiIii", mn, mx, g, o1, o2)
    meta = b""
    if xmp:
        seq = "<hdrgm:Gamma><rdf:Seq><rdf:li>1</rdf:li><rdf:li>1.1</rdf:li><rdf:li>0.9</rdf:li></rdf:Seq></hdrgm:Gamma>" if channels == 3 else ""
        text = ('<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">'
                '<rdf:Description xmlns:hdrgm="http://ns.adobe.com/hdr-gain-map/1.0/" hdrgm:Version="1.0" '
                'hdrgm:GainMapMax="2.5" hdrgm:HDRCapacityMax="2.5"' + (">" + seq + "</rdf:Description>" if seq else "/>")
                + "</rdf:RDF></x:xmpmeta>")
        meta += seg(0xE1, b"http://ns.adobe.com/xap/1.0/\x00" + text.encode())
    if iso:
        meta += seg(0xE2, sig + body)
    gm = gain_map[:2] + meta + gain_map[2:]
    iso_primary = seg(0xE2, sig + b"\x00\x00\x00\x00")
    mpf_len = 4 + 8 + 2 + 36 + 4 + 32
    origin = 2 + len(iso_primary) + 4 + 4
    total = len(primary) + len(iso_primary) + 4 + mpf_len
    mpf = b"MPF\x00MM\x00*\x00\x00\x00\x08\x00\x03"
    mpf += b"\xb0\x00\x00\x07" + struct.pack(">I", 4) + b"0100"
    mpf += b"\xb0\x01\x00\x04" + struct.pack(">II", 1, 2)
    mpf += b"\xb0\x02\x00\x07" + struct.pack(">II", 32, 50) + struct.pack(">I", 0)
    mpf += struct.pack(">IIIHH", 0x030000, total, 0, 0, 0) + struct.pack(">IIIHH", 0, len(gm), total - origin, 0, 0)
    return primary[:2] + iso_primary + seg(0xE2, mpf) + primary[2:] + gm


def gain_maps():
    """Small Ultra HDR JPEGs: gray and RGB maps, XMP only, ISO only, an orientation."""
    seeds = {}
    def jpeg(im, **kw):
        b = io.BytesIO()
        im.save(b, "JPEG", quality=75, **kw)
        return b.getvalue()
    primary, gray = jpeg(picture(48, 32)), jpeg(picture(12, 8, "L"))
    seeds["uhdr_gray.jpg"] = ultra_hdr(primary, gray)
    seeds["uhdr_rgb_seq.jpg"] = ultra_hdr(primary, jpeg(picture(12, 8)), channels=3)
    seeds["uhdr_xmp_only.jpg"] = ultra_hdr(primary, gray, iso=False)
    seeds["uhdr_iso_only.jpg"] = ultra_hdr(primary, gray, xmp=False)
    seeds["uhdr_orient6.jpg"] = ultra_hdr(jpeg(picture(48, 32), exif=exif_bytes(orientation=6, gps=False)), jpeg(picture(24, 16, "L")))
    return seeds


def webps():
    seeds = {}
    try:
        for name, kw, mode in [("lossy.webp", {"quality": 60}, "RGB"), ("lossless.webp", {"lossless": True}, "RGBA"),
                               ("alpha.webp", {"quality": 50}, "RGBA")]:
            b = io.BytesIO()
            picture(21, 17, mode).save(b, "WEBP", exif=exif_bytes(), icc_profile=icc(), **kw)
            seeds[name] = b.getvalue()
        b = io.BytesIO()
        frames = [picture(12, 10), picture(12, 10).rotate(90)]
        frames[0].save(b, "WEBP", save_all=True, append_images=frames[1:], duration=100, loop=0)
        seeds["animated.webp"] = b.getvalue()
    except (KeyError, OSError):
        pass  # Pillow without WebP
    return seeds


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def pngs():
    seeds = {}
    for mode, name in [("RGB", "rgb8"), ("RGBA", "rgba8"), ("L", "gray8"), ("LA", "grayalpha8"), ("P", "palette8"),
                       ("1", "gray1"), ("I;16", "gray16")]:
        b = io.BytesIO()
        im = picture(19, 13, "RGB")
        im = im.convert(mode) if mode != "I;16" else im.convert("L").convert("I;16")
        im.save(b, "PNG")
        seeds[f"{name}.png"] = b.getvalue()
    b = io.BytesIO()
    p = picture(16, 16, "P")
    p.info["transparency"] = 0
    p.save(b, "PNG", transparency=0)
    seeds["palette_trns.png"] = b.getvalue()
    # Metadata chunks inserted before IDAT: gAMA, tEXt, iCCP, eXIf, pHYs.
    base = seeds["rgb8.png"]
    ihdr_end = 8 + 25
    extra = (png_chunk(b"gAMA", struct.pack(">I", 45455)) + png_chunk(b"tEXt", b"Comment\x00fuzz seed")
             + png_chunk(b"iCCP", b"sRGB\x00\x00" + zlib.compress(icc()))
             + png_chunk(b"eXIf", exif_bytes()[6:]) + png_chunk(b"pHYs", struct.pack(">IIB", 2835, 2835, 1)))
    seeds["rgb8_metadata.png"] = base[:ihdr_end] + extra + base[ihdr_end:]
    return seeds


def tiffs():
    """TIFFs of each layout the reader unpacks or hands to libtiff's RGBA reader: every
    compression Pillow writes, 1/8/16-bit and float, gray, RGB(A), CMYK, palette, CIELab,
    several pages; tiled and BigTIFF copies by tiffcp when it is installed."""
    seeds = {}
    base = picture(40, 28)
    def save(name, im, **kw):
        b = io.BytesIO()
        im.save(b, "TIFF", **kw)
        seeds[name] = b.getvalue()
    for c in ("raw", "tiff_lzw", "tiff_adobe_deflate", "packbits", "jpeg"):
        save(f"rgb_{c}.tif", base, compression=c)
    save("rgba_lzw.tif", base.convert("RGBA"), compression="tiff_lzw")
    save("gray.tif", base.convert("L"))
    save("bilevel_g4.tif", base.convert("1"), compression="group4")
    save("bilevel_g3.tif", base.convert("1"), compression="group3")
    save("cmyk.tif", base.convert("CMYK"), compression="tiff_lzw")
    save("palette.tif", base.convert("P"))
    save("gray16.tif", base.convert("I;16"))
    save("float.tif", base.convert("F"))
    save("lab.tif", base.convert("LAB"))
    save("pages.tif", base, save_all=True, append_images=[base.resize((20, 14)), base.convert("L")])
    e = Image.Exif()
    e[0x0112] = 6
    save("orient6.tif", base, exif=e)
    import subprocess, tempfile
    if shutil.which("tiffcp"):
        with tempfile.TemporaryDirectory() as t:
            src = os.path.join(t, "src.tif")
            open(src, "wb").write(seeds["rgb_raw.tif"])
            for name, args in (("tiled_zip.tif", ["-t", "-w", "16", "-l", "16", "-c", "zip"]),
                               ("planar_lzw.tif", ["-p", "separate", "-c", "lzw"]),
                               ("bigtiff.tif", ["-8", "-c", "lzw"]), ("zstd.tif", ["-c", "zstd"]),
                               ("tiled_jpeg.tif", ["-t", "-w", "16", "-l", "16", "-c", "jpeg"]),
                               ("lzw_predictor.tif", ["-c", "lzw:2"]),
                               ("tiled_lzw_predictor.tif", ["-t", "-w", "16", "-l", "16", "-c", "lzw:2"])):
                dst = os.path.join(t, name)
                subprocess.run(["tiffcp", *args, src, dst], check=True)
                seeds[name] = open(dst, "rb").read()
    return seeds


def gifs():
    """GIFs by Pillow: a still, an interlaced one, transparency, and animations with each
    disposal method (frames smaller than the screen, at offsets), a local colour table."""
    seeds = {}
    base = picture(40, 28)
    def save(name, im, **kw):
        b = io.BytesIO()
        im.save(b, "GIF", **kw)
        seeds[name] = b.getvalue()
    save("still.gif", base.convert("P"))
    save("interlaced.gif", base.convert("P"), interlace=True)
    t = base.convert("P")
    save("transparent.gif", t, transparency=0)
    frames = [base.rotate(a).convert("P") for a in (0, 90, 180, 270)]
    for d in (0, 1, 2, 3):
        save(f"anim_dispose{d}.gif", frames[0], save_all=True, append_images=frames[1:], duration=[50, 60, 70, 80],
             loop=0, disposal=d, transparency=0)
    small = [base.resize((20, 14)).rotate(a).convert("P") for a in (0, 180)]
    save("anim_local_tables.gif", base.convert("P"), save_all=True, append_images=small, duration=40, loop=3, disposal=2)
    return seeds


def videos():
    """Tiny videos by Debian's ffmpeg (deterministic encoders, single-threaded): every container
    and codec the video target reads, a rotation, 10-bit HLG, a black start."""
    import subprocess, tempfile
    src = "testsrc2=size=64x48:rate=10:duration=1"
    cases = {
        "h264.mp4": ["-c:v", "libx264", "-preset", "veryfast", "-g", "4", "-pix_fmt", "yuv420p"],
        "h264_faststart.mp4": ["-c:v", "libx264", "-preset", "veryfast", "-bf", "2", "-pix_fmt", "yuv420p", "-movflags", "faststart"],
        "hevc_rotated.mov": ["-c:v", "libx265", "-preset", "ultrafast", "-x265-params", "log-level=error", "-tag:v", "hvc1",
                             "-pix_fmt", "yuv420p", "-metadata:s:v:0", "rotate=270"],
        "hevc_hlg10.mp4": ["-c:v", "libx265", "-preset", "ultrafast", "-pix_fmt", "yuv420p10le",
                           "-x265-params", "colorprim=bt2020:transfer=arib-std-b67:colormatrix=bt2020nc:log-level=error"],
        "vp9.webm": ["-c:v", "libvpx-vp9", "-b:v", "50k", "-deadline", "realtime"],
        "vp8.mkv": ["-c:v", "libvpx", "-b:v", "50k"],
        "av1.mkv": ["-c:v", "libsvtav1", "-preset", "12"],
        "mpeg4.avi": ["-c:v", "mpeg4", "-q:v", "8"],
        "mjpeg.avi": ["-c:v", "mjpeg", "-q:v", "8"],
    }
    seeds = {}
    with tempfile.TemporaryDirectory() as d:
        for name, args in cases.items():
            path = os.path.join(d, name)
            r = subprocess.run(["ffmpeg", "-v", "error", "-y", "-threads", "1", "-f", "lavfi", "-i", src, "-fflags", "+bitexact",
                                "-flags:v", "+bitexact"] + args + [path], capture_output=True)
            if r.returncode == 0:
                with open(path, "rb") as f:
                    seeds[name] = f.read()
    return seeds


def jobs(root):
    seeds = {}
    for d in ("jobs", "examples/recipes"):
        for name in sorted(os.listdir(os.path.join(root, d))):
            path = os.path.join(root, d, name)
            if name.endswith((".yaml", ".json")) and os.path.getsize(path) < 8192:
                seeds[name] = open(path, "rb").read()
    seeds["inline.json"] = json.dumps({
        "name": "fuzz", "inputs": ["a.jpg", "dir/"], "output": "out",
        "outputs": [{"recipe": {"name": "r", "operations": [{"op": "resize", "width": 64, "height": 64, "mode": "fill"},
                                                             {"op": "sharpen", "sigma": 0.8}],
                                "output": {"format": "webp", "quality": 0.7}}, "path": "{stem}-r.{ext}"}],
        "options": {"maxMegapixels": 50}}).encode()
    seeds["anchors.yaml"] = b"name: &n x\ninputs: [*n, *n]\noutput: out\noutputs:\n  - &o {preset: thumbnail}\n  - {preset: widget}\n"
    return seeds


def jxls():
    """JPEG XL seeds made with cjxl (libjxl-tools): lossy (VarDCT, a DC pass), lossless
    (modular), alpha, 16-bit PQ, Exif/XMP boxes, an animation, and a recompressed JPEG
    (container with jbrd); plus two small JPEGs for the recompression half of the target."""
    import subprocess, tempfile
    seeds = {}
    with tempfile.TemporaryDirectory() as t:
        def cjxl(name, im, *args, src_ext="png", **save):
            src = os.path.join(t, name + "." + src_ext)
            im.save(src, **save)
            dst = os.path.join(t, name + ".jxl")
            subprocess.run(["cjxl", src, dst, *args], check=True, capture_output=True)
            seeds[name + ".jxl"] = open(dst, "rb").read()
        cjxl("lossy", picture(96, 64), "-d", "2", "-e", "3")
        cjxl("lossless", picture(40, 30), "-d", "0", "-e", "1")
        cjxl("alpha", picture(48, 40, "RGBA"), "-d", "1.5")
        cjxl("gray", picture(40, 40, "L"), "-d", "1")
        cjxl("pq16", picture(32, 24).convert("I;16"), "-d", "0", "-x", "color_space=Gra_D65_Rel_PeQ")
        cjxl("exif_xmp", picture(40, 32), "-d", "1", "--container=1", src_ext="jpg",
             exif=exif_bytes(), quality=80)
        cjxl("recompressed", picture(64, 48), src_ext="jpg", quality=85)
        frames = [picture(32, 32).rotate(a) for a in (0, 90, 180)]
        gif = os.path.join(t, "anim.gif")
        frames[0].save(gif, save_all=True, append_images=frames[1:], duration=100, loop=0)
        subprocess.run(["cjxl", gif, os.path.join(t, "anim.jxl")], check=True, capture_output=True)
        seeds["anim.jxl"] = open(os.path.join(t, "anim.jxl"), "rb").read()
    for name, q in (("small.jpg", 80), ("progressive.jpg", 70)):
        buf = io.BytesIO()
        picture(48, 32).save(buf, "JPEG", quality=q, progressive=name.startswith("prog"))
        seeds[name] = buf.getvalue()
    return seeds


def write(target, seeds):
    d = os.path.join(out, target)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for name, data in seeds.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
    print(f"{target:12} {len(seeds):3} seeds, {sum(map(len, seeds.values())):7} bytes")


root = os.path.dirname(here)
import sys
if sys.argv[1:] == ["tiff"]:  # one target's seeds, the others left as committed
    write("tiff", tiffs())
    sys.exit(0)
if sys.argv[1:] == ["gif"]:
    write("gif", gifs())
    sys.exit(0)
if sys.argv[1:] == ["jxl"]:
    write("jxl", jxls())
    sys.exit(0)
if sys.argv[1:] == ["entropy"]:
    write("entropy", {k: v for k, v in jpegs().items() if k.startswith(("base", "prog")) or k == "cmyk.jpg"})
    sys.exit(0)
if sys.argv[1:] == ["video"]:
    write("video", videos())
    sys.exit(0)
if sys.argv[1:] == ["gainmap"]:  # the gain-map seeds added to render, inspect and strip
    for target in ("render", "inspect", "strip"):
        for name, data in gain_maps().items():
            with open(os.path.join(out, target, name), "wb") as f:
                f.write(data)
    sys.exit(0)
j, p = jpegs(), pngs()
images = {**j, **p, **gain_maps()}
write("render", {**images, **webps()})
write("inspect", images)
write("strip", images)
write("progressive", {k: v for k, v in j.items() if k.startswith("prog")})
write("entropy", {k: v for k, v in j.items() if k.startswith(("base", "prog")) or k == "cmyk.jpg"})
write("png", p)
write("exif", {"gps_orient6.exif": exif_bytes(), "thumbnail.exif": exif_bytes(thumbnail=True),
               "plain.exif": exif_bytes(orientation=1, gps=False, copyright=False)})
write("job", jobs(root))
write("tiff", tiffs())
write("gif", gifs())
write("video", videos())
write("jxl", jxls())
