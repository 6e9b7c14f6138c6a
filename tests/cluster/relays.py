"""A loopback TCP relay in front of the real apiserver that can misbehave, for the cluster tests.

The operator (or a client) is pointed at the relay's port; the relay passes bytes both ways to
the apiserver, one chunk at a time, under its current ``policy`` (read afresh for each chunk):
``PROMPT`` relays at once, ``STALL`` relays nothing in either direction (connections stay open,
new ones are accepted and held: an API server that stopped answering, as one client sees it),
``drip(s)`` passes the apiserver's bytes back one at a time, ``s`` seconds apart (each read
gets its byte long before any per-read timeout)."""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from dataclasses import dataclass


@dataclass(frozen=True)
class Policy:
    """What the relay does with the next chunk."""

    stall: bool = False
    #: seconds between the bytes of an answer (0: the whole chunk at once)
    drip_s: float = 0.0


PROMPT = Policy()
STALL = Policy(stall=True)


def drip(every_s: float) -> Policy:
    """Answers pass one byte every ``every_s`` seconds (requests go through at once)."""
    return Policy(drip_s=every_s)


#: How often an idle or stalled pump looks at the policy and whether the relay was closed.
POLL_S = 0.1


class Relay:
    """A loopback TCP relay to ``host:port`` under a per-chunk ``policy``."""

    def __init__(self, host: str, port: int, policy: Policy = PROMPT) -> None:
        self.upstream = (host, port)
        self.policy = policy
        self.closed = threading.Event()
        self.sock = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.port: int = self.sock.getsockname()[1]
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        self.sock.settimeout(0.2)
        while not self.closed.is_set():
            try:
                client = self.sock.accept()[0]
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                continue
            client.settimeout(None)
            server.settimeout(None)
            self.conns += [client, server]
            for src, dst, answer in ((client, server, False), (server, client, True)):
                threading.Thread(target=self._pump, args=(src, dst, answer), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, answer: bool) -> None:
        try:
            while not self.closed.is_set():
                if self.policy.stall:
                    self.closed.wait(POLL_S)
                    continue
                if not select.select([src], [], [], POLL_S)[0]:
                    continue
                policy = self.policy  # as it is now that a chunk is there
                if policy.stall:
                    continue
                data = src.recv(65536)
                if not data:
                    break
                if not (answer and policy.drip_s):
                    dst.sendall(data)
                    continue
                for i in range(len(data)):
                    if self.closed.wait(policy.drip_s):
                        return
                    dst.sendall(data[i : i + 1])
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.closed.set()
        self.sock.close()
        for conn in self.conns:
            conn.close()
