"""An adversarial probe of the webhook's server (issue 25, after the asyncio rewrite): peers
that crowd the connection cap, and requests that are almost HTTP.

Runs the real server on loopback (test_webhook_server.Running: the fakes are only our own client
seam); tests/cluster/test_webhook_hostile.py runs the same peers against the real apiserver.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_webhook_server import Running, review

import webhookpeers
from specserver_operator.webhookserver import MAX_CONNECTIONS, MAX_PENDING_PER_PEER


@pytest.fixture
def running(tmp_path: Path) -> Iterator[Running]:
    r = Running(tmp_path)
    try:
        yield r
    finally:
        r.close()


def test_a_peer_holding_more_idle_connections_than_the_cap_cuts_off_only_its_own(
    running: Running,
) -> None:
    """600 idle connections from one address (re-opened as fast as it likes) used to fill the
    512 slots, and the API server's next connection was closed at accept: with failurePolicy
    Fail every SpecServer write failed. Now that peer holds at most MAX_PENDING_PER_PEER
    still-reading connections, and past the global cap (many addresses) the oldest still-reading
    one makes room, so the API server's fresh connection is reviewed."""
    socks = webhookpeers.idle(running.port, 600, source="127.0.0.2")
    try:
        time.sleep(0.3)
        status, answer, took = running.post(review("alice"))
        assert status == 200 and answer["response"]["allowed"] is True and took < 3.0
        server = running.hook.server
        assert server is not None and server.open <= MAX_PENDING_PER_PEER + 1
        for source in range(3, 3 + MAX_CONNECTIONS // MAX_PENDING_PER_PEER + 1):
            socks += webhookpeers.idle(running.port, MAX_PENDING_PER_PEER, f"127.0.0.{source}")
        time.sleep(0.3)
        assert server.open <= MAX_CONNECTIONS
        status, answer, took = running.post(review("alice"))
        assert status == 200 and answer["response"]["allowed"] is True and took < 3.0
        cut = 0
        for sock in socks[:600]:  # the crowding peer's oldest were closed by the server
            sock.settimeout(0.01)
            with contextlib.suppress(TimeoutError):
                cut += sock.recv(1) == b""
        assert cut >= 600 - MAX_PENDING_PER_PEER
    finally:
        for sock in socks:
            sock.close()


@pytest.mark.parametrize(
    ("request_head", "answer"),
    [
        # '²' is a digit to str.isdigit() but not to int(): the connection was dropped unanswered
        # with a ValueError logged as a warning, one line per request.
        ("POST /validate HTTP/1.1\r\nContent-Length: \u00b2\r\n\r\n{}", b"HTTP/1.1 400 "),
        ("POST /validate HTTP/1.1\r\nContent-Length: -1\r\n\r\n", b"HTTP/1.1 400 "),
        (
            "POST /validate HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
            b"HTTP/1.1 411 ",
        ),
        ("POST /validate HTTP/1.1\r\n\r\n", b"HTTP/1.1 400 "),
        ("GET /validate HTTP/1.1\r\n\r\n", b"HTTP/1.1 405 "),
        ("POST /validate HTTP/1.1\r\nX: " + "a" * 20000 + "\r\n\r\n", b"HTTP/1.1 431 "),
    ],
)
def test_a_request_that_is_almost_http_gets_an_answer_saying_so(
    running: Running, request_head: str, answer: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    out = webhookpeers.raw(running.port, running.ca, request_head.encode("latin-1"))
    assert out.startswith(answer), out[:200]
    assert not [r for r in caplog.records if r.levelname in ("WARNING", "ERROR")]
