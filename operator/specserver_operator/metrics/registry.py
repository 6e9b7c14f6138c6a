"""The operator's own Prometheus metrics (``/metrics`` on ``SPECSERVER_METRICS_PORT``).

Counters are exposed with the ``_total`` suffix (prometheus_client appends it). Series labelled
by SpecServer are removed once their SpecServer is gone (``retain``, called by the cycle), so a
deleted SpecServer does not linger in the dashboard or in alerts.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from specserver_advisor.policy.model import SpecMode
from specserver_operator.metrics.seriesbook import Series

#: ``specserver_speculation_mode`` values: with speculation, without, and no engine at all
#: (invalid spec, nothing deployed yet): distinct, so "off" never hides "not serving".
MODE_ON, MODE_OFF, MODE_NO_ENGINE = 1, 0, -1

REGISTRY = CollectorRegistry()
#: The series labelled by SpecServer are plain values exposed at scrape time (seriesbook.py):
#: a prometheus_client child per series was about 1 KB, three or more per SpecServer.
DECISIONS = Series(
    "specserver_decisions",
    "Auto-speculation decisions.",
    ("namespace", "specserver", "action", "reason"),
    counter=True,
    registry=REGISTRY,
)
MODE = Series(
    "specserver_speculation_mode",
    "1: the engine runs with speculation; 0: without; -1: no engine (invalid or not deployed).",
    ("namespace", "specserver"),
    registry=REGISTRY,
)
READY = Series(
    "specserver_ready",
    "1 when the SpecServer's Ready condition is True, else 0.",
    ("namespace", "specserver"),
    registry=REGISTRY,
)
EVALUATION = Histogram(
    "specserver_evaluation_duration_seconds",
    "Time to evaluate the policy for one SpecServer.",
    registry=REGISTRY,
)
QUERY_ERRORS = Counter(
    "specserver_prometheus_query_errors",
    "Prometheus queries (grouped, one per signal) that failed.",
    registry=REGISTRY,
)
SWITCHES = Series(
    "specserver_switches",
    "Speculation switches that ended, by result (completed, failed, cancelled, blocked; "
    "fellback: retried as Recreate).",
    ("namespace", "specserver", "result"),
    counter=True,
    registry=REGISTRY,
)

SWITCH_BLOCKED = Series(
    "specserver_switch_blocked",
    "1 while a new engine workload of the SpecServer is not Ready for a known cause (reason: "
    "Unschedulable, QuotaExceeded, NotAdmitted, ImagePullBackOff, CrashLoopBackOff).",
    ("namespace", "name", "reason"),
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
ELECTION_ROUNDS = Counter(
    "specserver_election_rounds",
    "Leader-election rounds this replica ran (leading, standing by, or refused its Lease).",
    registry=REGISTRY,
)
LEASE_FORBIDDEN = Gauge(
    "specserver_lease_forbidden",
    "1 while the API server refuses this replica's leader Lease requests (403): it cannot lead.",
    registry=REGISTRY,
)


#: Metrics with ``namespace`` and ``specserver`` labels (their series die with the SpecServer).
PER_SPECSERVER = (DECISIONS, MODE, READY, SWITCHES, SWITCH_BLOCKED)
_QUERY_ERRORS_SEEN = [0]


def mode_value(speculation_mode: str | None) -> int:
    """The gauge value for ``status.speculationMode`` (None: no engine)."""
    if speculation_mode is None:
        return MODE_NO_ENGINE
    return MODE_ON if SpecMode.from_status(speculation_mode).speculative else MODE_OFF


def count_query_errors(total: int) -> None:
    """Advance the query-error counter to ``total`` (the signal caches' running count)."""
    if total > _QUERY_ERRORS_SEEN[0]:
        QUERY_ERRORS.inc(total - _QUERY_ERRORS_SEEN[0])
    _QUERY_ERRORS_SEEN[0] = total


#: Every reason ``specserver_switch_blocked`` has carried (a handful: blocked.py's causes), so
#: that clearing one SpecServer's other reasons costs that handful, not a scan of every series.
_BLOCKED_REASONS: set[str] = set()


def set_blocked(namespace: str, name: str, reason: str | None) -> None:
    """``specserver_switch_blocked``: 1 for ``reason`` (None: not blocked), and no series for
    any other reason of this SpecServer (a cause that is gone is not left at 1)."""
    with SWITCH_BLOCKED.lock:
        for other in _BLOCKED_REASONS - {reason}:
            SWITCH_BLOCKED.values.pop((namespace, name, other), None)
        if reason is not None:
            _BLOCKED_REASONS.add(reason)
    if reason is not None:
        SWITCH_BLOCKED.labels(namespace, name, reason).set(1)


def retain(live: set[tuple[str, str]]) -> int:
    """Remove every per-SpecServer series whose (namespace, name) is not in ``live``.

    Returns:
        How many series were removed.
    """
    removed = 0
    for series in PER_SPECSERVER:
        with series.lock:  # the first two labels are namespace and specserver
            for key in [k for k in series.values if k[:2] not in live]:
                del series.values[key]
                removed += 1
    return removed


def serve(port: int, host: str = "127.0.0.1") -> None:
    """Expose the registry on ``host`` (loopback unless told: the series name every tenant's
    SpecServers; no-op for port 0)."""
    if port:
        start_http_server(port, addr=host, registry=REGISTRY)
