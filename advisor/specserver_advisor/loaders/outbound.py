"""Outbound HTTP GETs to endpoints someone else may have chosen (HF endpoints, Prometheus).

One function, ``get``, with the rules of docs/security.md:

- only ``http`` and ``https`` URLs, and no credentials in the URL itself;
- redirects are followed by hand (at most ``MAX_REDIRECTS``), only to http(s) and never from
  https down to http; the ``Authorization`` header goes to the origin it was given for only,
  never across a redirect to another origin;
- an answer larger than ``MAX_BYTES`` is cut off and refused;
- failures raise ``OutboundError`` whose message is a status code and a fixed reason: the
  body of an answer (and the server's own reason phrase) never reaches a message, so nothing
  a listener says can be read back through a status condition, an event or a log line.
"""

from __future__ import annotations

import http
import time
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit, urlunsplit

import urllib3

MAX_REDIRECTS = 3
MAX_BYTES = 4 * 1024 * 1024
SCHEMES = ("http", "https")


class OutboundError(RuntimeError):
    """A GET failed; ``status`` is the HTTP status (0 when none came back)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Answer:
    """A 2xx answer: the final URL, status and body."""

    url: str
    status: int
    body: bytes


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) with the scheme's default port made explicit."""
    parts = urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme, (parts.hostname or "").lower(), port


def url_problem(url: str) -> str | None:
    """Why ``url`` may not be fetched (None when it may): a fixed sentence."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a malformed port
    except ValueError:
        return "not a valid URL"
    if parts.scheme not in SCHEMES:
        return "only http and https URLs are fetched"
    if not parts.hostname:
        return "the URL has no host"
    if parts.username is not None or parts.password is not None:
        return "credentials in the URL are refused"
    return None


def redact(url: str) -> str:
    """The URL for messages: no user info, no query, no fragment."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        netloc = f"[{host}]" if ":" in host else host
        if parts.port:
            netloc += f":{parts.port}"
    except ValueError:
        return "(invalid URL)"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def reason(status: int) -> str:
    """The standard phrase of a status code (never the server's own)."""
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "unknown status"


def get(url: str, headers: dict[str, str] | None = None, timeout: float = 10.0) -> Answer:
    """GET ``url`` under the rules above; raises OutboundError for anything but a 2xx.

    Each call has its own connections, closed before it returns (a few calls a cycle).
    """
    pool = urllib3.PoolManager(num_pools=MAX_REDIRECTS + 1, retries=False)
    try:
        return _get(pool, url, dict(headers or {}), timeout)
    finally:
        pool.clear()


def _read_by(resp: urllib3.BaseHTTPResponse, deadline: float, url: str) -> bytes:
    """The body, read in pieces before ``deadline`` (one budget for the whole request, not a
    timeout per read: an endpoint that drips a byte at a time is cut off), at most
    MAX_BYTES + 1 bytes."""
    parts: list[bytes] = []
    size = 0
    while size <= MAX_BYTES:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise OutboundError(f"{redact(url)}: timed out")
        sock = getattr(getattr(resp, "connection", None), "sock", None)
        if sock is not None:
            sock.settimeout(max(0.01, remaining))
        piece = resp.read1(65536)
        if not piece:
            break
        parts.append(piece)
        size += len(piece)
    return b"".join(parts)


def _get(pool: urllib3.PoolManager, url: str, headers: dict[str, str], timeout: float) -> Answer:
    deadline = time.monotonic() + timeout  # connect, redirects, headers and body share it
    first: tuple[str, str, int | None] | None = None
    for _ in range(MAX_REDIRECTS + 1):
        problem = url_problem(url)
        if problem:
            raise OutboundError(f"{redact(url)}: {problem}")
        first = first or origin(url)
        send = dict(headers)
        if origin(url) != first:
            send = {k: v for k, v in send.items() if k.lower() not in ("authorization", "cookie")}
        try:
            resp = pool.request(
                "GET",
                url,
                headers=send,
                redirect=False,
                preload_content=False,
                timeout=urllib3.Timeout(
                    connect=min(5.0, max(0.01, deadline - time.monotonic())),
                    read=max(0.01, deadline - time.monotonic()),
                ),
            )
        except urllib3.exceptions.TimeoutError as exc:
            raise OutboundError(f"{redact(url)}: timed out") from exc
        except urllib3.exceptions.SSLError as exc:
            raise OutboundError(f"{redact(url)}: TLS handshake failed") from exc
        except urllib3.exceptions.HTTPError as exc:
            raise OutboundError(f"{redact(url)}: unreachable") from exc
        try:
            status = resp.status
            if status in (301, 302, 303, 307, 308):
                location = resp.headers.get("Location")
                if not location:
                    raise OutboundError(f"{redact(url)}: HTTP {status} without a Location", status)
                target = urljoin(url, location)
                if origin(url)[0] == "https" and urlsplit(target).scheme == "http":
                    raise OutboundError(f"{redact(url)}: redirect from https to http refused")
                url = target
                continue
            if not 200 <= status < 300:
                raise OutboundError(f"{redact(url)}: HTTP {status} {reason(status)}", status)
            body = _read_by(resp, deadline, url)
            if len(body) > MAX_BYTES:
                raise OutboundError(f"{redact(url)}: answer larger than {MAX_BYTES} bytes")
            return Answer(url, status, body)
        except urllib3.exceptions.HTTPError as exc:
            raise OutboundError(f"{redact(url)}: the answer could not be read") from exc
        finally:
            resp.close()
    raise OutboundError(f"{redact(url)}: more than {MAX_REDIRECTS} redirects")
