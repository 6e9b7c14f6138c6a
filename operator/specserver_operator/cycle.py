"""The shared observation cycle: every few seconds, one pass over every SpecServer.

Started by handlers.py at operator start-up (one thread). Each cycle reads SpecServers and the
children it manages from the watch-fed cache (objectcache.py; a LIST primes it and resyncs it
every few minutes), runs the grouped PromQL queries once per Prometheus (signals.py), then
reconciles each SpecServer: reads cost nothing per object, and an unchanged object costs no
write. kopf's create/update handlers call ``Cycle.reconcile_one`` for an immediate pass on a
fresh read; a per-SpecServer lock keeps the two from interleaving, and a cycle skips an object
a handler reconciled after the cycle took its snapshot.
"""

from __future__ import annotations

import datetime
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from specserver_advisor.models import KIND
from specserver_operator import children, controller, opmetrics
from specserver_operator.client import ApiError, KubeClient, NotFoundError
from specserver_operator.objectcache import ObjectCache
from specserver_operator.signals import SignalCache

log = logging.getLogger("specserver.cycle")


def now_iso() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class CachedClient(KubeClient):
    """A ``KubeClient`` that reads children from the cache (or, ``read_through``, from the API)
    and puts the answer of every write back into it."""

    def __init__(self, base: KubeClient, cache: ObjectCache, read_through: bool = False) -> None:
        self.__dict__.update(base.__dict__)  # the same connection pool and credentials
        self.cache = cache
        self.read_through = read_through

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        if self.read_through:
            found = super().get(kind, namespace, name)
            if found is not None:
                self.cache.put(kind, found)
            return found
        return self.cache.get(kind, namespace, name)

    def apply(self, obj: dict[str, Any], desired_hash: str | None = None) -> bool:
        meta = obj["metadata"]
        current = self.get(obj["kind"], meta["namespace"], meta["name"])
        written = self.apply_over(obj, current, desired_hash)
        if written is not None:
            self.cache.put(obj["kind"], written)
        return written is not None

    def delete(self, kind: str, namespace: str, name: str) -> None:
        super().delete(kind, namespace, name)
        self.cache.remove(kind, namespace, name)

    def patch_status(self, namespace: str, name: str, status: dict[str, Any]) -> dict[str, Any]:
        answer = super().patch_status(namespace, name, status)
        if answer:
            self.cache.put(KIND, answer)
        return answer


def prometheus_url(body: dict[str, Any]) -> str | None:
    """The SpecServer's Prometheus (spec.autoSpeculation.prometheusUrl, else the operator's)."""
    auto = (body.get("spec") or {}).get("autoSpeculation") or {}
    url = auto.get("prometheusUrl") if isinstance(auto, dict) else None
    return url or os.environ.get("SPECSERVER_PROMETHEUS_URL") or None


@dataclass
class Cycle:
    """The operator's loop state: the client, the cache, signal caches, locks."""

    client: KubeClient
    namespaces: list[str] = field(default_factory=list)
    query_interval_s: float = 5.0
    cache: ObjectCache = field(default_factory=ObjectCache)
    signals: dict[str, SignalCache] = field(default_factory=dict)
    locks: dict[str, threading.Lock] = field(default_factory=dict)
    handled_at: dict[str, float] = field(default_factory=dict)
    last_retry: dict[str, str | None] = field(default_factory=dict)
    guard: threading.Lock = field(default_factory=threading.Lock)

    def lock(self, uid: str) -> threading.Lock:
        with self.guard:
            return self.locks.setdefault(uid, threading.Lock())

    def signal_cache(self, url: str | None) -> SignalCache | None:
        if not url:
            return None
        with self.guard:
            if url not in self.signals:
                self.signals[url] = SignalCache(url, min_interval_s=self.query_interval_s)
            return self.signals[url]

    def _pass(self, client: KubeClient, body: dict[str, Any]) -> None:
        cache = self.signal_cache(prometheus_url(body))
        now = now_iso()
        outcome = controller.reconcile(client, body, now, signals=cache)
        for type_, reason, message in outcome.events:
            client.post_event(body, type_, reason, message, now)
        meta = body["metadata"]
        # One log line per change of state, not one per cycle while it lasts.
        if outcome.retry != self.last_retry.get(meta["uid"]):
            if outcome.retry:
                log.info("%s/%s: %s", meta["namespace"], meta["name"], outcome.retry)
            elif self.last_retry.get(meta["uid"]):
                log.info("%s/%s: recovered", meta["namespace"], meta["name"])
            self.last_retry[meta["uid"]] = outcome.retry

    def reconcile_one(self, namespace: str, name: str, uid: str) -> None:
        """An immediate pass for one SpecServer on a fresh read (kopf create/update)."""
        with self.lock(uid):
            client = CachedClient(self.client, self.cache, read_through=True)
            body = client.get_specserver(namespace, name)
            if body is None or body["metadata"].get("deletionTimestamp"):
                return
            self.cache.put(KIND, body)
            # Signals as the last cycle read them: a burst of spec changes sends no queries.
            self._pass(client, body)
            self.handled_at[uid] = time.monotonic()

    def resync(self) -> None:
        """Replace the cache with one LIST of each kind (first cycle, then every RESYNC_S)."""
        listed = dict(self.client.list_children(self.namespaces))
        for body in self.client.list_specservers(self.namespaces):
            meta = body["metadata"]
            listed[(KIND, meta["namespace"], meta["name"])] = body
        self.cache.replace(listed)

    def run_once(self) -> int:
        """One cycle over every SpecServer; returns how many were reconciled."""
        cpu = time.thread_time()
        started = time.perf_counter()
        if self.cache.needs_resync():
            self.resync()
        taken_at = time.monotonic()
        bodies = self.cache.specservers()
        client = CachedClient(self.client, self.cache)
        for url in {prometheus_url(b) for b in bodies}:
            signals = self.signal_cache(url)
            if signals is not None:
                signals.refresh()
        opmetrics.count_query_errors(sum(c.query_errors for c in self.signals.values()))
        done = 0
        for snapshot in bodies:
            meta = snapshot["metadata"]
            if meta.get("deletionTimestamp"):
                continue
            with self.lock(meta["uid"]):
                if self.handled_at.get(meta["uid"], 0.0) > taken_at:
                    continue  # a handler wrote after our snapshot: our copy is older
                body = self.cache.get(KIND, meta["namespace"], meta["name"]) or snapshot
                try:
                    self._pass(client, body)
                    done += 1
                except (ApiError, NotFoundError) as exc:
                    opmetrics.CYCLE_ERRORS.inc()
                    log.warning("%s/%s: %s", meta["namespace"], meta["name"], exc)
        live = {b["metadata"]["uid"] for b in bodies}
        opmetrics.retain({(b["metadata"]["namespace"], b["metadata"]["name"]) for b in bodies})
        self.forget(live)
        children.forget(live)
        controller.prune_caches(
            {(b["metadata"]["uid"], b["metadata"].get("generation") or 0) for b in bodies}
        )
        opmetrics.CYCLES.inc()
        opmetrics.CYCLE_SPECSERVERS.set(len(bodies))
        opmetrics.CYCLE_CPU.inc(time.thread_time() - cpu)
        opmetrics.CYCLE_DURATION.observe(time.perf_counter() - started)
        return done

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
                self.run_once()
            except Exception:  # the loop must outlive any one bad cycle
                opmetrics.CYCLE_ERRORS.inc()
                log.exception("observation cycle failed")
            stop.wait(max(0.5, interval_s - (time.monotonic() - started)))
