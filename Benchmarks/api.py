#!/usr/bin/env python3
"""The HTTP API's overhead against the ZeroMQ clients, on one machine (release build).

  python3 Benchmarks/api.py [--submits 40] [--tasks 10000]

1. Submit latency of a one-file job, no worker running (the job stays queued):
   `tessera submit` and `curl` each as a process per job, and tessera-client's `submit`
   in one Python process (a connection per request), median and p90 in ms.
2. Results paging of a finished TASKS-task no-op job: `tessera results ID` (ZeroMQ, pages
   of 5,000) against `GET …/results` pages of 1,000 and 10,000 through tessera-client,
   records per second.
Needs curl; installs clients/python into .build-pyclient-venv/ (as scripts/test-python-client.sh).
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESSERA = os.path.join(ROOT, ".build/release/tessera")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def client_module():
    venv = os.path.join(ROOT, ".build-pyclient-venv")
    if not os.path.exists(os.path.join(venv, "bin/python")):
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    subprocess.run([venv + "/bin/pip", "install", "--quiet", os.path.join(ROOT, "clients/python")], check=True)
    site = subprocess.run([venv + "/bin/python", "-c", "import tessera_client, os; print(os.path.dirname(os.path.dirname(tessera_client.__file__)))"],
                          check=True, capture_output=True, text=True).stdout.strip()
    sys.path.insert(0, site)
    import tessera_client
    return tessera_client


def ms(samples):
    s = sorted(samples)
    return f"median {statistics.median(s) * 1000:.1f} ms, p90 {s[int(len(s) * 0.9) - 1] * 1000:.1f} ms"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--submits", type=int, default=40, help="at most 60 (a token's submissions a minute)")
    ap.add_argument("--tasks", type=int, default=10000)
    a = ap.parse_args()
    if not os.access(TESSERA, os.X_OK):
        subprocess.run(["swift", "build", "-c", "release", "--product", "tessera"], cwd=ROOT, check=True)
    tc = client_module()
    d = tempfile.mkdtemp(prefix="tessera-api-bench-")
    os.makedirs(d + "/in")
    with open(d + "/in/a.jpg", "wb") as f:
        f.write(open(os.path.join(ROOT, "examples/images", sorted(os.listdir(os.path.join(ROOT, "examples/images")))[0]), "rb").read())
    # Two tokens: a token may submit 60 jobs a minute.
    token, token2 = (subprocess.run([TESSERA, "token", "create", name, "--dir", d + "/tokens"], check=True,
                                    capture_output=True, text=True).stdout.strip() for name in ("curl", "python"))
    port = free_port()
    endpoint = f"ipc://{d}/c.sock"
    log = open(d + "/log", "w")
    coordinator = subprocess.Popen([TESSERA, "coordinator", "--bind", endpoint, "--journal", d + "/j.sqlite",
                                    "--metrics-port", str(port), "--api-tokens", d + "/tokens", "--log-level", "warning"],
                                   stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    workers = []
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(url + "/readyz", timeout=1)
                break
            except OSError:
                time.sleep(0.05)
        client = tc.Client(url, token=token2)
        print(f"machine: {os.cpu_count()} cores; {a.submits} submits each; tessera {TESSERA}")

        # 1. Submit latency (no worker: jobs stay queued).
        job_yaml = d + "/job.yaml"
        with open(job_yaml, "w") as f:
            f.write(f"name: one\ninputs: [{d}/in]\noutput: {d}/out\noutputs: [{{preset: favicon}}]\noptions: {{incremental: false}}\n")
        job = {"name": "one", "inputs": [d + "/in"], "output": d + "/out", "outputs": [{"preset": "favicon"}],
               "options": {"incremental": False}}
        cli, curl, py = [], [], []
        for _ in range(a.submits):
            t = time.perf_counter()
            subprocess.run([TESSERA, "submit", job_yaml, "--coordinator", endpoint], check=True, capture_output=True)
            cli.append(time.perf_counter() - t)
            t = time.perf_counter()
            subprocess.run(["curl", "-sf", "-H", "Authorization: Bearer " + token, "-H", "Content-Type: application/yaml",
                            "--data-binary", "@" + job_yaml, url + "/api/v1/jobs"], check=True, capture_output=True)
            curl.append(time.perf_counter() - t)
            t = time.perf_counter()
            client.submit(job)
            py.append(time.perf_counter() - t)
        print(f"submit, tessera submit (ZeroMQ, a process per job): {ms(cli)}")
        print(f"submit, curl (HTTP API, a process per job):          {ms(curl)}")
        print(f"submit, tessera-client in one process:               {ms(py)}")
        for j in client.jobs(limit=1000):
            client.cancel(j["id"])

        # 2. Results paging of a large finished job.
        with open(d + "/manifest.txt", "w") as f:
            for i in range(a.tasks):
                f.write(f"/nonexistent/d{i // 1000}/f{i}.jpg\n")
        with open(d + "/noop.yaml", "w") as f:
            f.write(f"name: noop\nkind: noop\ninputs: [{{manifest: {d}/manifest.txt}}]\noutput: {d}/noop-out\n")
        for _ in range(2):
            workers.append(subprocess.Popen([TESSERA, "worker", "--connect", endpoint, "--prefetch", "2000",
                                             "--log-level", "warning"], stdout=log, stderr=log))
        big = client.submit(d + "/noop.yaml")
        client.wait(big, timeout=600)
        rows = []
        for _ in range(3):
            t = time.perf_counter()
            out = subprocess.run([TESSERA, "results", big, "--coordinator", endpoint], check=True, capture_output=True).stdout
            zmq_s = time.perf_counter() - t
            n_zmq = out.count(b"\n")
            t = time.perf_counter()
            n_1k = sum(1 for _ in client.results(big, page_size=1000))
            http_1k = time.perf_counter() - t
            t = time.perf_counter()
            n_10k = sum(1 for _ in client.results(big, page_size=10000))
            http_10k = time.perf_counter() - t
            assert n_zmq == n_1k == n_10k == a.tasks, (n_zmq, n_1k, n_10k)
            rows.append((zmq_s, http_1k, http_10k))
        z, h1, h10 = (statistics.median(r[i] for r in rows) for i in range(3))
        print(f"results of a {a.tasks}-task job (median of 3): tessera results (ZeroMQ, process included) {z:.2f} s = {a.tasks / z:,.0f} records/s; "
              f"HTTP pages of 1,000 {h1:.2f} s = {a.tasks / h1:,.0f}/s; pages of 10,000 {h10:.2f} s = {a.tasks / h10:,.0f}/s")
    finally:
        for p in workers + [coordinator]:
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        subprocess.run(["rm", "-rf", d])


if __name__ == "__main__":
    main()
