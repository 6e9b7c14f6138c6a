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

API_WRITES = Counter(
    "specserver_api_writes",
    "Kubernetes API writes (applies, status patches, events, deletes).",
    registry=REGISTRY,
)
PROMETHEUS_QUERIES = Counter(
    "specserver_prometheus_queries",
    "PromQL queries sent (one per signal per cycle, for all SpecServers).",
    registry=REGISTRY,
)
CYCLES = Counter(
    "specserver_cycles",
    "Shared observation cycles run.",
    registry=REGISTRY,
)
CYCLE_CPU = Counter(
    "specserver_cycle_cpu_seconds",
    "CPU time spent in observation cycles (the cycle thread's own time).",
    registry=REGISTRY,
)
CYCLE_DURATION = Histogram(
    "specserver_cycle_duration_seconds",
    "Wall time of one observation cycle over every SpecServer.",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30),
    registry=REGISTRY,
)
CYCLE_SPECSERVERS = Gauge(
    "specserver_cycle_specservers",
    "SpecServers seen by the newest cycle.",
    registry=REGISTRY,
)
CYCLE_ERRORS = Counter(
    "specserver_cycle_errors",
    "Cycles or per-SpecServer passes that failed (the log says why).",
    registry=REGISTRY,
)


#: Metrics with one series per SpecServer (labels start with namespace, specserver).
PER_SPECSERVER = (DECISIONS, MODE, SWITCHES)


def forget(namespace: str, name: str) -> None:
    """Remove every series of a SpecServer that is gone (its labels would live for ever)."""
    for metric in PER_SPECSERVER:
        for labels in [k for k in metric._metrics if k[:2] == (namespace, name)]:
            metric.remove(*labels)


def serve(port: int, host: str = "0.0.0.0") -> None:
    """Expose the registry (no-op for port 0)."""
    if port:
        start_http_server(port, addr=host, registry=REGISTRY)
