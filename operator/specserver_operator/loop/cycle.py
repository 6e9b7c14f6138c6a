"""The shared observation cycle: every few seconds, one pass over every SpecServer.

Started by handlers.py at operator start-up (one thread). Each cycle reads SpecServers and the
children it manages from the watch-fed cache (kube/informer.py; a LIST primes it and resyncs it
every few minutes), runs the grouped PromQL queries once per Prometheus (signals.py), then
runs one pass (``controller.reconcile``) for each SpecServer: reads cost nothing per object, and
an unchanged object costs no write. kopf's event handlers call ``Cycle.immediate_pass`` for a
pass on a fresh read; a per-SpecServer lock keeps the two from interleaving, and a cycle skips
an object a handler's pass wrote after the cycle took its snapshot.

Every pass decides on the cycle thread; a pass that has something to write hands its writes
to a few writer threads (``WRITERS`` in flight, each call under the client's own timeouts), so
a cycle that must create the children of a thousand new SpecServers waits for the API server
``WRITERS`` calls at a time, not one after another. The cycle ends when its writes have.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from specserver_advisor.models import KIND
from specserver_operator.core import ownstatus, policystate
from specserver_operator.core.passcache import PassCache
from specserver_operator.kube import secretgrants
from specserver_operator.kube.cachedclient import CachedClient, PassClient
from specserver_operator.kube.client import KubeClient
from specserver_operator.kube.errors import ApiError, NotFoundError
from specserver_operator.kube.informer import ObjectCache
from specserver_operator.loop import faults, heaptrim
from specserver_operator.loop.faults import Faults
from specserver_operator.loop.leader import Elector
from specserver_operator.metrics import registry as opmetrics
from specserver_operator.reconcile import controller
from specserver_operator.reconcile.runsettings import Settings, read_settings
from specserver_operator.reconcile.signals import SignalCache, refresh_all

log = logging.getLogger("specserver.cycle")
#: Longest a cycle waits for its Prometheus answers (a slow one answers into the next cycle).
SIGNAL_WAIT_S = 3.0
#: Passes whose writes run at once (the first cycle over a thousand new SpecServers writes
#: three thousand times); the client's connection pool keeps as many connections.
WRITERS = 8
#: The rest of a pass whose writes were deferred to a writer thread.
Rest = Callable[[], None]


def now_iso() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _refused(exc: ApiError | NotFoundError) -> bool:
    """The API server refused the request itself (400/403/404/422): retrying the same request
    cannot help, so it is the object's fault, not a transient one."""
    if isinstance(exc, NotFoundError):
        return False
    return exc.status in (400, 403, 404, 413, 422)


def prometheus_url(body: dict[str, Any], default: str | None) -> str | None:
    """The SpecServer's Prometheus (spec.autoSpeculation.prometheusUrl, else ``default``: the
    operator's ``Settings.prometheus_url``)."""
    auto = (body.get("spec") or {}).get("autoSpeculation") or {}
    url = auto.get("prometheusUrl") if isinstance(auto, dict) else None
    return url or default or None


@dataclass
class Cycle:
    """The operator's loop state: the client, the settings, the cache, signal caches, locks."""

    client: KubeClient
    #: the operator's settings, read when the cycle is made (handlers.py: at start-up)
    settings: Settings = field(default_factory=read_settings)
    namespaces: list[str] = field(default_factory=list)
    cache: ObjectCache = field(default_factory=ObjectCache)
    signals: dict[str, SignalCache] = field(default_factory=dict)
    locks: dict[str, threading.Lock] = field(default_factory=dict)
    handled_at: dict[str, float] = field(default_factory=dict)
    last_retry: dict[str, str | None] = field(default_factory=dict)
    guard: threading.Lock = field(default_factory=threading.Lock)
    faults: Faults = field(default_factory=Faults)
    #: memoised work between passes (configs, renderings, policy contexts), pruned each cycle
    memo: PassCache = field(default_factory=PassCache)
    #: leader election (None: this replica always leads, as in tests and the benchmark)
    elector: Elector | None = None
    #: monotonic time the newest cycle completed (start-up time before the first one)
    completed_at: float = field(default_factory=time.monotonic)
    #: writer threads (0: every pass writes on the cycle thread, one after another)
    writers: int = WRITERS
    pool: ThreadPoolExecutor | None = None
    #: Secret grants as last listed (secretgrants.py)
    grants: secretgrants.Book = field(default_factory=secretgrants.Book)

    def lock(self, uid: str) -> threading.Lock:
        with self.guard:
            return self.locks.setdefault(uid, threading.Lock())

    def signal_cache(self, url: str | None) -> SignalCache | None:
        if not url:
            return None
        with self.guard:
            if url not in self.signals:
                self.signals[url] = SignalCache(
                    url,
                    min_interval_s=self.settings.query_interval_s,
                    window_s=self.settings.signal_window_s,
                )
            return self.signals[url]

    def _pass(self, client: PassClient, body: dict[str, Any], defer: bool = False) -> Rest | None:
        """One pass (``controller.reconcile``); with ``defer``, a pass that writes returns its
        writes (and what follows them) undone, for a writer thread (None: the pass is complete)."""
        cache = self.signal_cache(prometheus_url(body, self.settings.prometheus_url))
        now = now_iso()
        outcome = controller.reconcile(
            client, body, now, self.settings, signals=cache, memo=self.memo, defer=defer
        )
        if outcome.rest is not None:
            rest = outcome.rest
            return lambda: self._report(client, body, rest(), now)
        self._report(client, body, outcome, now)
        return None

    def _report(
        self, client: PassClient, body: dict[str, Any], outcome: controller.Outcome, now: str
    ) -> None:
        """Post a pass's events; log a change of its retry state."""
        meta = body["metadata"]
        for type_, reason, message in outcome.events:
            client.post_event(body, type_, reason, message, now)
        # One log line per change of state, not one per cycle while it lasts.
        if outcome.retry != self.last_retry.get(meta["uid"]):
            if outcome.retry:
                log.info("%s/%s: %s", meta["namespace"], meta["name"], outcome.retry)
            elif self.last_retry.get(meta["uid"]):
                log.info("%s/%s: recovered", meta["namespace"], meta["name"])
            self.last_retry[meta["uid"]] = outcome.retry

    def guarded_pass(self, client: PassClient, body: dict[str, Any]) -> bool:
        """``_pass`` with this object's faults kept its own; True when the pass succeeded."""
        return self._guarded(client, body, lambda: self._pass(client, body))[0]

    def _guarded(
        self, client: PassClient, body: dict[str, Any], step: Callable[[], Rest | None]
    ) -> tuple[bool, Rest | None]:
        """Run ``step`` (a pass, or the deferred rest of one) with this object's faults kept its
        own: whether it succeeded, and the rest of the pass still to run (a deferred one).

        An API server that cannot be reached (or answers 409/429/5xx) is transient: logged, and
        the next cycle tries again. Anything else (a refused child, a spec or model config the
        code could not digest) becomes the object's Ready=False condition and one event, and
        the object is retried with backoff (faults.py). A fault is cleared only once a whole
        pass has succeeded.
        """
        meta = body["metadata"]
        uid, generation = meta["uid"], meta.get("generation")
        try:
            rest = step()
        except (ApiError, NotFoundError) as exc:
            if not _refused(exc):
                opmetrics.CYCLE_ERRORS.inc()
                log.warning("%s/%s: %s", meta["namespace"], meta["name"], exc)
                return False, None
            self._fault(client, body, exc)
            return False, None
        except Exception as exc:  # one object's bug or bad input must not stop the others
            self._fault(client, body, exc)
            return False, None
        if rest is not None:
            return True, rest
        if self.faults.clear(uid):
            log.info(
                "%s/%s: reconciled again (generation %s)",
                meta["namespace"],
                meta["name"],
                generation,
            )
        return True, None

    def _write_later(
        self, client: PassClient, body: dict[str, Any], rest: Rest, decided_at: float
    ) -> bool:
        """A writer thread: the deferred writes of a pass, under the object's lock, unless a
        handler's pass wrote after this one decided (its plan is newer) or the lease is lost.
        Its CPU time counts as the cycle's."""
        cpu = time.thread_time()
        uid = body["metadata"]["uid"]
        try:
            with self.lock(uid):
                if self.handled_at.get(uid, 0.0) > decided_at or not self.still_leading():
                    return False
                return self._guarded(client, body, rest)[0]
        finally:
            opmetrics.CYCLE_CPU.inc(time.thread_time() - cpu)

    def _writer_pool(self) -> ThreadPoolExecutor:
        if self.pool is None:
            self.pool = ThreadPoolExecutor(self.writers, thread_name_prefix="specserver-write")
        return self.pool

    def _fault(self, client: PassClient, body: dict[str, Any], exc: Exception) -> None:
        meta = body["metadata"]
        ns, name, uid, generation = (
            meta["namespace"],
            meta["name"],
            meta["uid"],
            meta.get("generation"),
        )
        opmetrics.CYCLE_ERRORS.inc()
        message = faults.describe(exc)
        if self.faults.record(uid, generation, message, time.monotonic()):
            log.error("%s/%s: reconcile failed: %s", ns, name, message, exc_info=exc)
            with contextlib.suppress(ApiError, NotFoundError):
                client.post_event(body, "Warning", faults.REASON, message, now_iso())
        else:
            log.debug("%s/%s: still failing: %s", ns, name, message)
        current = body.get("status") or {}
        changes = faults.fault_status(current, generation, message, now_iso())
        if changes:  # a status the previous version wrote is refused until it is migrated
            changes.update(policystate.migrated(current))
        if changes:
            try:
                answer = client.patch_status(ns, name, changes)
                if uid in self.memo.own_status:  # a migrated policyState is the operator's
                    own = self.memo.own_status[uid]
                    self.memo.own_status[uid] = ownstatus.after_write(own, changes, answer)
            except (ApiError, NotFoundError) as write_error:
                log.warning("%s/%s: status not written: %s", ns, name, write_error)

    def immediate_pass(self, namespace: str, name: str, uid: str) -> None:
        """An immediate pass for one SpecServer on a fresh read (kopf create/update)."""
        if not self.leading():
            return  # the leader's own handler sees the same change
        with self.lock(uid):
            client = CachedClient(self.client, self.cache, read_through=True, grants=self.grants)
            body = client.get_specserver(namespace, name)
            if body is None or body["metadata"].get("deletionTimestamp"):
                return
            self.cache.put(KIND, body, written=True)
            # Signals as the last cycle read them: a burst of spec changes sends no queries.
            self.guarded_pass(client, body)
            self.handled_at[uid] = time.monotonic()

    def resync(self) -> None:
        """Replace the cache with one LIST of each kind (first cycle, then every RESYNC_S)."""
        self.cache.list_began()
        listed = dict(self.client.list_children(self.namespaces))
        self.memo.absent_kinds = self.client.absent_kinds  # no LeaderWorkerSet CRD: noted
        for body in self.client.list_specservers(self.namespaces):
            meta = body["metadata"]
            listed[(KIND, meta["namespace"], meta["name"])] = body
        self.cache.replace(listed)

    def run_once(self) -> int:
        """One cycle over every SpecServer; returns how many passes succeeded."""
        cpu = time.thread_time()
        started = time.perf_counter()
        if self.cache.needs_resync():
            self.resync()
        taken_at = time.monotonic()
        bodies = self.cache.specservers()
        self.refresh_grants(bodies)
        client = CachedClient(self.client, self.cache, grants=self.grants)
        urls = {prometheus_url(b, self.settings.prometheus_url) for b in bodies}
        caches = [self.signal_cache(url) for url in urls]
        refresh_all([c for c in caches if c is not None], SIGNAL_WAIT_S)
        opmetrics.count_query_errors(sum(c.query_errors for c in self.signals.values()))
        done = 0
        writing: list[Future[bool]] = []
        for snapshot in bodies:
            meta = snapshot["metadata"]
            if meta.get("deletionTimestamp"):
                continue
            if not self.still_leading():
                break  # the lease could not be renewed: another replica may lead now
            if not self.faults.due(meta["uid"], meta.get("generation"), time.monotonic()):
                continue  # failing: backing off (a new generation is retried at once)
            with self.lock(meta["uid"]):
                if self.handled_at.get(meta["uid"], 0.0) > taken_at:
                    continue  # a handler wrote after our snapshot: our copy is older
                body = self.cache.get(KIND, meta["namespace"], meta["name"]) or snapshot
                step = functools.partial(self._pass, client, body, self.writers > 0)
                ok, rest = self._guarded(client, body, step)
            if rest is None:
                done += ok
            else:
                args = (client, body, rest, time.monotonic())
                writing.append(self._writer_pool().submit(self._write_later, *args))
        done += sum(future.result() for future in writing)
        live = {b["metadata"]["uid"] for b in bodies}
        opmetrics.retain({(b["metadata"]["namespace"], b["metadata"]["name"]) for b in bodies})
        self.forget(live)
        self.faults.forget(live)
        self.memo.prune(
            {(b["metadata"]["uid"], b["metadata"].get("generation") or 0) for b in bodies}
        )
        heaptrim.release_free_pages()  # the pages this cycle freed (10-25 ms at 1,000)
        opmetrics.CYCLES.inc()
        opmetrics.CYCLE_SPECSERVERS.set(len(bodies))
        opmetrics.CYCLE_CPU.inc(time.thread_time() - cpu)
        opmetrics.CYCLE_DURATION.observe(time.perf_counter() - started)
        self.completed_at = time.monotonic()
        return done

    def refresh_grants(self, bodies: list[dict[str, Any]]) -> None:
        """Keep the Secret grants' book (secretgrants.keep; deletions only while leading)."""
        if self.settings.require_secret_approval:
            secretgrants.keep(self.grants, self.client, bodies, self.namespaces, self.leading())

    def healthy(self, interval_s: float, intervals: int = 4) -> bool:
        """Whether a cycle completed within the last few intervals (the liveness probe)."""
        return time.monotonic() - self.completed_at <= max(30.0, intervals * interval_s)

    def forget(self, live: set[str]) -> None:
        """Drop locks and marks of SpecServers that no longer exist."""
        with self.guard:
            for uid in [u for u in self.locks if u not in live]:
                self.locks.pop(uid, None)
                self.handled_at.pop(uid, None)
                self.last_retry.pop(uid, None)

    def run_forever(self, stop: threading.Event, interval_s: float) -> None:
        """Cycle every ``interval_s`` until ``stop`` is set; a failed cycle is logged, not fatal."""
        while not stop.is_set():
            started = time.monotonic()
            try:
                if self.elector is None or self.elector.try_lead():
                    self.run_once()
                else:
                    self.standby()
            except Exception:  # the loop must outlive any one bad cycle
                opmetrics.CYCLE_ERRORS.inc()
                log.exception("observation cycle failed")
            stop.wait(max(0.5, interval_s - (time.monotonic() - started)))
        if self.elector is not None:
            self.elector.release()

    def leading(self) -> bool:
        """Whether this replica may write (always, without leader election)."""
        return self.elector is None or self.elector.leading()

    def still_leading(self) -> bool:
        """``leading``, renewing the lease when it is due: a long cycle (or its writes, which
        the cycle thread waits for) must not outlast the lease it holds."""
        return self.leading() or (self.elector is not None and self.elector.try_lead())

    def standby(self) -> None:
        """A replica that does not lead: keep the cache warm, write nothing, stay healthy while
        its election round gets the API server's answer. A round that could not (unreachable,
        timed out, 5xx) completes no cycle: through a long API outage ``/healthz`` fails
        steadily, as the leader's does, instead of answering 200 once the lease has lapsed."""
        self.cache.synced_at = None  # LIST afresh on taking over
        self.memo.own_status.clear()  # the leader writes status meanwhile: read it afresh
        if self.elector is None or self.elector.answered:
            self.completed_at = time.monotonic()
