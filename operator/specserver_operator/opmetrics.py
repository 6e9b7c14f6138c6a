"""The operator's own Prometheus metrics (``/metrics`` on ``SPECSERVER_METRICS_PORT``)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

REGISTRY = CollectorRegistry()
DECISIONS = Counter(
    "specserver_decisions",
    "Auto-speculation decisions.",
    ["namespace", "specserver", "action", "reason"],
    registry=REGISTRY,
)
MODE = Gauge(
    "specserver_speculation_mode",
    "1 when the engine runs with speculation.",
    ["namespace", "specserver"],
    registry=REGISTRY,
)
EVALUATION = Histogram(
    "specserver_evaluation_duration_seconds",
    "Time to evaluate the policy for one SpecServer.",
    registry=REGISTRY,
)
QUERY_ERRORS = Gauge(
    "specserver_prometheus_query_errors",
    "Prometheus query cycles that failed since start.",
    registry=REGISTRY,
)
SWITCHES = Counter(
    "specserver_switches",
    "Completed speculation switches.",
    ["namespace", "specserver", "result"],
    registry=REGISTRY,
)


def serve(port: int, host: str = "0.0.0.0") -> None:
    """Expose the registry (no-op for port 0)."""
    if port:
        start_http_server(port, addr=host, registry=REGISTRY)
