#!/usr/bin/env python3
"""Tessera against its peers, on the same photos, in one run.

For each target box (favicon 64 px, 256 px, thumbnail 1280x720) it times, over
REPEATS interleaved repetitions:
  tessera render (one process, one thread); tessera run (embedded pool, 1 and 2
  workers); libvips 8.18 (PyPI pyvips-binary: `thumbnail` + `jpegsave` in a loop in one
  process, VIPS_CONCURRENCY=1, timed inside the loop so Python's start-up is not counted;
  and as two processes on halves of the files); Debian's vipsthumbnail 8.14 (one thread); ImageMagick and GraphicsMagick mogrify with
  their JPEG size hints; a bare C loop over libjpeg-turbo (scaled decode + box filter
  + encode) and its decode-only variant; vipsthumbnail and the bare loop as two
  processes on halves of the files.
It reports median images/s and megapixels/s with min/max, each tool's ratio to
tessera render, peak RSS per process, and output quality (SSIM, SSIMULACRA2, PSNR) against
the gold reference of quality.py (full decode + float Lanczos-3 in linear light).
Writes Benchmarks/results/<date>-<host>.{md,json,png}.

usage: Benchmarks/bench.py [--photos DIR] [--targets 64,256,1280x720] [--repeats 3]
                           [--install-peers | --fresh] [--tools a,b,...] [--no-quality]
                           [--no-ssimulacra2] [--modern] [--baseline OLDER_TESSERA]
--fresh (a new machine): installs the peers (Debian: libvips-tools, imagemagick, graphicsmagick,
libheif-examples for --modern's HEIC set, libjxl-tools) and the Python packages (pyvips,
pyvips-binary, ssimulacra2, pyjpegli, pillow, scipy, numpy, matplotlib), then runs.
--modern then runs Benchmarks/modern.py: the HEIC and WebP sets (decode side against
vipsthumbnail, primary decode forced on both sides) and WebP/AVIF bytes at JPEG's SSIM.
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


def install_peers():
    need = [p for p, exe in (("libvips-tools", "vipsthumbnail"), ("imagemagick", "mogrify"),
                             ("graphicsmagick", "gm"), ("libheif-examples", "heif-enc"), ("libjxl-tools", "cjxl"))
            if not shutil.which(exe)]
    if need:
        sudo = [] if os.geteuid() == 0 else ["sudo"]
        subprocess.run(sudo + ["apt-get", "update", "-qq"], check=True)
        subprocess.run(sudo + ["apt-get", "install", "-y", "-qq", "--no-install-recommends"] + need, check=True,
                       env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    packages = ["pillow", "scipy", "numpy", "matplotlib", "pyvips", "pyvips-binary", "ssimulacra2", "pyjpegli"]
    if subprocess.run([sys.executable, "-m", "pip", "install", "-q"] + packages).returncode != 0:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--break-system-packages"] + packages, check=True)


# libvips 8.18 from PyPI, in one process: the loop is timed inside (Python's start and
# pyvips' import are not the library's cost); prints the seconds on the last line of stderr.
PYVIPS_LOOP = """
import os, sys, time
import pyvips
out, w, h = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
start = time.perf_counter()
for f in sys.argv[4:]:
    stem = os.path.splitext(os.path.basename(f))[0]
    pyvips.Image.thumbnail(f, w, height=h).jpegsave(os.path.join(out, stem + ".jpg"), Q=80, keep="none")
print(f"seconds {time.perf_counter() - start}", file=sys.stderr)
"""


def pyvips_version():
    try:
        return sh([sys.executable, "-c", "import pyvips; print('.'.join(str(pyvips.version(i)) for i in range(3)))"]).strip()
    except Exception:
        return None


def machine():
    cpu = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = int(open("/proc/meminfo").readline().split()[1]) // 1048576
    versions = {}
    for name, cmd in (("vips", ["vips", "--version"]), ("ImageMagick", ["mogrify", "-version"]),
                      ("GraphicsMagick", ["gm", "version"]), ("swift", ["swift", "--version"])):
        try:
            versions[name] = sh(cmd).splitlines()[0].strip()
        except Exception:
            pass
    try:
        versions["libjpeg-turbo"] = sh(["dpkg-query", "-W", "-f=${Version}", "libturbojpeg0"]).strip()
    except Exception:
        pass
    return {"host": socket.gethostname(), "cpu": cpu, "cores": os.cpu_count(), "memory_gib": mem,
            "kernel": platform.release(), "date": datetime.date.today().isoformat(), "versions": versions}


class Tool:
    def __init__(self, name, build, orients=True, outputs=True, processes=1, self_timed=False):
        self.name, self.build, self.orients, self.outputs, self.processes = name, build, orients, outputs, processes
        # Its processes print "seconds S" last on stderr: the slowest one's S is its time.
        self.self_timed = self_timed


def tools(tessera, bareloop, work, baseline=None):
    def recipe(w, h):
        path = f"{work}/recipe-{w}x{h}.json"
        with open(path, "w") as f:
            json.dump({"format": "tessera.recipe", "version": 1, "name": "bench",
                       "operations": [{"op": "resize", "width": w, "height": h, "mode": "fit"}],
                       "output": {"format": "jpeg", "quality": 0.8, "optimize": False}}, f)
        return path

    def job(w, h, src, out):
        path = f"{out}.yaml"
        with open(path, "w") as f:
            f.write(f"name: bench\ninputs: [{src}]\noutput: {out}\noutputs:\n"
                    f"  - {{name: bench, recipe: {recipe(w, h)}, path: \"{{dir}}/{{stem}}.{{ext}}\"}}\n"
                    f"options: {{incremental: false}}\n")
        return path

    one = {"VIPS_CONCURRENCY": "1", "MAGICK_THREAD_LIMIT": "1", "OMP_NUM_THREADS": "1"}
    return [
        Tool("tessera render", lambda w, h, src, files, out: [[tessera, "render", src, "--recipe", recipe(w, h), "-o", out,
                                                               "-t", "1", "--quiet"]]),
        *([Tool("tessera render (baseline)", lambda w, h, src, files, out: [[baseline, "render", src, "--recipe", recipe(w, h),
                                                                         "-o", out, "-t", "1", "--quiet"]])] if baseline else []),
        Tool("tessera render (2 threads)", lambda w, h, src, files, out: [[tessera, "render", src, "--recipe", recipe(w, h),
                                                                           "-o", out, "-t", "2", "--quiet"]], processes=2),
        Tool("tessera render --fast", lambda w, h, src, files, out: [[tessera, "render", src, "--recipe", recipe(w, h),
                                                                      "-o", out, "-t", "1", "--quiet", "--fast"]]),
        Tool("tessera run (1 worker)", lambda w, h, src, files, out: [[tessera, "run", job(w, h, src, out), "--workers", "1",
                                                                       "--journal", out + ".sqlite", "--json"]]),
        Tool("tessera run (2 workers)", lambda w, h, src, files, out: [[tessera, "run", job(w, h, src, out), "--workers", "2",
                                                                        "--journal", out + ".sqlite", "--json"]]),
        Tool(f"libvips 8.18 (pyvips {pyvips_version()}, in-process loop)", lambda w, h, src, files, out: [
            [sys.executable, "-c", PYVIPS_LOOP, out, str(w), str(h)] + files], self_timed=True),
        Tool(f"libvips 8.18 (pyvips {pyvips_version()}, 2 processes)", lambda w, h, src, files, out: [
            [sys.executable, "-c", PYVIPS_LOOP, out, str(w), str(h)] + files[0::2],
            [sys.executable, "-c", PYVIPS_LOOP, out, str(w), str(h)] + files[1::2]], processes=2, self_timed=True),
        Tool("vipsthumbnail", lambda w, h, src, files, out: [["vipsthumbnail", "--size", f"{w}x{h}", "-o",
                                                              f"{out}/%s.jpg[Q=80]"] + files]),
        Tool("vipsthumbnail (2 processes)", lambda w, h, src, files, out: [
            ["vipsthumbnail", "--size", f"{w}x{h}", "-o", f"{out}/%s.jpg[Q=80]"] + files[0::2],
            ["vipsthumbnail", "--size", f"{w}x{h}", "-o", f"{out}/%s.jpg[Q=80]"] + files[1::2]], processes=2),
        Tool("ImageMagick mogrify", lambda w, h, src, files, out: [["mogrify", "-path", out, "-define",
                                                                    f"jpeg:size={2 * w}x{2 * h}", "-auto-orient",
                                                                    "-thumbnail", f"{w}x{h}", "-quality", "80"] + files]),
        # gm appends the input path to -output-directory: run it in the source directory on bare names.
        Tool("GraphicsMagick mogrify", lambda w, h, src, files, out: [["env", "-C", src, "gm", "mogrify",
                                                                       "-output-directory", out, "-size", f"{2 * w}x{2 * h}",
                                                                       "-auto-orient", "-thumbnail", f"{w}x{h}",
                                                                       "-quality", "80"] + [os.path.basename(f) for f in files]]),
        Tool("bare C loop (libjpeg-turbo)", lambda w, h, src, files, out: [[bareloop, str(w), str(h), "80", out] + files],
             orients=False),
        Tool("bare C loop (2 processes)", lambda w, h, src, files, out: [
            [bareloop, str(w), str(h), "80", out] + files[0::2], [bareloop, str(w), str(h), "80", out] + files[1::2]],
             orients=False, processes=2),
        Tool("bare C loop, decode only", lambda w, h, src, files, out: [[bareloop, "--decode-only", str(w), str(h), "80",
                                                                         out] + files], outputs=False),
    ], one


def timed(commands, env, work):
    """Runs the commands concurrently; wall seconds and the largest peak RSS (kB) of any."""
    procs, stamps = [], []
    start = time.perf_counter()
    for i, cmd in enumerate(commands):
        stamp = f"{work}/rss-{i}.txt"
        stamps.append(stamp)
        procs.append(subprocess.Popen(["/usr/bin/time", "-f", "%M", "-o", stamp] + cmd, env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    errors = [p.communicate()[1] for p in procs]
    seconds = time.perf_counter() - start
    codes = [p.returncode for p in procs]
    rss = max(int(open(s).read().split()[-1]) for s in stamps)
    return seconds, rss, codes, errors


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--photos", default=os.path.join(ROOT, "..", "shared", "corpus", "photos"))
    ap.add_argument("--targets", default="64,256,1280x720")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--install-peers", action="store_true", help="apt-get install libvips-tools imagemagick graphicsmagick")
    ap.add_argument("--fresh", action="store_true", help="a new machine: install the peers and Python packages first")
    ap.add_argument("--tools", help="comma-separated substrings of tool names to run")
    ap.add_argument("--no-quality", action="store_true")
    ap.add_argument("--no-ssimulacra2", action="store_true",
                    help="SSIM and PSNR only (SSIMULACRA2 takes about 1.5 s per 2560x1440 output)")
    ap.add_argument("--subset", choices=["all", "exif-thumbnail"], default="all",
                    help="exif-thumbnail: only photos that embed an EXIF thumbnail (for fast mode)")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--baseline", help="an older tessera binary, timed beside this build (before/after in one run)")
    ap.add_argument("--modern", action="store_true",
                    help="then run the HEIC/WebP/AVIF sets of Benchmarks/modern.py with the same photos and repeats")
    args = ap.parse_args()
    if args.install_peers or args.fresh:
        install_peers()
    import quality  # after the optional install of its packages

    tessera = os.path.join(ROOT, ".build", "release", "tessera")
    if not os.path.exists(tessera):
        subprocess.run(["swift", "build", "-c", "release"], cwd=ROOT, check=True)
    work = tempfile.mkdtemp(prefix="tessera-bench-")
    bareloop = f"{work}/bareloop"
    subprocess.run(["gcc", "-O2", "-o", bareloop, os.path.join(HERE, "bareloop", "bareloop.c"), "-lturbojpeg"], check=True)
    src = f"{work}/src"
    os.makedirs(src)
    photos = os.path.abspath(args.photos)
    for name in sorted(os.listdir(photos)):
        if not name.lower().endswith((".jpg", ".jpeg")):
            continue
        if args.subset == "exif-thumbnail":
            info = json.loads(sh([tessera, "inspect", "--json", os.path.join(photos, name)]))["info"]
            if not info.get("exifThumbnailBytes"):
                continue
        os.symlink(os.path.join(photos, name), os.path.join(src, name))
    files = [os.path.join(src, n) for n in sorted(os.listdir(src))]
    from PIL import Image
    megapixels = sum(Image.open(f).size[0] * Image.open(f).size[1] for f in files) / 1e6
    all_tools, single = tools(tessera, bareloop, work, os.path.abspath(args.baseline) if args.baseline else None)
    if args.tools:
        wanted = [t.strip().lower() for t in args.tools.split(",")]
        all_tools = [t for t in all_tools if t.name == "tessera render" or any(w in t.name.lower() for w in wanted)]
    else:
        all_tools = [t for t in all_tools if "--fast" not in t.name]  # fast mode is its own comparison
    def available(t):
        cmd = t.build(1, 1, src, files, work)[0]
        if t.self_timed:
            return pyvips_version() is not None
        exe = cmd[3] if cmd[0] == "env" else cmd[0]
        return shutil.which(exe) is not None
    all_tools = [t for t in all_tools if available(t)]
    env = dict(os.environ, **single)
    info = machine()
    print(f"{len(files)} JPEGs, {megapixels:.0f} MP, from {photos}; {info['cpu']}, {info['cores']} cores", file=sys.stderr)

    results = {"machine": info, "photos": photos, "subset": args.subset, "images": len(files),
               "megapixels": megapixels, "targets": []}
    for target in args.targets.split(","):
        w, h = (int(x) for x in (target.split("x") if "x" in target else (target, target)))
        rows = {t.name: {"seconds": [], "rss_kb": []} for t in all_tools}
        outdirs = {}
        for rep in range(args.repeats):
            for t in all_tools:
                out = f"{work}/{w}x{h}/{t.name.replace(' ', '_').replace('(', '').replace(')', '').replace(',', '')}-{rep}"
                os.makedirs(out)
                seconds, rss, codes, errors = timed(t.build(w, h, src, files, out), env, work)
                if t.self_timed and not any(codes):
                    seconds = max(float(e.strip().splitlines()[-1].split()[1]) for e in errors)
                if any(codes):
                    print(f"  {t.name}: exit {codes}: {' '.join(e[-300:] for e in errors)}", file=sys.stderr)
                rows[t.name]["seconds"].append(seconds)
                rows[t.name]["rss_kb"].append(rss)
                outdirs[t.name] = out
                print(f"  {w}x{h} rep {rep + 1}: {t.name}: {len(files) / seconds:.1f} images/s", file=sys.stderr)
        entry = {"box": [w, h], "tools": []}
        base = None
        for t in all_tools:
            secs = rows[t.name]["seconds"]
            med = statistics.median(secs)
            r = {"tool": t.name, "images_per_s": len(files) / med, "images_per_s_min": len(files) / max(secs),
                 "images_per_s_max": len(files) / min(secs), "megapixels_per_s": megapixels / med,
                 "peak_rss_mb": max(rows[t.name]["rss_kb"]) / 1024, "processes": t.processes,
                 "runs_seconds": secs}
            if t.name == "tessera render":
                base = r["images_per_s"]
            if t.outputs and not args.no_quality:
                out = outdirs[t.name]
                ssims, psnrs, s2s, cache = [], [], [], {}
                gold_dir = os.environ.get("TESSERA_GOLD_CACHE") or "/tmp/tessera-gold"  # SSIMULACRA2 reads its PNG
                for f in files:
                    stem = os.path.splitext(os.path.basename(f))[0]
                    match = [o for o in os.listdir(out) if os.path.splitext(o)[0] == stem]
                    if not match:
                        continue
                    path = os.path.join(out, match[0])
                    s, p, size = quality.compare(path, cache, f, gold_dir, orient=t.orients)
                    ssims.append(s)
                    psnrs.append(p)
                    if not args.no_ssimulacra2:
                        s2s.append(quality.ssimulacra2_score(path, f, gold_dir, size, orient=t.orients))
                r["ssim"] = statistics.mean(ssims) if ssims else None
                r["psnr"] = statistics.mean(psnrs) if psnrs else None
                r["ssimulacra2"] = statistics.mean(s2s) if s2s else None
                r["outputs"] = len(ssims)
            entry["tools"].append(r)
        for r in entry["tools"]:
            r["ratio_to_tessera"] = r["images_per_s"] / base if base else None
        results["targets"].append(entry)

    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, f"{info['date']}-{info['host']}" + ("-exif-thumbnail" if args.subset != "all" else ""))
    with open(stem + ".json", "w") as f:
        json.dump(results, f, indent=1)
    with open(stem + ".md", "w") as f:
        f.write(markdown(results))
    chart(results, stem + ".png")
    print(markdown(results))
    print(f"wrote {stem}.md, .json, .png", file=sys.stderr)
    shutil.rmtree(work, ignore_errors=True)
    if args.modern:
        subprocess.run([sys.executable, os.path.join(HERE, "modern.py"), "--photos", photos,
                        "--repeats", str(args.repeats)], check=True)


def markdown(res):
    m = res["machine"]
    lines = [f"# Tessera vs peers — {m['date']}", "",
             f"{res['images']} JPEG photos ({res['megapixels']:.0f} MP) from `{res['photos']}`"
             + (" (only those with an EXIF thumbnail)" if res.get("subset") == "exif-thumbnail" else "") + "; quality 80; "
             f"median of {len(res['targets'][0]['tools'][0]['runs_seconds'])} interleaved runs (min–max in brackets); "
             f"single-threaded unless the tool says 2.", "",
             f"Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB, Linux {m['kernel']}, host {m['host']}. "
             + "; ".join(f"{k} {v}" for k, v in m["versions"].items()), "",
             "SSIM, SSIMULACRA2 and PSNR: mean over the photos against full decode + float Lanczos-3 in linear light at "
             "each output's size (Benchmarks/quality.py; Wang et al. SSIM, σ 1.5, RGB; SSIMULACRA2 from PyPI `ssimulacra2`). The bare loop ignores EXIF orientation, so "
             "it is compared with an unrotated reference.", ""]
    for t in res["targets"]:
        w, h = t["box"]
        lines += [f"## Box {w}×{h}", "",
                  "| tool | images/s | MP/s | vs tessera render | peak RSS | SSIM | SSIMULACRA2 | PSNR |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in t["tools"]:
            q = f"{r['ssim']:.4f}" if r.get("ssim") else "–"
            p = f"{r['psnr']:.2f} dB" if r.get("psnr") else "–"
            s2 = f"{r['ssimulacra2']:.2f}" if r.get("ssimulacra2") is not None else "–"
            lines.append(f"| {r['tool']} | {r['images_per_s']:.1f} [{r['images_per_s_min']:.1f}–{r['images_per_s_max']:.1f}] "
                         f"| {r['megapixels_per_s']:.0f} | {r['ratio_to_tessera']:.2f}× | {r['peak_rss_mb']:.0f} MB | {q} | {s2} | {p} |")
        by = {r["tool"]: r["images_per_s"] for r in t["tools"]}
        def find(*parts):
            return next((v for k, v in by.items() if all(p in k for p in parts)), None)
        def ratio(x, y):
            return f"{x / y:.2f}×" if x and y else "–"
        render1 = by.get("tessera render")
        lines += ["", f"tessera render / libvips 8.18 in-process: **{ratio(render1, find('libvips 8.18', 'in-process'))}** "
                  f"(2 processes each: {ratio(find('tessera render (2'), find('libvips 8.18', '2 processes'))}); "
                  f"/ vipsthumbnail 8.14: {ratio(render1, by.get('vipsthumbnail'))}. Pool: run -w 1 / render -t 1 "
                  f"{ratio(find('tessera run (1'), render1)}, run -w 2 / render -t 2 {ratio(find('tessera run (2'), find('tessera render (2'))}."]
        lines.append("")
    return "\n".join(lines)


def chart(res, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    targets = res["targets"]
    names = [r["tool"] for r in targets[0]["tools"]]
    fig, ax = plt.subplots(figsize=(12, 5.5))
    width = 0.8 / len(targets)
    for i, t in enumerate(targets):
        vals = [r["images_per_s"] for r in t["tools"]]
        xs = [j + i * width for j in range(len(names))]
        bars = ax.bar(xs, vals, width, label=f"{t['box'][0]}×{t['box'][1]}")
        for x, v in zip(xs, vals):
            ax.text(x, v, f"{v:.0f}", ha="center", va="bottom", fontsize=7)
    ax.set_xticks([j + width * (len(targets) - 1) / 2 for j in range(len(names))])
    ax.set_xticklabels(names, rotation=25, ha="right", fontsize=8)
    ax.set_ylabel("images/s (median)")
    m = res["machine"]
    ax.set_title(f"{res['images']} photos, {m['cpu']}, {m['cores']} cores — {m['date']}", fontsize=9)
    ax.legend(title="box")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
