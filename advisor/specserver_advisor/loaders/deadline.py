"""HTTP GETs with a total deadline (not a per-read timeout) and a size cap.

``urllib``'s ``timeout`` bounds each socket read, so an endpoint that drips a byte every few
seconds holds a caller for ever. ``get_within`` bounds the whole request: connecting, the
headers and every body read share one budget, and the body is read in pieces with the
remaining budget checked after each. Used for model-config endpoints (loaders/configs.py) and
the operator's Prometheus queries (signals.py).
"""

from __future__ import annotations

import socket
import time
import urllib.request
from http.client import HTTPResponse

#: Largest body read from a config endpoint or a query (a model config is a few KB).
MAX_BYTES = 8 * 1024 * 1024
CHUNK = 65536


class DeadlineExceededError(TimeoutError):
    """The request did not finish within its total budget."""


class ResponseTooLargeError(OSError):
    """The body is larger than the caller's limit."""


def _set_read_timeout(resp: HTTPResponse, seconds: float) -> None:
    """Give the next socket read at most ``seconds`` (the remaining budget)."""
    raw = getattr(getattr(resp, "fp", None), "raw", None)
    sock = getattr(raw, "_sock", None)
    if isinstance(sock, socket.socket):
        sock.settimeout(max(0.01, seconds))


def read_within(resp: HTTPResponse, deadline: float, limit: int = MAX_BYTES) -> bytes:
    """The body of ``resp``, read before ``deadline`` (time.monotonic) and at most ``limit``."""
    parts: list[bytes] = []
    size = 0
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise DeadlineExceededError("response not complete within the deadline")
        _set_read_timeout(resp, remaining)
        try:
            piece = resp.read1(CHUNK)
        except TimeoutError as exc:
            raise DeadlineExceededError("response not complete within the deadline") from exc
        if not piece:
            return b"".join(parts)
        size += len(piece)
        if size > limit:
            raise ResponseTooLargeError(f"response larger than {limit} bytes")
        parts.append(piece)


def get_within(
    request: urllib.request.Request | str,
    budget_s: float,
    limit: int = MAX_BYTES,
    opener: urllib.request.OpenerDirector | None = None,
) -> bytes:
    """GET ``request`` and return its body, all within ``budget_s`` seconds.

    HTTP errors raise ``urllib.error.HTTPError`` as ``urlopen`` does; running out of time
    raises ``DeadlineExceededError``.
    """
    deadline = time.monotonic() + budget_s
    open_ = opener.open if opener is not None else urllib.request.urlopen
    try:
        resp = open_(request, timeout=budget_s)
    except TimeoutError as exc:
        raise DeadlineExceededError(f"no answer within {budget_s:g}s") from exc
    with resp:
        if time.monotonic() >= deadline:
            raise DeadlineExceededError(f"no answer within {budget_s:g}s")
        try:
            return read_within(resp, deadline, limit)
        except DeadlineExceededError as exc:
            raise DeadlineExceededError(f"response not complete within {budget_s:g}s") from exc
