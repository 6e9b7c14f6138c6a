"""The only Prometheus I/O: one PromQL query per signal per cycle, for all SpecServers at once.

``SignalCache.refresh`` runs the grouped queries of ``specserver_advisor.promql`` (which match
both ``sglang:`` and ``sglang_`` names) and keeps one ``Observation`` per (namespace, name);
the shared cycle (cycle.py) reads from it. Query failures are counted and leave the cache empty for
that cycle, which the policy reads as stale metrics.
"""

from __future__ import annotations

import json
import math
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from specserver_advisor.loaders.deadline import DeadlineExceededError, get_within
from specserver_advisor.policy import Observation
from specserver_advisor.promql import signal_queries
from specserver_operator.opmetrics import PROMETHEUS_QUERIES

#: Total seconds one refresh (all grouped queries to one Prometheus) may take.
QUERY_BUDGET_S = 10.0


def query_vector(url: str, query: str, budget_s: float) -> list[dict[str, Any]]:
    """An instant PromQL query's result vector, answered within ``budget_s`` in total."""
    params = urllib.parse.urlencode({"query": query, "timeout": f"{max(1, int(budget_s))}s"})
    body = get_within(f"{url.rstrip('/')}/api/v1/query?{params}", budget_s)
    answer = json.loads(body)
    if not isinstance(answer, dict) or answer.get("status") != "success":
        raise ValueError("Prometheus did not answer with a success status")
    data = answer.get("data") or {}
    result = data.get("result") or []
    if data.get("resultType") != "vector" or not isinstance(result, list):
        raise ValueError("not an instant vector")
    return [item for item in result if isinstance(item, dict)]


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
    running: threading.Thread | None = None

    def refresh(self, now: float | None = None) -> None:
        """Run the grouped queries if the last refresh is older than ``min_interval_s``.

        The queries run outside the lock: readers (``get``) never wait on Prometheus.
        """
        now = time.time() if now is None else now
        with self.lock:
            if now - self.refreshed_at < self.min_interval_s:
                return
            self.refreshed_at = now
        try:
            found, error = self._query(now), None
        except Exception as exc:  # HTTP, socket, JSON and deadline errors alike
            found, error = {}, f"Prometheus {self.url}: {exc}"
        with self.lock:
            self.observations, self.last_error = found, error
            self.query_errors += error is not None

    def _query(self, now: float) -> dict[tuple[str, str], Observation]:
        deadline = time.monotonic() + QUERY_BUDGET_S  # one budget for the whole set
        out: dict[tuple[str, str], Observation] = {}
        for field_name, query in signal_queries().items():
            PROMETHEUS_QUERIES.inc()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise DeadlineExceededError(f"queries not answered within {QUERY_BUDGET_S:g}s")
            for item in query_vector(self.url, query, remaining):
                labels = item.get("metric") or {}
                key = (str(labels.get("namespace", "")), str(labels.get("specserver", "")))
                if not all(key):
                    continue
                value = float(item["value"][1])
                obs = out.setdefault(key, Observation(ts=now))
                setattr(obs, field_name, None if not math.isfinite(value) else value)
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

    def get(self, namespace: str, name: str) -> Observation | None:
        with self.lock:
            return self.observations.get((namespace, name))
