"""tessera-client against a real coordinator and worker (the `tessera` binary named by
$TESSERA_BIN, else the repository's release or debug build): tokens, submission from a
dict and from a YAML file, progress until the end, paged results, cancel, retry, errors."""

import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
import zlib

import pytest

from tessera_client import (Client, CoordinatorUnavailable, Forbidden, InvalidJob, NotFound,
                            TooManyRequests, Unauthorized)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def tessera_binary():
    for candidate in (os.environ.get("TESSERA_BIN"), ROOT + "/.build/release/tessera", ROOT + "/.build/debug/tessera"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    pytest.skip("no tessera binary: build it (swift build) or set TESSERA_BIN")


def png(path, width, height, seed):
    """A small RGB PNG written with zlib alone."""
    rows = b"".join(b"\x00" + bytes(((x * 7 + y * 3 + seed * 11) & 255) for x in range(width * 3)) for y in range(height))
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def pool():
    binary = tessera_binary()
    d = tempfile.mkdtemp(prefix="tessera-pyclient-")
    os.makedirs(d + "/in")
    for i in range(6):
        png(f"{d}/in/img{i}.png", 64 + i, 48, i)
    with open(d + "/in/broken.png", "wb") as f:
        f.write(b"not an image")
    tokens = {}
    for name, role in (("alice", "client"), ("bob", "client"), ("root", "admin")):
        out = subprocess.run([binary, "token", "create", name, "--role", role, "--dir", d + "/tokens"],
                             check=True, capture_output=True, text=True)
        tokens[name] = out.stdout.strip()
    port = free_port()
    log = open(d + "/coordinator.log", "w")
    coordinator = subprocess.Popen([binary, "coordinator", "--bind", f"ipc://{d}/c.sock", "--journal", d + "/j.sqlite",
                                    "--metrics-port", str(port), "--api-tokens", d + "/tokens",
                                    "--allow-read", d, "--allow-write", d],
                                   stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            urllib.request.urlopen(url + "/readyz", timeout=1)
            break
        except OSError:
            time.sleep(0.05)
    worker = subprocess.Popen([binary, "worker", "--connect", f"ipc://{d}/c.sock"], stdout=log, stderr=log)
    yield {"dir": d, "url": url, "tokens": tokens}
    for p in (worker, coordinator):
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
    shutil.rmtree(d, ignore_errors=True)


def job(pool, name, out):
    return {"name": name, "inputs": [pool["dir"] + "/in"], "output": pool["dir"] + "/" + out,
            "outputs": [{"preset": "favicon"}]}


def test_submit_wait_and_page_results(pool):
    alice = Client(pool["url"], token=pool["tokens"]["alice"])
    job_id = alice.submit(job(pool, "from python", "out-dict"))
    assert job_id.startswith("j-")
    seen = []
    status = alice.wait(job_id, on_progress=seen.append, timeout=120)
    assert status["state"] == "failed"
    assert (status["succeeded"], status["failed"], status["total"]) == (6, 1, 7)
    assert seen and seen[-1] == status
    assert [s["succeeded"] + s["failed"] for s in seen] == sorted(s["succeeded"] + s["failed"] for s in seen)
    records = list(alice.results(job_id, page_size=2))
    assert len(records) == 7 and len({r["input"] for r in records}) == 7
    failed = list(alice.results(job_id, status="failed"))
    assert [os.path.basename(r["input"]) for r in failed] == ["broken.png"]
    assert failed[0]["error"]["code"] == "unsupported-format"
    assert job_id in [j["id"] for j in alice.jobs()]
    assert alice.job(job_id)["progress"] == 1


def test_a_yaml_file_with_relative_paths(pool):
    d = pool["dir"]
    os.makedirs(d + "/jobs", exist_ok=True)
    with open(d + "/jobs/thumbs.yaml", "w") as f:
        f.write("name: yaml from python\ninputs: [../in]\noutput: ../out-yaml\noutputs: [{preset: favicon}]\n")
    alice = Client(pool["url"], token=pool["tokens"]["alice"])
    status = alice.wait(alice.submit(d + "/jobs/thumbs.yaml"), timeout=120)
    assert status["succeeded"] == 6
    assert os.path.exists(d + "/out-yaml/img0.png") or os.listdir(d + "/out-yaml")


def test_errors_are_typed(pool):
    alice = Client(pool["url"], token=pool["tokens"]["alice"])
    bob = Client(pool["url"], token=pool["tokens"]["bob"])
    bad = job(pool, "bad", "out-bad")
    bad["outputs"] = [{"preset": "favicon", "qualty": 3}]
    with pytest.raises(InvalidJob) as e:
        alice.submit(bad)
    assert e.value.status == 422 and e.value.code == "invalid-job"
    assert e.value.field == "outputs[0].qualty" and e.value.line == 1
    with pytest.raises(Unauthorized):
        Client(pool["url"], token="tsr_" + "0" * 64).jobs()
    with pytest.raises(Unauthorized):
        Client(pool["url"]).jobs()
    mine = alice.submit(job(pool, "alice's", "out-own"))
    with pytest.raises(Forbidden):
        bob.cancel(mine)
    with pytest.raises(NotFound):
        alice.job("j-nosuchjob")
    with pytest.raises(CoordinatorUnavailable):
        Client("http://127.0.0.1:%d" % free_port(), retries=1, backoff=0.01).jobs()
    assert isinstance(TooManyRequests("x", 429, "too-many-requests", 3.0).retry_after, float)


def test_cancel_and_admin_sees_all(pool):
    alice = Client(pool["url"], token=pool["tokens"]["alice"])
    root = Client(pool["url"], token=pool["tokens"]["root"])
    big = job(pool, "to cancel", "out-cancel")
    big["inputs"] = [pool["dir"] + "/in"] * 1
    job_id = alice.submit(big)
    status = alice.cancel(job_id)
    assert status["state"] in ("cancelled", "succeeded", "failed")
    assert job_id in [j["id"] for j in root.jobs(limit=100)]
    assert all(j["id"] != job_id for j in Client(pool["url"], token=pool["tokens"]["bob"]).jobs())


def test_retry_failed_runs_the_fixed_input(pool):
    d = pool["dir"]
    alice = Client(pool["url"], token=pool["tokens"]["alice"])
    job_id = alice.submit(job(pool, "retry", "out-retry"))
    assert alice.wait(job_id, timeout=120)["failed"] == 1
    shutil.copy(d + "/in/img0.png", d + "/in/broken.png")
    try:
        assert alice.retry_failed(job_id) == 1
        status = alice.wait(job_id, timeout=120)
        assert (status["succeeded"], status["failed"]) == (7, 0)
    finally:
        with open(d + "/in/broken.png", "wb") as f:
            f.write(b"not an image")


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v"]))
