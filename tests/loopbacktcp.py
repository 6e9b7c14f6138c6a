"""TCP servers on loopback that misbehave on purpose, for the deadline tests: a ``Tarpit``
accepts and never answers, a ``Drip`` answers an HTTP header and then one body byte at a time,
never finishing. ``Listener`` is their accept loop (tests/cluster/relays.py builds on it too)."""

from __future__ import annotations

import socket
import threading


class Listener:
    """Accepts connections on ``127.0.0.1:port`` (0: a free port) on its own thread and hands
    each to ``accepted``; ``close`` closes them all and the listening socket. Subclasses set
    what ``accepted`` needs before calling ``__init__`` (a connection may come at once)."""

    def __init__(self, port: int = 0) -> None:
        self.sock = socket.create_server(("127.0.0.1", port), backlog=64)
        self.port: int = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.closed = threading.Event()
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        self.sock.settimeout(0.2)
        while not self.closed.is_set():
            try:
                conn = self.sock.accept()[0]
            except OSError:
                continue
            conn.settimeout(None)
            self.conns.append(conn)
            self.accepted(conn)

    def accepted(self, conn: socket.socket) -> None:
        """What to do with a new connection (the base class holds it open, unanswered)."""

    def close(self) -> None:
        self.closed.set()
        for conn in self.conns:
            conn.close()
        self.sock.close()


class Tarpit(Listener):
    """Accepts connections and never answers."""


class Drip(Listener):
    """Reads the request, answers ``200`` with a header promising 100,000 bytes, then sends one
    body byte every ``interval_s``, never finishing (a per-read timeout never fires)."""

    def __init__(self, interval_s: float, port: int = 0) -> None:
        self.interval_s = interval_s
        super().__init__(port)

    def accepted(self, conn: socket.socket) -> None:
        threading.Thread(target=self._drip, args=(conn,), daemon=True).start()

    def _drip(self, conn: socket.socket) -> None:
        try:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n{")
            while not self.closed.wait(self.interval_s):
                conn.sendall(b" ")
        except OSError:
            pass
