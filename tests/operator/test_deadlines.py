"""Outbound calls have a total deadline, not a per-read timeout: a tarpit that accepts and
never answers, or drips a byte every second, costs its caller the budget and no more. The
tarpits are real loopback HTTP servers."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from specserver_advisor.loaders.configs import ConfigNotFoundError, fetch_from_endpoint
from specserver_operator import signals
from specserver_operator.signals import SignalCache, refresh_all


class Tarpit:
    """A loopback server: ``silent`` accepts and never answers; ``drip`` sends a valid header
    and then one body byte per ``interval_s``."""

    def __init__(self, behaviour: str, interval_s: float = 0.5) -> None:
        self.behaviour, self.interval_s = behaviour, interval_s
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.stop = threading.Event()
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        self.sock.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.conns.append(conn)
            if self.behaviour == "drip":
                threading.Thread(target=self._drip, args=(conn,), daemon=True).start()

    def _drip(self, conn: socket.socket) -> None:
        try:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n{")
            while not self.stop.wait(self.interval_s):
                conn.sendall(b" ")
        except OSError:
            pass

    def close(self) -> None:
        self.stop.set()
        for conn in self.conns:
            conn.close()
        self.sock.close()


@pytest.fixture(params=["silent", "drip"])
def tarpit(request: pytest.FixtureRequest) -> Iterator[Tarpit]:
    pit = Tarpit(request.param)
    yield pit
    pit.close()


def test_a_config_endpoint_tarpit_is_a_config_error_within_the_budget(tarpit: Tarpit) -> None:
    started = time.monotonic()
    with pytest.raises(ConfigNotFoundError):
        fetch_from_endpoint(tarpit.url, "org/model", None, "config.json", None, timeout=1.5)
    # Without the budget a tarpit holds it for ever; the slack is a loaded CI machine's.
    assert time.monotonic() - started < 5.0


def test_a_prometheus_tarpit_holds_neither_the_cycle_nor_the_readers(
    tarpit: Tarpit, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(signals, "QUERY_BUDGET_S", 6.0)
    cache = SignalCache(tarpit.url, min_interval_s=0, allowed=(tarpit.url,))
    started = time.monotonic()
    refresh_all([cache], wait_s=0.5)
    # The cycle waited its share (0.5 s, with a loaded machine's slack), not the query's 6 s.
    assert time.monotonic() - started < 3.0
    assert cache.get("ns", "x") is None  # and a reader is not blocked by the running query
    assert cache.running is not None
    cache.running.join(15)
    assert not cache.running.is_alive()  # the query itself gave up at its own budget
    assert cache.last_error and cache.query_errors == 1
