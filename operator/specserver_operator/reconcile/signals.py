"""The only Prometheus I/O: one PromQL query per signal per cycle, for all SpecServers at once.

``SignalCache.refresh`` runs the grouped queries of ``specserver_advisor.policy.promql`` (which
match both ``sglang:`` and ``sglang_`` names) and keeps one ``Observation`` per (namespace, name);
the shared cycle (cycle.py) reads from it. The number of queries does not grow with the number
of SpecServers. A failed refresh is counted; the last good observations stand in for up to
``HOLD_S`` (their ``age_s`` growing with the time since they were read, so a SpecServer whose
``staleAfterSeconds`` passes sees them as stale), after which the cache is emptied and the
policy reads the error (``PrometheusUnavailable``). One timeout of a loaded Prometheus
therefore flips no condition and rewrites no status.

Only Prometheus URLs the cluster admin allowed are queried (``allowed_urls``: the operator-wide
``SPECSERVER_PROMETHEUS_URL`` and ``SPECSERVER_PROMETHEUS_ALLOWED_URLS``); a SpecServer's own
``prometheusUrl`` elsewhere is never contacted. Queries go through the advisor's outbound rules
(http(s) only, no redirects to other origins with credentials) and an error is a status code and
a fixed reason: nothing a Prometheus (or anything posing as one) answers reaches a condition.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode, urlsplit

from specserver_advisor.loaders import outbound
from specserver_advisor.policy.model import Observation
from specserver_advisor.policy.promql import signal_queries
from specserver_operator import settings
from specserver_operator.metrics.registry import PROMETHEUS_QUERIES


def allowed_urls(env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The Prometheus URLs the admin allowed: ``SPECSERVER_PROMETHEUS_URL`` and the
    comma-separated ``SPECSERVER_PROMETHEUS_ALLOWED_URLS``."""
    env = os.environ if env is None else env
    listed = env.get("SPECSERVER_PROMETHEUS_ALLOWED_URLS", "").split(",")
    urls = [env.get("SPECSERVER_PROMETHEUS_URL", ""), *listed]
    return tuple(dict.fromkeys(u.strip() for u in urls if u.strip()))


def _normal(url: str) -> str:
    scheme, host, port = outbound.origin(url)
    return f"{scheme}://{host}:{port}{urlsplit(url).path.rstrip('/')}"


def url_refusal(url: str, allowed: tuple[str, ...]) -> str | None:
    """Why the operator will not query ``url`` (None when it will): a fixed sentence."""
    problem = outbound.url_problem(url)
    if problem:
        return f"Prometheus URL refused: {problem}"
    if _normal(url) not in {_normal(a) for a in allowed if not outbound.url_problem(a)}:
        return (
            f"Prometheus {outbound.redact(url)} is not on the operator's allow-list "
            "(SPECSERVER_PROMETHEUS_ALLOWED_URLS); it is not queried"
        )
    return None


class QueryError(RuntimeError):
    """A query failed; the message is fixed text (never the answer's body)."""


def query(url: str, promql: str, timeout_s: float = 10.0) -> list[dict[str, Any]]:
    """One instant query: the result vector (raises QueryError)."""
    # Prometheus gives up when we would (it stops evaluating a query nobody waits for).
    wait = f"{max(1, math.ceil(timeout_s))}s"
    target = f"{url.rstrip('/')}/api/v1/query?" + urlencode({"query": promql, "timeout": wait})
    try:
        answer = outbound.get(target, timeout=timeout_s)
    except outbound.OutboundError as exc:
        raise QueryError(str(exc)) from exc
    try:
        data = json.loads(answer.body)
        result = data["data"]["result"] if data.get("status") == "success" else None
    except (ValueError, TypeError, KeyError, AttributeError):
        result = None
    if not isinstance(result, list):
        raise QueryError(f"{outbound.redact(url)}: not a Prometheus query answer")
    return result


#: Total seconds one refresh (all grouped queries to one Prometheus) may take. It runs on its
#: own thread (the cycle waits SIGNAL_WAIT_S at most), so the budget bounds a tarpit, not the
#: cycle: at 1,000 SpecServers the four histogram quantiles took 1.7-4.2 s each (11.6 s in all)
#: on a loaded 2-core machine, and a 10 s budget failed nearly every refresh.
QUERY_BUDGET_S = 30.0
#: Longest the last good observations stand in for a Prometheus whose queries fail (the
#: default ``staleAfterSeconds``): a blip flips nothing, an outage is reported.
HOLD_S = 120.0


def refresh_all(caches: list[SignalCache], wait_s: float) -> None:
    """Refresh every cache at once, waiting at most ``wait_s`` in total for their answers; a
    Prometheus that has not answered by then leaves its previous observations in place."""
    deadline = time.monotonic() + wait_s
    for thread in [t for c in caches if (t := c.refresh_in_background()) is not None]:
        thread.join(max(0.0, deadline - time.monotonic()))


@dataclass
class SignalCache:
    """The newest observations per SpecServer and how fresh they are."""

    url: str
    min_interval_s: float = 5.0
    observations: dict[tuple[str, str], Observation] = field(default_factory=dict)
    refreshed_at: float = 0.0
    last_error: str | None = None
    query_errors: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    allowed: tuple[str, ...] = field(default_factory=allowed_urls)
    running: threading.Thread | None = None
    #: when the observations were read (time.time); they are held while queries fail
    good_at: float = 0.0
    held: bool = False
    #: range of the rates in the queries (``SPECSERVER_SIGNAL_WINDOW_SECONDS``)
    window_s: int = field(default_factory=settings.signal_window_seconds)

    def __post_init__(self) -> None:
        self.last_error = url_refusal(self.url, self.allowed)

    def refresh(self, now: float | None = None) -> None:
        """Run the grouped queries if the last refresh is older than ``min_interval_s``.

        The queries run outside the lock: readers (``get``) never wait on Prometheus.
        """
        now = time.time() if now is None else now
        refusal = url_refusal(self.url, self.allowed)
        with self.lock:
            if refusal:
                self.observations, self.last_error, self.held = {}, refusal, False
                return
            if now - self.refreshed_at < self.min_interval_s:
                return
            self.refreshed_at = now
        try:
            found, error = self._query(now), None
        except QueryError as exc:
            found, error = {}, f"Prometheus query failed: {exc}"
        with self.lock:
            self.last_error = error
            if error is None:
                self.observations, self.good_at, self.held = found, now, False
                return
            self.query_errors += 1
            self.held = bool(self.observations) and now - self.good_at <= HOLD_S
            if not self.held:
                self.observations = {}

    def _query(self, now: float) -> dict[tuple[str, str], Observation]:
        deadline = time.monotonic() + QUERY_BUDGET_S  # one budget for the whole set
        out: dict[tuple[str, str], Observation] = {}
        for field_name, promql in signal_queries(window=f"{self.window_s}s").items():
            PROMETHEUS_QUERIES.inc()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise QueryError(f"not answered within {QUERY_BUDGET_S:g}s")
            for item in query(self.url, promql, remaining):
                labels = item.get("metric", {}) if isinstance(item, dict) else {}
                key = (str(labels.get("namespace", "")), str(labels.get("specserver", "")))
                if not all(key):
                    continue
                try:
                    value = float(item["value"][1])
                except (KeyError, IndexError, TypeError, ValueError):
                    continue
                obs = out.setdefault(key, Observation(ts=now))
                setattr(obs, field_name, value if math.isfinite(value) else None)
        return out

    def refresh_in_background(self) -> threading.Thread | None:
        """Start ``refresh`` on its own thread unless one is still running (a slow Prometheus
        then holds only its own thread, never the cycle)."""
        with self.lock:
            due = time.time() - self.refreshed_at >= self.min_interval_s
            if not due or (self.running is not None and self.running.is_alive()):
                return None
            self.running = threading.Thread(
                target=self.refresh, name=f"signals {self.url}", daemon=True
            )
            self.running.start()
            return self.running

    def get(self, namespace: str, name: str, now: float | None = None) -> Observation | None:
        """The newest observation of one SpecServer's engines (None: none). While queries fail
        and the last good ones are held, their ``age_s`` counts the time since they were read."""
        with self.lock:
            found = self.observations.get((namespace, name))
            if found is None or not self.held or found.age_s is None:
                return found
        waited = max(0.0, (time.time() if now is None else now) - found.ts)
        return dataclasses.replace(found, age_s=found.age_s + waited)
