"""One total deadline per API call: connect, TLS handshake, request, headers and body share it.

urllib3's timeouts bound each socket operation, not the call: an API server (or anything
between it and the operator) that answers a byte at a time keeps a call alive indefinitely, and
with it the cycle or a writer thread. client.py runs every call inside ``Watchdog.call``; its
connections (``pool_classes``) tell the watchdog which socket the calling thread is using, and
one watchdog thread shuts down the socket of any call still in flight at its deadline. The read
blocked on it then fails at once and the call raises ``ApiError`` saying the deadline passed
(transient, like an unreachable API server: the next cycle tries again). The one step the
watchdog cannot cut is a TLS handshake (``ssl`` has detached the TCP socket from the object it
could shut); CPython bounds a whole handshake by the socket's timeout, which is urllib3's connect
timeout, and client.py sets that to at most what is left of the call's budget.

``Watchdog.within`` shortens the deadline of every call a block of code makes on its thread
to one end for the whole block: the Lease elector's round (a read, then a write) must end well
inside the lease, not after the 60 s any other call may take (leader.py).

The watchdog thread sleeps while no call is in flight and looks every ``TICK_S`` while one is;
a call costs a lock and two dict operations.
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

#: How often the watchdog looks at the calls in flight (a deadline is kept to within this).
TICK_S = 0.25


@dataclass
class Call:
    """One API call in flight: its deadline and the connection it uses (once it has one)."""

    deadline: float
    #: seconds from its start to its deadline (what an expired call says it was given)
    budget_s: float
    connection: HTTPConnection | None = None
    expired: bool = False


@dataclass
class Watchdog:
    """Shuts down the socket of any call still in flight at its deadline."""

    calls: dict[int, Call] = field(default_factory=dict)
    lock: threading.Condition = field(default_factory=threading.Condition)
    local: threading.local = field(default_factory=threading.local)
    ids: Iterator[int] = field(default_factory=itertools.count)
    thread: threading.Thread | None = None

    @contextlib.contextmanager
    def call(self, budget_s: float) -> Iterator[Call]:
        """Run one API call on this thread within ``budget_s`` seconds in all (less when a
        ``within`` block around it ends sooner)."""
        now = time.monotonic()
        deadline = now + budget_s
        block_end: float | None = getattr(self.local, "block_end", None)
        if block_end is not None:
            deadline = min(deadline, block_end)
        call = Call(deadline, max(0.0, deadline - now))
        key = next(self.ids)
        with self.lock:
            self.calls[key] = call
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(
                    target=self._watch, name="specserver-api-deadline", daemon=True
                )
                self.thread.start()
            if len(self.calls) == 1:
                self.lock.notify()  # it was asleep with nothing in flight
        self.local.call = call
        try:
            yield call
        finally:
            self.local.call = None
            with self.lock:
                self.calls.pop(key, None)

    @contextlib.contextmanager
    def within(self, budget_s: float) -> Iterator[None]:
        """Every API call this thread makes inside the block ends by ``budget_s`` seconds from
        now (nested blocks: the earliest end holds)."""
        outer: float | None = getattr(self.local, "block_end", None)
        end = time.monotonic() + budget_s
        self.local.block_end = end if outer is None else min(end, outer)
        try:
            yield
        finally:
            self.local.block_end = outer

    def attach(self, connection: HTTPConnection) -> None:
        """The calling thread's call uses ``connection`` (its socket is the one to shut)."""
        call = getattr(self.local, "call", None)
        if call is not None:
            call.connection = connection
            if call.expired:  # the deadline passed before the call had a connection
                _shut(connection)

    def _watch(self) -> None:
        with self.lock:
            while True:
                if not self.calls:
                    self.lock.wait()
                    continue
                now = time.monotonic()
                for call in self.calls.values():
                    if not call.expired and now >= call.deadline:
                        call.expired = True
                        if call.connection is not None:
                            _shut(call.connection)
                self.lock.wait(TICK_S)


def _shut(connection: HTTPConnection) -> None:
    sock = getattr(connection, "sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


#: The process's watchdog (client.py's calls all run under it).
WATCHDOG = Watchdog()


class _WatchedHTTPConnection(HTTPConnection):
    def connect(self) -> None:
        WATCHDOG.attach(self)
        super().connect()

    def request(self, *args: Any, **kwargs: Any) -> None:
        WATCHDOG.attach(self)
        super().request(*args, **kwargs)


class _WatchedHTTPSConnection(HTTPSConnection):
    def connect(self) -> None:
        # During the TLS handshake ``sock`` is the TCP socket ``ssl`` has detached (shutting it
        # does nothing): the handshake is bounded by the connect timeout instead, which
        # client.py keeps within the call's budget.
        WATCHDOG.attach(self)
        super().connect()

    def request(self, *args: Any, **kwargs: Any) -> None:
        WATCHDOG.attach(self)
        super().request(*args, **kwargs)


class _WatchedHTTPConnectionPool(HTTPConnectionPool):
    ConnectionCls = _WatchedHTTPConnection


class _WatchedHTTPSConnectionPool(HTTPSConnectionPool):
    ConnectionCls = _WatchedHTTPSConnection


#: ``urllib3.PoolManager.pool_classes_by_scheme`` for connections the watchdog can see.
POOL_CLASSES: dict[str, type[HTTPConnectionPool]] = {
    "http": _WatchedHTTPConnectionPool,
    "https": _WatchedHTTPSConnectionPool,
}
