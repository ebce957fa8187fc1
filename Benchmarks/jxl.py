#!/usr/bin/env python3
"""JPEG XL: lossless JPEG recompression over a folder of JPEGs, and thumbnails of JPEG XL files,
Tessera against the tools beside it, on the same files, in one run.

  Benchmarks/jxl.py [--photos DIR ...] [--count 12] [--repeats 3]

recompression  `tessera transcode` over every JPEG of the folders (default: the corpus' photos
               and edge cases): files recompressed and refused (with reasons), bytes saved in
               total and per file (median, range), and the time per file; against `cjxl`
               (libjxl's own tool, the same library and effort 7) on the same files: bytes and
               time. Every output is checked by `djxl`: the JPEG comes back byte for byte.
thumbnails     `count` photos recompressed (JPEG XL from JPEG) and coded from pixels (cjxl -d 1,
               the JPEG decoded first): `tessera render -t 1 -s 256` and `-s 1280x720` against
               Debian's `vipsthumbnail` (libvips 8.14 with libjxl 0.7; the PyPI libvips 8.18
               build has no JPEG XL loader), one process each, interleaved repeats, median wall
               time: images/s.
Needs: libjxl-tools (cjxl, djxl), libvips-tools, a release build (.build/release/tessera).
"""
import argparse, glob, json, os, shutil, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESSERA = os.environ.get("TESSERA", os.path.join(ROOT, ".build/release/tessera"))
CORPUS = os.path.join(ROOT, "..", "shared", "corpus")


def run(cmd, check=True):
    t = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if check and r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stderr[-2000:]}")
    return time.monotonic() - t, r


def recompression(folders, work):
    src = os.path.join(work, "jpegs")
    os.makedirs(src)
    for d in folders:
        for f in sorted(glob.glob(os.path.join(d, "*.jpg")) + glob.glob(os.path.join(d, "*.jpeg"))):
            shutil.copy(f, src)
    files = sorted(os.listdir(src))
    out = os.path.join(work, "transcoded")
    seconds, r = run([TESSERA, "transcode", src, "-o", out, "--json"], check=False)
    records = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
    records = [x for x in records if x.get("type") == "record"]
    done = [x for x in records if x["status"] == "succeeded"]
    refused = {}
    for x in records:
        if x["status"] != "succeeded":
            refused[x["error"]["code"]] = refused.get(x["error"]["code"], 0) + 1
    # djxl gives back every JPEG.
    identical = 0
    for x in done:
        name = os.path.basename(x["input"])
        back = os.path.join(work, "back.jpg")
        run(["djxl", os.path.join(out, os.path.splitext(name)[0] + ".jxl"), back])
        identical += open(back, "rb").read() == open(os.path.join(src, name), "rb").read()
    bytes_in = sum(x["bytesIn"] for x in done)
    bytes_out = sum(x["outputs"][0]["bytes"] for x in done)
    per_file = [1 - x["outputs"][0]["bytes"] / x["bytesIn"] for x in done]
    ms = [x["timingsMilliseconds"]["encode"] for x in done]
    # cjxl on the files Tessera recompressed (same libjxl, effort 7).
    cj_bytes, cj_times = 0, []
    for x in done:
        name = os.path.basename(x["input"])
        t, _ = run(["cjxl", os.path.join(src, name), os.path.join(work, "c.jxl"), "--num_threads=0"])
        cj_times.append(t * 1000)
        cj_bytes += os.path.getsize(os.path.join(work, "c.jxl"))
    print(f"\n## Lossless JPEG → JPEG XL: {len(files)} JPEGs, {bytes_in / 1e6:.1f} MB recompressed\n")
    print("| tool | recompressed | refused | bytes out / in | saved (total) | saved per file: median (min…max) | ms per file (median) | djxl gives back the JPEG |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    print(f"| tessera transcode | {len(done)} | {len(files) - len(done)} ({', '.join(f'{k} {v}' for k, v in sorted(refused.items()))}) | "
          f"{bytes_out / 1e6:.2f} / {bytes_in / 1e6:.2f} MB | {100 * (1 - bytes_out / bytes_in):.1f} % | "
          f"{100 * statistics.median(per_file):.1f} % ({100 * min(per_file):.1f}…{100 * max(per_file):.1f}) | "
          f"{statistics.median(ms):.0f} (checked: includes decoding back) | {identical}/{len(done)} |")
    print(f"| cjxl 0.7 (effort 7, 1 thread) | {len(done)} | — | {cj_bytes / 1e6:.2f} / {bytes_in / 1e6:.2f} MB | "
          f"{100 * (1 - cj_bytes / bytes_in):.1f} % | — | {statistics.median(cj_times):.0f} (process start included) | — |")
    print(f"\ntessera transcode wall time: {seconds:.1f} s for {len(files)} files")


def thumbnails(photos, work, count, repeats):
    jpegs = [f for f in sorted(glob.glob(os.path.join(photos, "*.jpg")))]
    sets = {"recompressed": os.path.join(work, "set-recompressed"), "from pixels (d 1)": os.path.join(work, "set-pixels")}
    for d in sets.values():
        os.makedirs(d)
    made = 0
    for f in jpegs:
        if made == count:
            break
        stem = os.path.splitext(os.path.basename(f))[0]
        # Photos libjxl recompresses (not CMYK, 12-bit, arithmetic, nor its one refusal).
        if run(["cjxl", f, os.path.join(sets["recompressed"], stem + ".jxl")], check=False)[1].returncode != 0:
            continue
        run(["cjxl", f, os.path.join(sets["from pixels (d 1)"], stem + ".jxl"), "--lossless_jpeg=0", "-d", "1"])
        made += 1
    print(f"\n## Thumbnails of JPEG XL files ({made} corpus photos), one core each, q80\n")
    print("| set | box | tessera img/s | vipsthumbnail 8.14 img/s | ratio |")
    print("| --- | --- | --- | --- | --- |")
    for label, d in sets.items():
        files = sorted(glob.glob(os.path.join(d, "*.jxl")))
        for box in ("256x256", "1280x720"):
            times = {"tessera": [], "vips": []}
            for _ in range(repeats):
                out = tempfile.mkdtemp(dir=work)
                times["tessera"].append(run([TESSERA, "render", d, "-s", box, "-q", "0.8", "-t", "1", "--format", "jpeg",
                                             "-o", out, "--quiet"])[0])
                out = tempfile.mkdtemp(dir=work)
                env_cmd = ["env", "VIPS_CONCURRENCY=1", "vipsthumbnail", "--size", box, "-o", f"{out}/%s.jpg[Q=80]"] + files
                times["vips"].append(run(env_cmd)[0])
            t, v = len(files) / statistics.median(times["tessera"]), len(files) / statistics.median(times["vips"])
            print(f"| {label} | {box} | {t:.1f} | {v:.1f} | {t / v:.2f}x |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--photos", nargs="*", default=[os.path.join(CORPUS, "photos"), os.path.join(CORPUS, "edge")])
    ap.add_argument("--count", type=int, default=12)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    for tool in ("cjxl", "djxl", "vipsthumbnail"):
        if not shutil.which(tool):
            sys.exit(f"{tool} not found: apt-get install libjxl-tools libvips-tools")
    work = tempfile.mkdtemp(prefix="jxl-")
    try:
        recompression(args.photos, work)
        thumbnails(args.photos[0], work, args.count, args.repeats)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
