"""A client for the HTTP JSON API of a Tessera coordinator (docs/API.md).

Standard library only. Every call raises a :class:`TesseraError` subclass on failure;
connection errors are retried with exponential back-off before
:class:`CoordinatorUnavailable` is raised.
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Union

__all__ = [
    "Client",
    "TesseraError",
    "InvalidJob",
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "Conflict",
    "TooManyRequests",
    "CoordinatorUnavailable",
]

__version__ = "0.2.0"

JobStatus = Dict[str, Any]
TERMINAL = ("succeeded", "failed", "cancelled")


class TesseraError(Exception):
    """An error answered by the coordinator: its HTTP status, error code and message."""

    def __init__(self, message: str, status: Optional[int] = None, code: Optional[str] = None):
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code


class InvalidJob(TesseraError):
    """The job was refused (422): ``line`` and ``field`` say where, when the message names them."""

    def __init__(self, message: str, status: Optional[int] = None, code: Optional[str] = None):
        super().__init__(message, status, code)
        m = re.search(r"request body:(\d+): (?:([\w\[\].-]+): )?", message)
        self.line: Optional[int] = int(m.group(1)) if m else None
        self.field: Optional[str] = m.group(2) if m and m.group(2) else None


class Unauthorized(TesseraError):
    """No token, or an unknown or revoked one (401)."""


class Forbidden(TesseraError):
    """The token may not do this: another client's job (403)."""


class NotFound(TesseraError):
    """No such job or route (404)."""


class Conflict(TesseraError):
    """Not now: retrying the failed tasks of a job that still runs (409)."""


class TooManyRequests(TesseraError):
    """Over the submission rate (429); ``retry_after`` is in seconds."""

    def __init__(self, message: str, status: Optional[int] = None, code: Optional[str] = None,
                 retry_after: Optional[float] = None):
        super().__init__(message, status, code)
        self.retry_after = retry_after


class CoordinatorUnavailable(TesseraError):
    """The coordinator could not be reached (after the retries), or answered 5xx."""


_ERRORS = {400: TesseraError, 401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict,
           413: InvalidJob, 415: InvalidJob, 422: InvalidJob}


class Client:
    """A coordinator's API at ``url`` (``http://host:port``, its ``--metrics-port``).

    :param token: a token from ``tessera token create`` (``None`` for an ``--api-insecure``
        coordinator).
    :param timeout: seconds each request may take.
    :param retries: attempts after a connection error, with back-off ``backoff * 2**n``
        seconds (a submission is retried only when the connection was refused, so a job
        is never submitted twice).
    """

    def __init__(self, url: str, token: Optional[str] = None, timeout: float = 30.0,
                 retries: int = 4, backoff: float = 0.25):
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff

    # Jobs ------------------------------------------------------------------------

    def submit(self, job: Union[Mapping[str, Any], str, "os.PathLike[str]"]) -> str:
        """Submits a job (a dict, or the path of a YAML or JSON job file); returns its id.

        Relative paths in a job file resolve against the file's folder, as with
        ``tessera submit``; in a dict, against the coordinator's working directory.
        """
        headers = {}
        if isinstance(job, Mapping):
            body = json.dumps(job, ensure_ascii=False).encode("utf-8")
            headers["Content-Type"] = "application/json"
        else:
            path = os.fspath(job)
            with open(path, "rb") as f:
                body = f.read()
            headers["Content-Type"] = "application/json" if path.endswith(".json") else "application/yaml"
            headers["X-Job-Directory"] = os.path.dirname(os.path.abspath(path))
        answer = self._json("POST", "/api/v1/jobs", body=body, headers=headers, retry_sent=False)
        return answer["job"]

    def job(self, job_id: str) -> JobStatus:
        """The job's status, with ``progress`` (0…1) and, while it runs, ``etaSeconds``."""
        return self._json("GET", "/api/v1/jobs/" + _quote(job_id))

    def jobs(self, state: Optional[str] = None, limit: int = 50, offset: int = 0) -> List[JobStatus]:
        """A page of the caller's jobs (every job for an admin token), the most recent first."""
        query = {"limit": str(limit), "offset": str(offset)}
        if state:
            query["state"] = state
        return self._json("GET", "/api/v1/jobs?" + urllib.parse.urlencode(query))["jobs"]

    def cancel(self, job_id: str) -> JobStatus:
        """Cancels the job's unfinished tasks; returns its status."""
        return self._json("DELETE", "/api/v1/jobs/" + _quote(job_id))

    def retry_failed(self, job_id: str) -> int:
        """Queues the failed tasks of a finished job again; returns how many."""
        return self._json("POST", "/api/v1/jobs/" + _quote(job_id) + "/retry-failed", retry_sent=False)["retried"]

    def results(self, job_id: str, status: Optional[str] = None, page_size: int = 1000) -> Iterator[Dict[str, Any]]:
        """The job's task records in task order, one page at a time (never all in memory)."""
        query = {"limit": str(page_size)}
        if status:
            query["status"] = status
        path: Optional[str] = "/api/v1/jobs/" + _quote(job_id) + "/results?" + urllib.parse.urlencode(query)
        while path:
            # The whole page first (a short read raises), then its records: a slow consumer
            # never holds the connection, and no page is cut short unnoticed.
            response = self._request("GET", path)
            with response:
                page = response.read()
                path = _next_link(response.headers.get("Link"))
            for line in page.splitlines():
                if line.strip():
                    yield json.loads(line)

    def wait(self, job_id: str, on_progress: Optional[Callable[[JobStatus], None]] = None,
             timeout: Optional[float] = None) -> JobStatus:
        """Follows the job's events until it ends; returns its last status.

        ``on_progress`` gets every status the coordinator sends (twice a second at most). A
        dropped stream is reopened, through a coordinator restart too (for up to a minute
        of unavailability without ``timeout``); ``timeout`` (seconds) raises
        :class:`TimeoutError`.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        last: Optional[JobStatus] = None
        unavailable_since: Optional[float] = None
        while True:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise TimeoutError(f"job {job_id} did not end within {timeout} s")
            try:
                # The server sends a keep-alive comment every 15 s: a read that waits 45 s is a dead link.
                read_timeout = 45.0 if remaining is None else min(45.0, max(remaining, 0.1))
                response = self._request("GET", "/api/v1/jobs/" + _quote(job_id) + "/events",
                                         timeout=read_timeout, stream=True)
                unavailable_since = None
                with response:
                    for raw in response:
                        line = raw.decode("utf-8").rstrip("\r\n")
                        if not line.startswith("data: "):
                            continue
                        last = json.loads(line[6:])
                        if on_progress:
                            on_progress(last)
                        if last.get("state") in TERMINAL:
                            return last
                        if deadline is not None and time.monotonic() > deadline:
                            raise TimeoutError(f"job {job_id} did not end within {timeout} s")
            except CoordinatorUnavailable:
                now = time.monotonic()
                unavailable_since = unavailable_since or now
                if deadline is None and now - unavailable_since > 60:
                    raise
                time.sleep(max(self.backoff, 0.5))
                continue
            except (OSError, urllib.error.URLError) as e:
                if isinstance(e, TimeoutError) and deadline is not None and time.monotonic() >= deadline:
                    raise TimeoutError(f"job {job_id} did not end within {timeout} s") from e
                time.sleep(self.backoff)
            # The stream ended without a final state (a restarted coordinator): ask again.
            try:
                status = self.job(job_id)
            except CoordinatorUnavailable:
                continue
            if status.get("state") in TERMINAL:
                if on_progress and status != last:
                    on_progress(status)
                return status

    # HTTP ------------------------------------------------------------------------

    def _json(self, method: str, path: str, body: Optional[bytes] = None,
              headers: Optional[Dict[str, str]] = None, retry_sent: bool = True) -> Any:
        response = self._request(method, path, body=body, headers=headers, retry_sent=retry_sent)
        with response:
            return json.loads(response.read() or b"null")

    def _request(self, method: str, path: str, body: Optional[bytes] = None,
                 headers: Optional[Dict[str, str]] = None, timeout: Optional[float] = None,
                 stream: bool = False, retry_sent: bool = True):
        all_headers = {"Accept": "application/json", "User-Agent": "tessera-client/" + __version__}
        if self.token:
            all_headers["Authorization"] = "Bearer " + self.token
        all_headers.update(headers or {})
        attempt = 0
        while True:
            request = urllib.request.Request(self.url + path, data=body, method=method, headers=all_headers)
            try:
                t = self.timeout if timeout is None and not stream else timeout
                return urllib.request.urlopen(request, timeout=t)
            except urllib.error.HTTPError as e:
                raise _error(e) from None
            except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
                reason = getattr(e, "reason", e)
                refused = isinstance(reason, ConnectionRefusedError)
                if attempt >= self.retries or not (retry_sent or refused):
                    raise CoordinatorUnavailable(f"{self.url}: {reason}") from e
                time.sleep(self.backoff * (2 ** attempt))
                attempt += 1


def _quote(job_id: str) -> str:
    return urllib.parse.quote(job_id, safe="")


def _next_link(link: Optional[str]) -> Optional[str]:
    if not link:
        return None
    m = re.match(r'\s*<([^>]+)>\s*;\s*rel="next"', link)
    return m.group(1) if m else None


def _error(e: urllib.error.HTTPError) -> TesseraError:
    try:
        payload = json.loads(e.read() or b"{}").get("error", {})
    except ValueError:
        payload = {}
    message = payload.get("message") or f"HTTP {e.code}"
    code = payload.get("code")
    if e.code == 429:
        retry = e.headers.get("Retry-After")
        return TooManyRequests(message, e.code, code, float(retry) if retry else None)
    if e.code >= 500:
        return CoordinatorUnavailable(message, e.code, code)
    return _ERRORS.get(e.code, TesseraError)(message, e.code, code)
