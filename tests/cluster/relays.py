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

from loopbacktcp import Listener


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


class Relay(Listener):
    """A loopback TCP relay to ``host:port`` under a per-chunk ``policy``."""

    def __init__(self, host: str, port: int, policy: Policy = PROMPT) -> None:
        self.upstream = (host, port)
        self.policy = policy
        super().__init__()

    def accepted(self, conn: socket.socket) -> None:
        try:
            server = socket.create_connection(self.upstream, timeout=5)
        except OSError:
            conn.close()
            return
        server.settimeout(None)
        self.conns.append(server)
        for src, dst, answer in ((conn, server, False), (server, conn, True)):
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
