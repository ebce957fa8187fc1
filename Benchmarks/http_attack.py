#!/usr/bin/env python3
"""Probe latency of a coordinator's HTTP endpoint while clients misbehave.

    python3 Benchmarks/http_attack.py [TESSERA_BINARY [SCENARIO...]]

Starts `tessera coordinator` with `--metrics-port`, then for each scenario measures 40
`GET /healthz` (fresh connection each, 2 s timeout) and the coordinator's CPU use:
  idle        nothing else
  idle-100    100 connections that never send a byte
  headers-5   5 clients streaming endless 100 kB header lines, reconnecting when cut off
  trickle-50  50 clients sending one byte of a request every 100 ms
Prints one line per scenario: median, p90, max (ms), timeouts, coordinator CPU %.
"""
import os, socket, statistics, subprocess, sys, tempfile, threading, time

binary = sys.argv[1] if len(sys.argv) > 1 else ".build/release/tessera"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def probe(port):
    start = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            data = b""
            while chunk := s.recv(4096):
                data += chunk
            if not data.startswith(b"HTTP/1.1 200"):
                return None
    except OSError:
        return None
    return (time.monotonic() - start) * 1000


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(port, pid, name, start_attack):
    stop = threading.Event()
    threads = start_attack(port, stop)
    time.sleep(0.5)
    cpu0, t0 = cpu_seconds(pid), time.monotonic()
    times, timeouts = [], 0
    for _ in range(40):
        t = probe(port)
        if t is None:
            timeouts += 1
        else:
            times.append(t)
        time.sleep(0.05)
    cpu = (cpu_seconds(pid) - cpu0) / (time.monotonic() - t0) * 100
    stop.set()
    for t in threads:
        t.join(timeout=5)
    times.sort()
    if times:
        print(f"{name:11} median {statistics.median(times):7.1f} ms  p90 {times[int(len(times) * 0.9) - 1]:7.1f}  "
              f"max {times[-1]:7.1f}  timeouts {timeouts:2}/40  coordinator CPU {cpu:4.0f} %", flush=True)
    else:
        print(f"{name:11} every probe timed out  coordinator CPU {cpu:4.0f} %", flush=True)


def nothing(port, stop):
    return []


def idle(port, stop):
    def run():
        socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(100)]
        stop.wait()
        for s in socks:
            s.close()
    t = threading.Thread(target=run)
    t.start()
    return [t]


def headers(port, stop):
    line = b"X-Filler: " + b"a" * 100_000

    def run():
        while not stop.is_set():
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
                    s.sendall(b"GET / HTTP/1.1\r\n")
                    while not stop.is_set():
                        s.sendall(line)
            except OSError:
                pass
    ts = [threading.Thread(target=run) for _ in range(5)]
    for t in ts:
        t.start()
    return ts


def trickle(port, stop):
    def run():
        socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(50)]
        request = b"GET / HTTP/1.1\r\nX-Slow: " + b"a" * 1000
        i = 0
        while not stop.wait(0.1):
            for s in socks:
                try:
                    s.send(request[i % len(request):i % len(request) + 1])
                except OSError:
                    pass
            i += 1
        for s in socks:
            s.close()
    t = threading.Thread(target=run)
    t.start()
    return [t]


with tempfile.TemporaryDirectory() as d:
    port = free_port()
    coordinator = subprocess.Popen([binary, "coordinator", "--journal", f"{d}/j.sqlite", "--bind", f"tcp://127.0.0.1:{free_port()}",
                                    "--metrics-port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            if probe(port) is not None:
                break
            time.sleep(0.05)
        scenarios = {"idle": nothing, "idle-100": idle, "trickle-50": trickle, "headers-5": headers}
        for name in sys.argv[2:] or scenarios:
            measure(port, coordinator.pid, name, scenarios[name])
    finally:
        coordinator.terminate()
        coordinator.wait(timeout=10)
