#!/usr/bin/env python3
"""Submit a job to a Tessera coordinator and wait for it: pyzmq and the protocol in
docs/PROTOCOL.md, nothing else.

    python3 examples/submit_and_wait.py --coordinator tcp://127.0.0.1:5555 job.json
    python3 examples/submit_and_wait.py --coordinator tcp://127.0.0.1:5555 \
        --input ~/Pictures --output /tmp/thumbs --preset thumbnail
    python3 examples/submit_and_wait.py --coordinator tcp://10.0.0.5:5555 \
        --curve-secret keys/alice.secret --server-key keys/coordinator.pub job.json

With --curve-secret and --server-key (default $TESSERA_CURVE_SECRET, $TESSERA_SERVER_KEY:
the files `tessera keygen` writes) the connection is CURVE-encrypted and authenticated,
as the coordinator requires on any non-loopback endpoint.

The job file is JSON, or YAML like `jobs/*.yaml` when PyYAML is installed
(`pip install pyyaml`); relative paths in `inputs` and `output` resolve against the job
file's directory, as `tessera submit` resolves them.

Prints the job id, then one line per task and a summary. Exit status: 0 when every
task succeeded, 1 when any failed, 2 on a usage or protocol error (an unreadable or
invalid job file, no answer from the coordinator).
"""
import argparse
import json
import os
import sys

try:
    import zmq
except ImportError:  # reported by main() after the job file is read
    zmq = None

TAG = b"TSR1"  # protocol tag and version


def load_keys(secret_file, server_key_file):
    """(public, secret, server public) Z85 keys from `tessera keygen` files, or None."""
    if not secret_file and not server_key_file:
        return None
    if not (secret_file and server_key_file):
        raise RuntimeError("--curve-secret and --server-key go together")
    if os.stat(secret_file).st_mode & 0o077:
        raise RuntimeError(f"{secret_file}: secret key file is readable by others; chmod 600 it")
    fields = dict(line.split(" ", 1) for line in open(secret_file).read().splitlines() if " " in line)
    with open(server_key_file) as f:
        server = next(l.strip() for l in f if l.strip() and not l.startswith("#"))
    return fields["public"].strip(), fields["secret"].strip(), server


class JobFileError(Exception):
    """A job file that cannot be read or is not a job: one line, naming the file."""

    def __init__(self, path, reason):
        super().__init__(f"{path}: {reason}")


def _yaml_loader(yaml):
    """yaml.SafeLoader without YAML 1.1 timestamps: a value like 2024-05-01 stays the
    string it is in the file (as Tessera's job files read it), and the job stays JSON."""

    class Loader(yaml.SafeLoader):
        pass

    Loader.yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    return Loader


def _parse_yaml(path, text):
    try:
        import yaml
    except ImportError:
        raise JobFileError(path, "not JSON, and a YAML job file needs PyYAML (pip install pyyaml); "
                                 "or give the job as JSON") from None
    try:
        return yaml.load(text, Loader=_yaml_loader(yaml))
    except RecursionError:
        raise JobFileError(path, "not valid YAML: nested too deeply") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        raise JobFileError(path, f"not valid YAML: {problem}{where}") from None


def _have_yaml():
    try:
        import yaml  # noqa: F401
    except ImportError:
        return False
    return True


def _absolute(path, base):
    """A relative local path against the job file's directory; absolute paths and URLs
    (s3://, http(s)://) as written."""
    if not isinstance(path, str) or path.startswith("s3://") or path[:8].lower().startswith(("http://", "https://")):
        return path
    path = os.path.expanduser(path)
    return path if os.path.isabs(path) else os.path.normpath(os.path.join(base, path))


MAX_NODES = 100_000  # as `tessera submit`: a few YAML anchors and aliases can stand for billions of values


def _fits(value, budget):
    """Whether value has at most budget values, aliases counted every time they occur."""
    stack = [value]
    while stack:
        budget -= 1
        if budget < 0:
            return False
        v = stack.pop()
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return True


def load_job(path):
    """The job in a job file as a dict for the `submit` message: JSON, or YAML (`.yaml`,
    `.yml`, or any file that is not JSON) when PyYAML is installed. Relative paths in
    `inputs` and `output` resolve against the file's directory. Raises JobFileError."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise JobFileError(path, f"cannot read the job file ({getattr(e, 'strerror', None) or e})") from None
    if not text.strip():
        raise JobFileError(path, "the file is empty")
    if path.lower().endswith((".yaml", ".yml")) and _have_yaml():
        job = _parse_yaml(path, text)
    else:
        try:
            job = json.loads(text)
        except (ValueError, RecursionError) as e:
            if path.lower().endswith(".json"):
                raise JobFileError(path, f"not valid JSON: {e}") from None
            job = _parse_yaml(path, text)  # YAML, when PyYAML is installed
    if not isinstance(job, dict):
        kind = "nothing" if job is None else f"a {type(job).__name__}"
        raise JobFileError(path, f"expected a mapping of job fields (name, inputs, output, ...), got {kind}")
    if not _fits(job, MAX_NODES):
        raise JobFileError(path, f"the job expands to more than {MAX_NODES} values (YAML aliases?): refused")
    try:
        json.dumps(job)
    except (TypeError, ValueError, RecursionError) as e:
        raise JobFileError(path, f"cannot be sent as JSON ({e})") from None
    base = os.path.dirname(os.path.abspath(path))
    if "output" in job:
        job["output"] = _absolute(job["output"], base)
    if isinstance(job.get("inputs"), list):
        for i, item in enumerate(job["inputs"]):
            if isinstance(item, str):
                job["inputs"][i] = _absolute(item, base)
            elif isinstance(item, dict):
                for key in ("path", "manifest"):
                    if key in item:
                        item[key] = _absolute(item[key], base)
    return job


def request(ctx, endpoint, kind, body, timeout=30.0, keys=None):
    """One request on a fresh DEALER socket; returns (type, decoded JSON body)."""
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    if keys:
        public, secret, server = keys
        sock.curve_publickey, sock.curve_secretkey, sock.curve_serverkey = public.encode(), secret.encode(), server.encode()
    sock.connect(endpoint)
    try:
        sock.send_multipart([TAG, kind.encode(), json.dumps(body).encode()])
        if not sock.poll(int(timeout * 1000)):
            raise TimeoutError(f"no answer from {endpoint} to {kind} within {timeout} s")
        frames = sock.recv_multipart()
    finally:
        sock.close()
    if len(frames) < 3 or frames[0] != TAG:
        raise RuntimeError(f"not a Tessera reply: {frames[:2]!r}")
    reply_type, payload = frames[1].decode(), json.loads(frames[2])
    if reply_type == "error":
        raise RuntimeError(f"{payload['message']} [{payload['code']}]")
    return reply_type, payload


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("job", nargs="?", help="job file: JSON, or YAML with PyYAML (the fields of jobs/*.yaml; "
                                           "relative paths against the file's directory)")
    ap.add_argument("--coordinator", default=os.environ.get("TESSERA_COORDINATOR", "tcp://127.0.0.1:5555"))
    ap.add_argument("--input", help="instead of a job file: a directory of images")
    ap.add_argument("--output", help="with --input: the output root")
    ap.add_argument("--preset", default="thumbnail", help="with --input: the preset (default thumbnail)")
    ap.add_argument("--curve-secret", default=os.environ.get("TESSERA_CURVE_SECRET"),
                    help="this client's .secret file (tessera keygen)")
    ap.add_argument("--server-key", default=os.environ.get("TESSERA_SERVER_KEY"), help="the coordinator's .pub file")
    ap.add_argument("--timeout", type=float, default=None, help="seconds to wait for an answer (default 30; submit 120)")
    args = ap.parse_args()
    if args.job:
        try:
            job = load_job(args.job)
        except JobFileError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    elif args.input and args.output:
        job = {"name": f"{args.preset} of {args.input}", "inputs": [os.path.abspath(args.input)],
               "output": os.path.abspath(args.output), "outputs": [{"preset": args.preset}]}
    else:
        ap.error("give a job file, or --input and --output")
    if zmq is None:
        print("error: this client needs pyzmq (pip install pyzmq)", file=sys.stderr)
        return 2

    ctx = zmq.Context()
    try:
        keys = load_keys(args.curve_secret, args.server_key)
        call = lambda kind, body, timeout=args.timeout or 30.0: request(ctx, args.coordinator, kind, body, timeout, keys)
        _, submitted = call("submit", {"job": job}, timeout=args.timeout or 120.0)
        job_id = submitted["job"]
        print(f"submitted {job_id}: {submitted['tasks']} tasks")
        # `wait` is answered when the job ends; ask again every few seconds so a
        # coordinator restart cannot leave us waiting forever.
        while True:
            try:
                _, status = call("wait", {"job": job_id}, timeout=5)
                break
            except TimeoutError:
                _, progress = call("status", {"job": job_id})
                s = progress["jobs"][0]
                print(f"  {s['succeeded'] + s['failed'] + s['skipped']}/{s['total']} done", file=sys.stderr)
        # Per-task records, page by page.
        after, records = None, []
        while True:
            query = {"job": job_id, "limit": 1000}
            if after is not None:
                query["after"] = after
            _, page = call("results", query)
            records += page["records"]
            after = page["next"]
            if after is None:
                break
        for r in records:
            if r["status"] == "failed":
                print(f"failed    {r['error']['message']}")
            else:
                outs = ", ".join(f"{o['name']} {o['width']}x{o['height']}" for o in r["outputs"])
                print(f"{r['status']:9} {r['input']} -> {outs or '-'} ({r['timingsMilliseconds']['total']:.1f} ms)")
        print(f"{job_id} {status['state']}: {status['succeeded']} ok, {status['failed']} failed, "
              f"{status['skipped']} skipped of {status['total']}")
        return 0 if status["failed"] == 0 and status["state"] != "cancelled" else 1
    except (RuntimeError, TimeoutError, OSError, KeyError, zmq.ZMQError) as e:  # ZMQError: a bad endpoint
        print(f"error: {e}", file=sys.stderr)
        return 2
    finally:
        ctx.destroy(linger=0)


if __name__ == "__main__":
    sys.exit(main())
