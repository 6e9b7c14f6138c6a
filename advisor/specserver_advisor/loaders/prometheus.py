"""Read auto-speculation signals for one SpecServer from Prometheus (range queries).

Thin I/O for ``specserver-advisor replay --prometheus``; the queries come from ``promql.py``.
"""

from __future__ import annotations

import math
import time
from typing import Any

from specserver_advisor.policy.model import Observation, SpecMode
from specserver_advisor.policy.promql import signal_queries

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class PrometheusReadError(RuntimeError):
    """Prometheus could not be queried; the message says which query and why."""


def parse_duration(text: str) -> float:
    """``30s``, ``5m``, ``6h``, ``1d`` -> seconds."""
    text = text.strip()
    if len(text) < 2 or text[-1] not in UNITS:
        raise ValueError(f"duration {text!r}: expected a number and one of s, m, h, d")
    try:
        return float(text[:-1]) * UNITS[text[-1]]
    except ValueError as exc:
        raise ValueError(f"duration {text!r}: {exc}") from exc


def range_observations(
    url: str, namespace: str, name: str, since_s: float, step_s: float, now: float | None = None
) -> list[Observation]:
    """One observation per step over the last ``since_s`` seconds."""
    from prometheus_api_client import PrometheusConnect

    end = now if now is not None else time.time()
    start = end - since_s
    prom = PrometheusConnect(url=url, disable_ssl=True)
    queries = signal_queries({"namespace": namespace, "specserver": name})
    series: dict[str, dict[float, float]] = {}
    for field, query in queries.items():
        try:
            result: list[dict[str, Any]] = prom.custom_query_range(
                query, start_time=_dt(start), end_time=_dt(end), step=f"{int(step_s)}s"
            )
        except Exception as exc:  # the client raises several unrelated types
            raise PrometheusReadError(f"{field}: {query}: {exc}") from exc
        values: dict[float, float] = {}
        for item in result:
            for ts, raw in item.get("values", []):
                value = float(raw)
                if not math.isnan(value):
                    values[float(ts)] = value
        series[field] = values
    stamps = sorted({ts for values in series.values() for ts in values})
    out = []
    for ts in stamps:
        obs = Observation(ts=ts)
        for field, values in series.items():
            setattr(obs, field, values.get(ts))
        obs.mode = SpecMode.of((obs.accept_length or 0) > 0)
        out.append(obs)
    return out


def _dt(ts: float) -> Any:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ts, tz=UTC)
