"""The only Prometheus I/O: one PromQL query per signal per cycle, for all SpecServers at once.

``SignalCache.refresh`` runs the grouped queries of ``specserver_advisor.promql`` (which match
both ``sglang:`` and ``sglang_`` names) and keeps one ``Observation`` per (namespace, name);
the shared cycle (cycle.py) reads from it. Query failures are counted and leave the cache empty for
that cycle, which the policy reads as stale metrics.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from specserver_advisor.policy import Observation
from specserver_advisor.promql import signal_queries
from specserver_operator.opmetrics import PROMETHEUS_QUERIES


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

    def refresh(self, now: float | None = None) -> None:
        """Run the grouped queries if the last refresh is older than ``min_interval_s``."""
        now = time.time() if now is None else now
        with self.lock:
            if now - self.refreshed_at < self.min_interval_s:
                return
            self.refreshed_at = now
            try:
                self.observations = self._query(now)
                self.last_error = None
            except Exception as exc:  # the client raises several unrelated types
                self.observations = {}
                self.last_error = f"Prometheus {self.url}: {exc}"
                self.query_errors += 1

    def _query(self, now: float) -> dict[tuple[str, str], Observation]:
        from prometheus_api_client import PrometheusConnect

        prom = PrometheusConnect(url=self.url, disable_ssl=True)
        out: dict[tuple[str, str], Observation] = {}
        for field_name, query in signal_queries().items():
            PROMETHEUS_QUERIES.inc()
            result: list[dict[str, Any]] = prom.custom_query(query, params={"timeout": "5s"})
            for item in result:
                labels = item.get("metric", {})
                key = (labels.get("namespace", ""), labels.get("specserver", ""))
                if not all(key):
                    continue
                value = float(item["value"][1])
                obs = out.setdefault(key, Observation(ts=now))
                setattr(obs, field_name, None if math.isnan(value) else value)
        return out

    def get(self, namespace: str, name: str) -> Observation | None:
        with self.lock:
            return self.observations.get((namespace, name))
