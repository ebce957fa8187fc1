#!/usr/bin/env python3
"""Video poster frames and previews: Tessera against the ffmpeg CLI and ffmpegthumbnailer
(Debian 12's, FFmpeg 5.1 underneath all three), every tool pinned to one core (taskset -c 0).

  Benchmarks/video.py [--photos DIR] [--repeats 5] [--seconds 10]

Clips, made here from the corpus photos so that the pictures are photographs (a slow pan over
each photo with light grain, 30 fps, a keyframe every 2 s as phones write them):
  h264   1920x1080 H.264 (x264 medium, CRF 23)       hevc   1920x1080 HEVC (x265 fast, CRF 26)
  4k     3840x2160 HEVC (x265 ultrafast), for peak memory
Per clip, a 256 px JPEG poster:
  tessera          `tessera render -t 1 CLIPS -s 256` (one process, every clip): its default poster,
                   the first keyframe from 1 s on that is not near-black or flat (keyframes alone decoded)
  tessera --at 1   the frame at 1 s exactly as ffmpeg -ss 1 picks it (decoding from the keyframe before)
  ffmpeg           `ffmpeg -threads 1 -ss 1 -i CLIP -frames:v 1 -vf scale=256:-1` per clip
  ffmpegthumbnailer `ffmpegthumbnailer -i CLIP -o OUT -s 256 -t 00:00:01` per clip
Median wall time per clip over interleaved repeats, images/s, peak RSS (GNU time, largest).
Then a 500-frame animated GIF to an animated WebP at 256 px (Tessera `--animated`, libvips 8.18
`thumbnail` with n=-1 from PyPI pyvips-binary, VIPS_CONCURRENCY=1): time and peak RSS.
"""
import argparse, glob, os, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESSERA = os.path.join(ROOT, ".build", "release", "tessera")
PIN = ["taskset", "-c", "0"]


def run(cmd, env=None):
    """(seconds, peak RSS in MB) of one command under GNU time."""
    t0 = time.perf_counter()
    r = subprocess.run(["/usr/bin/time", "-f", "%M"] + PIN + cmd, capture_output=True, text=True, env=env)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stderr[-2000:]}")
    rss = int(r.stderr.strip().splitlines()[-1]) / 1024
    return dt, rss


def make_clips(photos, work, seconds):
    clips = {"h264": [], "hevc": [], "4k": []}
    files = sorted(glob.glob(os.path.join(photos, "*.jpg")))[:3]
    for k, f in enumerate(files):
        for kind, size, codec in [("h264", "1920:1080", ["-c:v", "libx264", "-preset", "medium", "-crf", "23"]),
                                  ("hevc", "1920:1080", ["-c:v", "libx265", "-preset", "fast", "-crf", "26", "-tag:v", "hvc1",
                                                         "-x265-params", "log-level=error"]),
                                  ("4k", "3840:2160", ["-c:v", "libx265", "-preset", "ultrafast", "-crf", "28", "-tag:v", "hvc1",
                                                       "-x265-params", "log-level=error"])]:
            if kind == "4k" and k > 0:
                continue
            w, h = size.split(":")
            out = os.path.join(work, f"{kind}_{k}.mp4")
            vf = (f"scale={int(w) * 5 // 4}:{int(h) * 5 // 4}:force_original_aspect_ratio=increase,"
                  f"crop={w}:{h}:x='min(t*{int(w) // 40},iw-{w})':y='(ih-{h})/2',"
                  "noise=alls=5:allf=t,format=yuv420p")
            subprocess.run(["ffmpeg", "-v", "error", "-y", "-loop", "1", "-framerate", "30", "-t", str(seconds if kind != "4k" else 4),
                            "-i", f, "-vf", vf, "-g", "60"] + codec + [out], check=True)
            clips[kind].append(out)
    return clips


def posters(clips, work, repeats):
    have_thumbnailer = subprocess.run(["which", "ffmpegthumbnailer"], capture_output=True).returncode == 0
    print(f"\n256 px poster frames, one core; median over {repeats} interleaved repeats")
    print(f"{'set':6} {'tool':18} {'ms/clip':>8} {'clips/s':>8} {'peak RSS':>9} {'vs ffmpeg':>9}")
    for kind in ["h264", "hevc", "4k"]:
        files = clips[kind]
        tools = {
            "tessera": lambda: [run([TESSERA, "render", "-t", "1", "-q", "0.8"] + files + ["-s", "256", "-o", os.path.join(work, "t")])],
            "tessera --at 1": lambda: [run([TESSERA, "render", "-t", "1", "-q", "0.8", "--at", "1"] + files
                                           + ["-s", "256", "-o", os.path.join(work, "ta")])],
            "ffmpeg -ss 1": lambda: [run(["ffmpeg", "-v", "error", "-y", "-threads", "1", "-filter_threads", "1", "-ss", "1", "-i", f,
                                          "-frames:v", "1", "-vf", "scale=256:-2", "-q:v", "4", os.path.join(work, "f.jpg")])
                                     for f in files],
        }
        if have_thumbnailer:
            tools["ffmpegthumbnailer"] = lambda: [run(["ffmpegthumbnailer", "-i", f, "-o", os.path.join(work, "ft.jpg"), "-s", "256",
                                                       "-t", "00:00:01", "-q", "8"]) for f in files]
        times = {t: [] for t in tools}
        rss = {t: 0.0 for t in tools}
        for _ in range(repeats):
            for name, fn in tools.items():
                results = fn()
                times[name].append(sum(r[0] for r in results) / len(files))
                rss[name] = max(rss[name], max(r[1] for r in results))
        base = statistics.median(times["ffmpeg -ss 1"])
        for name in tools:
            m = statistics.median(times[name])
            print(f"{kind:6} {name:18} {m * 1000:8.1f} {1 / m:8.2f} {rss[name]:7.1f} MB {base / m:8.2f}x")


def animated_gif(work, repeats):
    path = os.path.join(work, "long.gif")
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-t", "50", "-f", "lavfi", "-i", "testsrc2=size=480x360:rate=10",
                    "-vf", "split[a][b];[a]palettegen=max_colors=64[p];[b][p]paletteuse", "-loop", "0", path], check=True)
    script = os.path.join(work, "vips_anim.py")
    with open(script, "w") as f:
        f.write("import sys, pyvips\n"
                "im = pyvips.Image.thumbnail(sys.argv[1] + '[n=-1]', 256)\n"
                "im.webpsave(sys.argv[2], Q=80)\n")
    env = dict(os.environ, VIPS_CONCURRENCY="1")
    tools = {
        "tessera --animated": lambda: run([TESSERA, "render", "-t", "1", path, "-s", "256", "--animated", "--format", "webp",
                                           "-o", os.path.join(work, "ta")]),
        "vips 8.18 n=-1": lambda: run([sys.executable, script, path, os.path.join(work, "v.webp")], env=env),
    }
    times = {t: [] for t in tools}
    rss = {t: 0.0 for t in tools}
    for _ in range(repeats):
        for name, fn in tools.items():
            dt, r = fn()
            times[name].append(dt)
            rss[name] = max(rss[name], r)
    print("\n500-frame 480x360 animated GIF -> 256 px animated WebP, one core")
    for name in tools:
        print(f"{name:20} {statistics.median(times[name]) * 1000:8.0f} ms  peak RSS {rss[name]:6.1f} MB")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--photos", default=os.path.join(ROOT, "..", "shared", "corpus", "photos"))
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--seconds", type=int, default=10)
    args = p.parse_args()
    if not glob.glob(os.path.join(args.photos, "*.jpg")):
        args.photos = os.path.join(ROOT, "examples", "images")
    work = tempfile.mkdtemp(prefix="tessera-video-bench-")
    print(f"tessera {TESSERA}; ffmpeg {subprocess.run(['ffmpeg', '-version'], capture_output=True, text=True).stdout.split()[2]}")
    clips = make_clips(args.photos, work, args.seconds)
    posters(clips, work, args.repeats)
    try:
        import pyvips  # noqa: F401
        animated_gif(work, max(1, args.repeats // 2))
    except ImportError:
        print("(pyvips not installed: pip install pyvips pyvips-binary for the animated GIF comparison)")
