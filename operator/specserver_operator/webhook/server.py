"""The webhook's HTTPS server: one peer can stall only its own connection, never the reviews.

Started by service.py (``Webhook.serve``). One event loop on its own thread accepts plain TCP
connections; each gets one deadline, ``READ_DEADLINE_S``, for its whole TLS handshake, request
line, headers and body together (a peer that connects and sends nothing, or drips a byte at a
time, is cut off when it passes, and costs a socket and a coroutine meanwhile, not a thread).
A complete request is reviewed on a bounded pool of ``WORKERS`` threads, and the answer is
written by ``ANSWER_DEADLINE_S`` after the accept, well inside the apiserver's 10 s timeout:
a review that has not finished by then is answered ``allowed: false`` saying so (fail closed).
At most ``MAX_CONNECTIONS`` connections are open at once, and one peer address has at most
``MAX_PENDING_PER_PEER`` that are still reading their request: past either, the oldest such
connection (of that peer, or of all) is cut off to make room for the new one, so a peer that
keeps re-opening idle connections cuts off its own, never the API server's fresh one. A
stranger's connection stays one to cut off until it is answered (so reviews queued for the
side pool do not fill the cap either); a new connection is refused only when every open one
is the API server's, past its read.

Reviews from a caller that did not show the API server's certificate (when the context asks
for one) run on a pool of their own, ``SIDE_WORKERS`` wide: a stranger's reviews, however
costly (a 4 MiB body of ``inline.target: [{}, {}, ...]`` costs the advisor seconds of CPU),
queue behind each other, never in front of the API server's, and never count against health.

Memory is bounded by bytes, not by requests: a stranger's body is at most
``STRANGER_MAX_BODY``; the bodies held at once (read and not yet answered) at most
``MAX_HELD``, and those under review at once (parsing one costs ~35x its size) at most
``REVIEW_BYTES`` (any one alone). Past a limit the API server's review is read through and
refused with its uid (a 4xx or a dropped connection is a failed call, which failurePolicy
Ignore admits), a stranger's gets 413 or 503.

Of the API server's pool, one namespace's reviews hold at most ``PER_NAMESPACE`` workers at
once (the namespace the API server wrote into the review, so a tenant cannot take another's
share): a tenant whose SpecServers are costly to review (a 1.5 MB inline config, seconds of CPU
each) waits behind its own reviews, and another namespace's are still answered at once.

``health()`` is what ``/healthz`` reports (handlers.py): the loop thread alive and turning, and
the API server's pool not wedged: every worker on a review past its deadline and no review
finished for ``WEDGED_S``. A pool that is busy but finishing reviews (costly ones, one after
another) is slow, not wedged: a restart would only take the webhook away (failurePolicy
Ignore then admits unchecked), so /healthz stays up while reviews are refused at the deadline.

The caller is identified by its TLS client certificate (``Caller``): a certificate that the
context verified (the admin's client CA, service.py) and, when names are configured, whose
subject common name is one of them. Only such a caller's reviews get SubjectAccessReviews
(admission.py).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import logging
import re
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from specserver_operator.webhook.admission import HEAD_BYTES, refusal, review_uid
from specserver_operator.webhook.secretreview import Caller

log = logging.getLogger("specserver.webhook")
PATH = "/validate"
#: ``GET`` here answers 200 while this server can answer reviews (``health()``), else 503: the
#: operator pod's readinessProbe, so the webhook Service sends the apiserver's reviews only to
#: replicas that answer them (failurePolicy Fail: manifests/webhook.yaml).
READY_PATH = "/readyz"
#: Handshake + request line + headers + body, from the accept.
READ_DEADLINE_S = 5.0
#: From the accept to the answer (the apiserver gives up after the configuration's 10 s).
ANSWER_DEADLINE_S = 8.0
MAX_CONNECTIONS = 512
#: Connections one peer address may have still reading their request (handshake, headers, body).
MAX_PENDING_PER_PEER = 64
MAX_HEADER_BYTES = 16 * 1024
MAX_BODY = 4 * 1024 * 1024
#: A body over MAX_BODY up to this is read through (its head kept) and refused with its uid.
MAX_DISCARD = 16 * 1024 * 1024
#: The largest body from a caller that is not the API server (while a client CA is set).
STRANGER_MAX_BODY = 256 * 1024
#: Bodies held at once (read, or being read, and not yet answered); past it a new one is
#: refused (read through, refused with its uid; a stranger's: 503).
MAX_HELD = 32 * 1024 * 1024
#: Bodies under review at once: parsing and validating one costs ~35x its size in memory
#: (a 4 MiB body of [{}, ...] +136 MB RSS), so one of MAX_BODY, or many small ones.
REVIEW_BYTES = 4 * 1024 * 1024
WORKERS = 4
#: Of WORKERS, how many one namespace's reviews may hold at once.
PER_NAMESPACE = 2
#: Workers for reviews from callers that are not the API server (a client CA is set).
SIDE_WORKERS = 1
#: The pool is wedged when all its workers are past the deadline and none finished this long.
WEDGED_S = 30.0
#: The loop writes a heartbeat this often; older than HEARTBEAT_STALE_S: it is not turning.
HEARTBEAT_S = 0.5
HEARTBEAT_STALE_S = 5.0

#: Reviews one request body for ``caller`` by the monotonic ``deadline``; writes the request's
#: uid into ``seen["uid"]`` as soon as it is known (for an answer made without it) and returns
#: the AdmissionReview answer. Must not raise (admission.answer_body).
Review = Callable[[bytes, Caller, float, dict[str, str]], dict[str, Any]]


#: request.namespace as the API server writes it: Go's encoding keeps the request's field
#: order (uid, kind, resource, ..., name, namespace, operation, userInfo, object), so the first
#: "namespace" key in the body's head is the request's own, before any tenant-written text.
_NAMESPACE = re.compile(rb'"namespace"\s*:\s*"([a-z0-9.-]{0,253})"')


def review_namespace(body: bytes) -> str:
    """The namespace of an AdmissionReview from the API server, read from the head of its
    body without parsing it ("" when not there: one share for all such reviews)."""
    found = _NAMESPACE.search(body, 0, HEAD_BYTES)
    return found.group(1).decode() if found else ""


@dataclass
class _Share:
    """One namespace's share of the API server's workers, and how many reviews use it."""

    slots: asyncio.Semaphore
    users: int = 0


class _TooLarge(Exception):
    """A body refused unread (over a limit), read through: its first HEAD_BYTES and why."""

    def __init__(self, head: bytes, message: str) -> None:
        super().__init__(message)
        self.head, self.message = head, message


class _BadRequest(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def caller_of(cert: dict[str, Any] | None, names: frozenset[str]) -> Caller:
    """Who presented ``cert`` (``getpeercert()`` of a verified connection; None: no certificate).

    A verified certificate authenticates its holder when ``names`` is empty or its subject
    has exactly one common name and it is in ``names`` (a subject of several, one allowed and
    one not, is not the API server's)."""
    if not cert:
        return Caller(False, "no client certificate")
    cns = [
        str(value) for rdn in cert.get("subject", ()) for attr, value in rdn if attr == "commonName"
    ]
    cn = cns[0] if len(cns) == 1 else ""
    if names and len(cns) != 1:
        return Caller(False, f"client certificate has {len(cns)} common names, not one")
    if names and cn not in names:
        return Caller(False, f"client certificate CN={cn!r} is not one of the allowed names")
    return Caller(True, f"CN={cn}")


class Server:
    """The server; ``start`` binds and serves on a thread, ``stop`` ends it."""

    def __init__(
        self,
        address: str,
        port: int,
        context: ssl.SSLContext,
        review: Review,
        client_names: frozenset[str] = frozenset(),
        workers: int = WORKERS,
    ) -> None:
        self.address, self.port, self.context = address, port, context
        self.review, self.client_names, self.workers = review, client_names, workers
        self.pool = concurrent.futures.ThreadPoolExecutor(workers, "specserver-review")
        self.side_pool = concurrent.futures.ThreadPoolExecutor(
            SIDE_WORKERS, "specserver-review-unverified"
        )
        self.finished = time.monotonic()  # when the API server's pool last finished a review
        self.shares: dict[str, _Share] = {}  # namespace -> its share (while it has reviews)
        self.held = 0  # bytes of bodies read or being read, not yet answered (MAX_HELD)
        self.reviewing = 0  # bytes of bodies under review (REVIEW_BYTES)
        self.connections: set[int] = set()
        #: connections still reading their request, oldest first: id -> (peer address, task)
        self.pending: dict[int, tuple[str, asyncio.Task[Any]]] = {}
        self._conn_ids = 0
        self.heartbeat = 0.0
        self.running: dict[int, float] = {}  # review id -> when it started (monotonic)
        self._lock = threading.Lock()
        self._ids = 0
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._bound = threading.Event()
        self._error: BaseException | None = None

    def start(self) -> None:
        """Bind and serve on a daemon thread; raises OSError when the port cannot be bound."""
        self._thread = threading.Thread(target=self._run, name="specserver-webhook", daemon=True)
        self._thread.start()
        self._bound.wait(30)
        if self._error is not None:
            raise self._error

    def stop(self) -> None:
        if self._loop is not None and self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
        if self._thread is not None:
            self._thread.join(10)
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.side_pool.shutdown(wait=False, cancel_futures=True)

    def health(self, now: float | None = None) -> str | None:
        """Why the webhook cannot answer now (None: it can)."""
        now = time.monotonic() if now is None else now
        if self._thread is None or not self._thread.is_alive():
            return "the webhook's serving thread is not running"
        if now - self.heartbeat > HEARTBEAT_STALE_S:
            return f"the webhook's event loop has not turned for {now - self.heartbeat:.0f}s"
        with self._lock:
            stuck = [t for t in self.running.values() if now - t > ANSWER_DEADLINE_S]
            quiet = now - self.finished
        if len(stuck) >= self.workers and quiet > WEDGED_S:
            return (
                f"all {self.workers} review workers are busy past the "
                f"{ANSWER_DEADLINE_S:g}s deadline and none finished a review for {quiet:.0f}s"
            )
        return None

    def _pool_for(self, caller: Caller) -> concurrent.futures.ThreadPoolExecutor | None:
        """The API server's pool (None: the side pool, for a caller that could have shown the
        API server's certificate and did not)."""
        if caller.authenticated or self.context.verify_mode == ssl.CERT_NONE:
            return self.pool
        return None

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # reported by start() and health()
            self._error = exc
            log.error("webhook: server stopped: %s: %s", type(exc).__name__, exc)
        finally:
            self._bound.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        server = await asyncio.start_server(
            self._connection, self.address, self.port, limit=MAX_HEADER_BYTES, backlog=128
        )
        self.port = server.sockets[0].getsockname()[1]
        self.heartbeat = time.monotonic()
        self._bound.set()
        async with server:
            while not self._stopping.is_set():
                self.heartbeat = time.monotonic()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), HEARTBEAT_S)

    @property
    def open(self) -> int:
        """Connections open now (the ones cut off to make room are not counted)."""
        return len(self.connections)

    def _cut(self, key: int) -> None:
        # Cancelled, not aborted under it: an aborted handshake leaves the writer without a
        # transport (asyncio's start_tls returns None), which its __del__ then trips over.
        _peer, task = self.pending.pop(key)
        self.connections.discard(key)
        task.cancel()

    def _make_room(self, peer: str) -> bool:
        """Room for one more connection from ``peer``, cutting off the oldest still-reading
        one of that peer past MAX_PENDING_PER_PEER, then of anyone past MAX_CONNECTIONS;
        False when every open connection is past its read (no room without dropping a
        review)."""
        mine = [key for key, (p, _) in self.pending.items() if p == peer]
        if len(mine) >= MAX_PENDING_PER_PEER:
            self._cut(mine[0])
        if len(self.connections) >= MAX_CONNECTIONS:
            if not self.pending:
                return False
            self._cut(next(iter(self.pending)))
        return True

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted = time.monotonic()
        peername = writer.get_extra_info("peername")
        peer = str(peername[0]) if isinstance(peername, tuple) and peername else ""
        if not self._make_room(peer):
            writer.transport.abort()
            return
        self._conn_ids += 1
        key = self._conn_ids
        self.connections.add(key)
        task = asyncio.current_task()
        assert task is not None  # start_server runs each connection as a task
        self.pending[key] = (peer, task)
        try:
            await self._serve_one(reader, writer, accepted, key)
            writer.close()
            async with asyncio.timeout(1.0):
                await writer.wait_closed()
        except asyncio.CancelledError:  # cut off to make room (_make_room) or the server stops
            log.debug("webhook: connection cut off")
        except (OSError, ssl.SSLError, TimeoutError, asyncio.IncompleteReadError) as exc:
            log.debug("webhook: connection dropped: %s: %s", type(exc).__name__, exc)
        except Exception as exc:  # one connection's fault stays its own
            log.warning("webhook: connection failed: %s: %s", type(exc).__name__, exc)
        finally:
            self.connections.discard(key)
            self.pending.pop(key, None)
            if not writer.transport.is_closing():
                writer.transport.abort()

    async def _serve_one(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        accepted: float,
        key: int,
    ) -> None:
        held = 0
        try:
            async with asyncio.timeout(READ_DEADLINE_S):
                await writer.start_tls(self.context)
                ssl_object = writer.get_extra_info("ssl_object")
                cert = ssl_object.getpeercert() if ssl_object is not None else None
                caller = caller_of(cert, self.client_names)
                size = 0
                try:
                    size = await _read_head(reader)
                    if size == 0:  # GET /readyz
                        problem = self.health()
                        await _write(
                            writer,
                            503 if problem else 200,
                            {"ready": not problem, "why": problem or ""},
                        )
                        return
                    self._check_size(size, self._pool_for(caller) is None)
                    held = size
                    self.held += held
                    body = await reader.readexactly(size)
                except _BadRequest as exc:
                    if size:  # a body refused for its size: read through, not buffered
                        await _read_through(reader, size)
                    await _write(writer, exc.code, {"message": str(exc)})
                    return
                except _TooLarge as exc:  # a review's refusal: a 4xx is a failed call (Ignore)
                    exc.head = await _read_through(reader, size)
                    await _write(writer, 200, refusal(review_uid(exc.head), exc.message))
                    return
            if self._pool_for(caller) is not None:  # the API server's, read: never cut off
                self.pending.pop(key, None)  # (a stranger's stays one to cut off for room)
            answer = await self._reviewed(body, caller, accepted + ANSWER_DEADLINE_S)
            left = accepted + ANSWER_DEADLINE_S + 1.0 - time.monotonic()
            async with asyncio.timeout(max(0.1, left)):
                await _write(writer, 200, answer)
        finally:
            self.held -= held

    def _check_size(self, size: int, stranger: bool) -> None:
        """Raise unless a body of ``size`` may be read now (``stranger``: not the API server's,
        refused with an HTTP error; the API server's, as a review: _TooLarge)."""
        if stranger and size > STRANGER_MAX_BODY:
            raise _BadRequest(
                413,
                f"a body over {STRANGER_MAX_BODY} bytes from a caller that is not the API server",
            )
        if size > MAX_BODY:
            raise _TooLarge(b"", f"the AdmissionReview body is {size} bytes, over {MAX_BODY}")
        if self.held + size > MAX_HELD:
            if stranger:
                raise _BadRequest(503, "the webhook holds too many reviews; try again")
            raise _TooLarge(
                b"", f"the webhook already holds {self.held} bytes of reviews (at most {MAX_HELD})"
            )

    async def _reviewed(self, body: bytes, caller: Caller, deadline: float) -> dict[str, Any]:
        """The review's answer, or a refusal when it is not done by ``deadline``."""
        # The uid from the body's head now: a refusal with another uid (or none) is a failed
        # call to the apiserver, which failurePolicy Ignore then admits unchecked.
        seen: dict[str, str] = {"uid": review_uid(body)}
        with self._lock:
            self._ids += 1
            key = self._ids

        pool = self._pool_for(caller)

        def work() -> dict[str, Any]:
            if pool is None:  # a stranger's: neither counted for health nor in the way
                return self.review(body, caller, deadline, seen)
            with self._lock:
                self.running[key] = time.monotonic()
            try:
                return self.review(body, caller, deadline, seen)
            finally:
                with self._lock:
                    self.running.pop(key, None)
                    self.finished = time.monotonic()

        size = len(body)

        def unbudget() -> None:
            self.reviewing -= size

        def over_budget() -> dict[str, Any]:
            return refusal(
                seen["uid"],
                f"the review did not start within {ANSWER_DEADLINE_S:g}s: the webhook is "
                f"reviewing {self.reviewing} bytes of bodies already (at most {REVIEW_BYTES})",
            )

        if pool is None:
            if not await self._budget(size, deadline):
                return over_budget()
            return await self._submit(self.side_pool, work, deadline, seen, unbudget)
        namespace = review_namespace(body)
        share = self.shares.setdefault(namespace, _Share(asyncio.Semaphore(PER_NAMESPACE)))
        share.users += 1

        def leave() -> None:
            share.users -= 1
            if not share.users and self.shares.get(namespace) is share:
                del self.shares[namespace]

        try:
            async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                await share.slots.acquire()
        except TimeoutError:
            leave()
            return refusal(
                seen.get("uid", ""),
                f"the review did not start within {ANSWER_DEADLINE_S:g}s: namespace "
                f"{namespace!r} already has {PER_NAMESPACE} reviews in progress",
            )
        if not await self._budget(size, deadline):  # taken after the share: a namespace's
            share.slots.release()  # waiting reviews hold no budget
            leave()
            return over_budget()

        def done() -> None:  # when the work has finished, not at the deadline
            share.slots.release()
            leave()
            unbudget()

        return await self._submit(pool, work, deadline, seen, done)

    async def _budget(self, size: int, deadline: float) -> bool:
        """Take ``size`` bytes of REVIEW_BYTES (any size when nothing is under review), waiting
        until ``deadline``; False when it did not come."""
        while self.reviewing and self.reviewing + size > REVIEW_BYTES:
            if time.monotonic() >= deadline - 0.05:
                return False
            await asyncio.sleep(0.02)
        self.reviewing += size
        return True

    async def _submit(
        self,
        pool: concurrent.futures.ThreadPoolExecutor,
        work: Callable[[], dict[str, Any]],
        deadline: float,
        seen: dict[str, str],
        done: Callable[[], None] | None = None,
    ) -> dict[str, Any]:
        """``work``'s answer on ``pool``, or a refusal at ``deadline`` (``done`` is called on
        the loop once the work has finished or was cancelled before it started)."""
        loop = asyncio.get_running_loop()
        future = pool.submit(work)
        if done is not None:

            def finished(_f: concurrent.futures.Future[dict[str, Any]]) -> None:
                with contextlib.suppress(RuntimeError):  # the loop closed: nothing to release
                    loop.call_soon_threadsafe(done)

            future.add_done_callback(finished)
        try:
            return await asyncio.wait_for(
                asyncio.wrap_future(future), max(0.0, deadline - time.monotonic())
            )
        except TimeoutError:
            return refusal(
                seen.get("uid", ""),
                f"the review did not finish within {ANSWER_DEADLINE_S:g}s (the webhook is busy)",
            )


async def _read_head(reader: asyncio.StreamReader) -> int:
    """The Content-Length of one ``POST /validate`` (1 to MAX_DISCARD), its headers read; 0
    for ``GET /readyz``."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.LimitOverrunError:
        raise _BadRequest(431, f"request headers over {MAX_HEADER_BYTES} bytes") from None
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise _BadRequest(400, "not an HTTP/1.x request")
    if parts[1].split("?", 1)[0] == READY_PATH and parts[0] == "GET":
        return 0
    if parts[1].split("?", 1)[0] != PATH:
        raise _BadRequest(404, "not found")
    if parts[0] != "POST":
        raise _BadRequest(405, f"{PATH} takes POST")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            key, value = name.strip().lower(), value.strip()
            if key == "content-length" and headers.get(key, value) != value:
                raise _BadRequest(400, "Content-Length given twice with different values")
            headers[key] = value
    if "transfer-encoding" in headers:
        raise _BadRequest(411, "a Content-Length body is required")
    length = headers.get("content-length", "")
    if not (length.isascii() and length.isdigit()) or not 0 < int(length) <= MAX_DISCARD:
        raise _BadRequest(400, f"an AdmissionReview body of 1-{MAX_BODY} bytes is required")
    return int(length)


async def _read_through(reader: asyncio.StreamReader, size: int) -> bytes:
    """The first HEAD_BYTES of a body of ``size``, the rest read and dropped as it comes."""
    head = await reader.readexactly(min(size, HEAD_BYTES))
    left = size - len(head)
    while left:
        chunk = await reader.read(min(left, 1 << 16))
        if not chunk:
            raise asyncio.IncompleteReadError(b"", left)
        left -= len(chunk)
    return head


async def _write(writer: asyncio.StreamWriter, code: int, body: dict[str, Any]) -> None:
    data = json.dumps(body).encode()
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 503: "Service Unavailable"}.get(
        code, "Error"
    )
    writer.write(
        f"HTTP/1.1 {code} {reason}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode()
        + data
    )
    await writer.drain()
