#!/usr/bin/env python3
"""Checks how examples/submit_and_wait.py reads job files; no coordinator (nor pyzmq) needed.

    python3 examples/test_submit_and_wait.py

A YAML job file reads as the same dict as its JSON equivalent (through the script's
load_job, imported); a bad, empty, non-mapping or missing job file, and a YAML file
without PyYAML, end the script with exit 2 and one line on stderr naming the file, never
a traceback. Prints "N passed, M failed" and exits 1 when any check failed.
"""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "submit_and_wait.py")
REPO = os.path.dirname(HERE)

spec = importlib.util.spec_from_file_location("submit_and_wait", SCRIPT)
client = importlib.util.module_from_spec(spec)
spec.loader.exec_module(client)  # main() runs only as __main__

try:
    import yaml  # noqa: F401
    HAVE_YAML = True
except ImportError:
    HAVE_YAML = False

passed, failed, skipped = 0, 0, []


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"ok    {name}")
    else:
        failed += 1
        print(f"FAIL  {name}" + (f"\n      {detail}" if detail else ""))


def run(args, hide_yaml=False):
    """The script as a subprocess (with `import yaml` failing when hide_yaml)."""
    if hide_yaml:
        code = ("import runpy, sys; sys.modules['yaml'] = None; sys.argv = sys.argv[1:]; "
                "runpy.run_path(sys.argv[0], run_name='__main__')")
        cmd = [sys.executable, "-c", code, SCRIPT] + args
    else:
        cmd = [sys.executable, SCRIPT] + args
    env = dict(os.environ, TESSERA_COORDINATOR="tcp://127.0.0.1:9")  # never reached: the job file fails first
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
    return r.returncode, r.stdout, r.stderr


def check_refused(name, path, must_contain, hide_yaml=False):
    """Exit 2, nothing on stdout, one stderr line `error: PATH: ...` with must_contain, no traceback."""
    status, out, err = run([path], hide_yaml=hide_yaml)
    lines = err.strip().splitlines()
    detail = f"exit {status}, stdout {out!r}, stderr {err!r}"
    check(f"{name}: exit 2", status == 2, detail)
    check(f"{name}: one line naming the file, no traceback",
          len(lines) == 1 and lines[0].startswith(f"error: {path}: ") and "Traceback" not in err and out == "",
          detail)
    check(f"{name}: says {must_contain!r}", must_contain in err, detail)


def write(directory, name, text):
    path = os.path.join(directory, name)
    with open(path, "w") as f:
        f.write(text)
    return path


with tempfile.TemporaryDirectory() as tmp:
    job = {
        "name": "2024-05-01 thumbnails",  # a date-like name stays a string
        "kind": "thumbnail",
        "priority": 5,
        "inputs": ["photos", {"path": "../scans", "glob": ["*.png", "*.jpg"], "recursive": False},
                   {"manifest": "lists/today.txt"}, "s3://bucket/prefix/", "https://example.org/a.jpg?x=1"],
        "output": "out/thumbs",
        "outputs": [{"preset": "widget", "path": "{dir}/{stem}.{ext}"},
                    {"name": "web", "recipe": {"operations": [{"op": "resize", "width": 2048, "height": 2048,
                                                               "mode": "fit"}],
                                               "output": {"format": "jpeg", "quality": 0.9, "maxBytes": 200000}}}],
        "options": {"maxAttempts": 3, "timeout": 60, "inline": False},
    }
    json_path = write(tmp, "job.json", json.dumps(job, indent=2))
    yaml_path = write(tmp, "job.yaml", """\
# The same job as job.json, written as job files are (comments, flow lists, an anchor).
name: 2024-05-01 thumbnails
kind: thumbnail
priority: 5
inputs:
  - photos
  - {path: ../scans, glob: ["*.png", "*.jpg"], recursive: false}
  - manifest: lists/today.txt
  - s3://bucket/prefix/
  - "https://example.org/a.jpg?x=1"
output: out/thumbs
outputs:
  - preset: widget
    path: "{dir}/{stem}.{ext}"
  - name: web
    recipe:
      operations:
        - {op: resize, width: &side 2048, height: *side, mode: fit}
      output: {format: jpeg, quality: 0.9, maxBytes: 200000}
options:
  maxAttempts: 3
  timeout: 60
  inline: false
""")

    from_json = client.load_job(json_path)
    check("JSON job: relative paths resolve against the job file's directory",
          from_json["output"] == os.path.join(tmp, "out/thumbs")
          and from_json["inputs"][0] == os.path.join(tmp, "photos")
          and from_json["inputs"][1]["path"] == os.path.join(os.path.dirname(tmp), "scans")
          and from_json["inputs"][2]["manifest"] == os.path.join(tmp, "lists/today.txt"), repr(from_json))
    check("JSON job: URLs are kept as written",
          from_json["inputs"][3:] == ["s3://bucket/prefix/", "https://example.org/a.jpg?x=1"], repr(from_json))

    if HAVE_YAML:
        from_yaml = client.load_job(yaml_path)
        check("YAML job reads as the same dict as its JSON equivalent", from_yaml == from_json,
              f"\n      yaml {from_yaml!r}\n      json {from_json!r}")
        check("YAML job: a date-like value stays a string", from_yaml.get("name") == "2024-05-01 thumbnails",
              repr(from_yaml.get("name")))
        widget = client.load_job(os.path.join(REPO, "jobs", "widget-thumbnails.yaml"))
        check("jobs/widget-thumbnails.yaml reads with absolute paths",
              widget.get("inputs") == [os.path.join(REPO, "examples", "images")]
              and widget.get("output") == os.path.join(REPO, "out", "widget"), repr(widget))
    else:
        skipped.append("YAML = JSON (PyYAML is not installed: pip install pyyaml)")

    # A YAML file whose content is JSON reads without PyYAML too.
    json_in_yaml = write(tmp, "as-json.yaml", json.dumps(job))
    status, out, err = run([json_in_yaml, "--coordinator", "nonsense"], hide_yaml=True)
    check("JSON content in a .yaml file without PyYAML: read (fails later, at the coordinator)",
          "PyYAML" not in err and "Traceback" not in err and status == 2, f"exit {status}, stderr {err!r}")

    check_refused("YAML job without PyYAML", yaml_path, "pip install pyyaml", hide_yaml=True)
    check_refused("missing job file", os.path.join(tmp, "nope.yaml"), "No such file or directory")
    check_refused("a directory as job file", tmp, "cannot read the job file")
    check_refused("invalid JSON", write(tmp, "bad.json", '{"name": "x", "inputs": ["/a"],\n "output": }\n'),
                  "not valid JSON")
    check_refused("empty job file", write(tmp, "empty.yaml", "  \n"), "the file is empty")
    check_refused("a list, not a mapping", write(tmp, "list.json", '["/photos"]'), "expected a mapping")
    if HAVE_YAML:
        check_refused("invalid YAML", write(tmp, "bad.yaml", "name: x\ninputs: [a, b\noutput: out\n"),
                      "not valid YAML")
        check_refused("YAML with a tab indent", write(tmp, "tab.yml", "name: x\ninputs:\n\t- a\n"), "not valid YAML")
        check_refused("YAML with a Python tag (safe loading)",
                      write(tmp, "tag.yaml", "name: !!python/object/apply:os.system ['true']\n"), "not valid YAML")
        laughs = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
            f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(8))
        check_refused("YAML aliases that expand to a billion values", write(tmp, "laughs.yaml", laughs),
                      "more than 100000 values")
        check_refused("YAML of comments only", write(tmp, "comments.yaml", "# nothing yet\n"), "got nothing")
        check_refused("a YAML scalar, not a mapping", write(tmp, "scalar.yml", "just a string\n"),
                      "expected a mapping")
    else:
        check_refused("not JSON, no PyYAML", write(tmp, "job.txt", "name: x\n"), "pip install pyyaml", hide_yaml=True)

for s in skipped:
    print(f"skip  {s}")
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
