"""The shared observation cycle: every few seconds, one pass over every SpecServer.

Started by handlers.py at operator start-up (one thread). Each cycle makes one LIST of
SpecServers, one of managed Deployments and one of managed Services, runs the grouped PromQL
queries once per Prometheus (signals.py), then reconciles each SpecServer from that snapshot:
reads cost nothing per object, and an unchanged object costs no write. kopf's create/update
handlers call ``Cycle.reconcile_one`` for an immediate pass on a fresh read; a per-SpecServer
lock keeps the two from interleaving, and a cycle skips an object a handler reconciled after
the cycle's LIST (its snapshot of that object is older than what was just written).
"""

from __future__ import annotations

import datetime
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from specserver_operator import children, controller, opmetrics
from specserver_operator.client import ApiError, KubeClient, NotFoundError
from specserver_operator.signals import SignalCache

log = logging.getLogger("specserver.cycle")

Key = tuple[str, str, str]


def now_iso() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class SnapshotClient(KubeClient):
    """A ``KubeClient`` whose reads of children come from the cycle's LISTs.

    Writes go to the API as usual; what a write returns replaces the snapshot's copy, so a
    second read in the same pass sees it.
    """

    def __init__(self, base: KubeClient, objects: dict[Key, dict[str, Any]]) -> None:
        self.api, self.core, self.apps, self.custom = base.api, base.core, base.apps, base.custom
        self.writes = 0
        self.objects = objects

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get((kind, namespace, name))

    def apply(self, obj: dict[str, Any], desired_hash: str | None = None) -> bool:
        meta = obj["metadata"]
        key = (obj["kind"], meta["namespace"], meta["name"])
        written = self.apply_over(obj, self.objects.get(key), desired_hash)
        if written is not None:
            self.objects[key] = written
        return written is not None

    def delete(self, kind: str, namespace: str, name: str) -> None:
        super().delete(kind, namespace, name)
        self.objects.pop((kind, namespace, name), None)


def prometheus_url(body: dict[str, Any]) -> str | None:
    """The SpecServer's Prometheus (spec.autoSpeculation.prometheusUrl, else the operator's)."""
    auto = (body.get("spec") or {}).get("autoSpeculation") or {}
    url = auto.get("prometheusUrl") if isinstance(auto, dict) else None
    return url or os.environ.get("SPECSERVER_PROMETHEUS_URL") or None


@dataclass
class Cycle:
    """The operator's loop state: the client, what it watches, signal caches, locks."""

    client: KubeClient
    namespaces: list[str] = field(default_factory=list)
    query_interval_s: float = 5.0
    signals: dict[str, SignalCache] = field(default_factory=dict)
    locks: dict[str, threading.Lock] = field(default_factory=dict)
    handled_at: dict[str, float] = field(default_factory=dict)
    guard: threading.Lock = field(default_factory=threading.Lock)

    def lock(self, uid: str) -> threading.Lock:
        with self.guard:
            return self.locks.setdefault(uid, threading.Lock())

    def cache(self, url: str | None) -> SignalCache | None:
        if not url:
            return None
        with self.guard:
            if url not in self.signals:
                self.signals[url] = SignalCache(url, min_interval_s=self.query_interval_s)
            return self.signals[url]

    def _pass(self, client: KubeClient, body: dict[str, Any]) -> None:
        cache = self.cache(prometheus_url(body))
        now = now_iso()
        outcome = controller.reconcile(client, body, now, signals=cache)
        for type_, reason, message in outcome.events:
            client.post_event(body, type_, reason, message, now)
        if outcome.retry:
            log.info(
                "%s/%s: %s", body["metadata"]["namespace"], body["metadata"]["name"], outcome.retry
            )

    def reconcile_one(self, namespace: str, name: str, uid: str) -> None:
        """An immediate pass for one SpecServer on a fresh read (kopf create/update)."""
        with self.lock(uid):
            body = self.client.get_specserver(namespace, name)
            if body is None or body["metadata"].get("deletionTimestamp"):
                return
            cache = self.cache(prometheus_url(body))
            if cache is not None:
                cache.refresh()
            self._pass(self.client, body)
            self.handled_at[uid] = time.monotonic()

    def run_once(self) -> int:
        """One cycle over every SpecServer; returns how many were reconciled."""
        listed_at = time.monotonic()
        cpu = time.thread_time()
        started = time.perf_counter()
        bodies = self.client.list_specservers(self.namespaces)
        snapshot = SnapshotClient(self.client, self.client.list_children(self.namespaces))
        for url in {prometheus_url(b) for b in bodies}:
            cache = self.cache(url)
            if cache is not None:
                cache.refresh()
        opmetrics.QUERY_ERRORS.set(sum(c.query_errors for c in self.signals.values()))
        done = 0
        for body in bodies:
            meta = body["metadata"]
            if meta.get("deletionTimestamp"):
                continue
            with self.lock(meta["uid"]):
                if self.handled_at.get(meta["uid"], 0.0) > listed_at:
                    continue  # a handler wrote after our LIST: our copy is older
                try:
                    self._pass(snapshot, body)
                    done += 1
                except (ApiError, NotFoundError) as exc:
                    opmetrics.CYCLE_ERRORS.inc()
                    log.warning("%s/%s: %s", meta["namespace"], meta["name"], exc)
        self.forget({b["metadata"]["uid"] for b in bodies})
        children.forget({b["metadata"]["uid"] for b in bodies})
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
