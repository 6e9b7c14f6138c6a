"""The operator's own metrics: counter names, the no-engine value, series removed on delete."""

from __future__ import annotations

from prometheus_client import generate_latest

from specserver_operator.metrics import registry as opmetrics


def _exposition() -> str:
    return generate_latest(opmetrics.REGISTRY).decode()


def test_counters_are_exposed_with_total_and_query_errors_is_a_counter() -> None:
    text = _exposition()
    for name in ("decisions", "switches", "prometheus_query_errors", "cycles", "api_writes"):
        assert f"# TYPE specserver_{name}_total counter" in text or (
            f"# TYPE specserver_{name} counter" in text
        ), name
    name = "specserver_prometheus_query_errors_total"
    before = opmetrics.REGISTRY.get_sample_value(name) or 0.0
    opmetrics.count_query_errors(10**6)  # the signal caches' running count
    opmetrics.count_query_errors(10**6 + 3)
    opmetrics.count_query_errors(10**6 + 3)  # unchanged: nothing added
    assert opmetrics.REGISTRY.get_sample_value(name) == before + 10**6 + 3


def test_mode_has_a_distinct_value_for_no_engine() -> None:
    assert opmetrics.mode_value("On") == 1
    assert opmetrics.mode_value("Off") == 0
    assert opmetrics.mode_value(None) == -1


def test_series_of_a_deleted_specserver_are_removed() -> None:
    opmetrics.MODE.labels("ns-a", "gone").set(1)
    opmetrics.DECISIONS.labels("ns-a", "gone", "disable", "TTFTSLOBreached").inc()
    opmetrics.SWITCHES.labels("ns-a", "gone", "succeeded").inc()
    opmetrics.MODE.labels("ns-a", "kept").set(0)
    opmetrics.DECISIONS.labels("ns-a", "kept", "keep", "Steady").inc()
    removed = opmetrics.retain({("ns-a", "kept")})
    assert removed >= 3
    text = _exposition()
    assert 'specserver="gone"' not in text
    assert 'specserver_speculation_mode{namespace="ns-a",specserver="kept"} 0.0' in text
    assert 'specserver="kept"' in text and "Steady" in text
    assert opmetrics.retain({("ns-a", "kept")}) == 0


def test_per_specserver_series_cost_a_dict_entry_not_a_child_object() -> None:
    """A thousand SpecServers' mode, readiness and decision series: under 1 KB each in all
    (prometheus_client's child objects were about 2.1 KB for the three)."""
    import tracemalloc

    names = [f"s{i:04d}" for i in range(1000)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for name in names:
            opmetrics.MODE.labels("ns-size", name).set(1)
            opmetrics.READY.labels("ns-size", name).set(1)
            opmetrics.DECISIONS.labels("ns-size", name, "keep", "Steady").inc()
        per_specserver = (tracemalloc.get_traced_memory()[0] - before) / len(names)
    finally:
        tracemalloc.stop()
    assert (
        opmetrics.REGISTRY.get_sample_value(
            "specserver_decisions_total",
            {"namespace": "ns-size", "specserver": "s0999", "action": "keep", "reason": "Steady"},
        )
        == 1.0
    )
    assert per_specserver < 1000, per_specserver
    assert opmetrics.retain(set()) >= 3000


def test_switch_blocked_keeps_one_reason_per_specserver() -> None:
    values = opmetrics.SWITCH_BLOCKED.values
    opmetrics.set_blocked("ns", "a", "Unschedulable")
    opmetrics.set_blocked("ns", "b", "Unschedulable")
    opmetrics.set_blocked("ns", "a", "QuotaExceeded")  # the cause moved: the old one goes
    assert ("ns", "a", "Unschedulable") not in values
    assert values[("ns", "a", "QuotaExceeded")][0] == 1
    assert values[("ns", "b", "Unschedulable")][0] == 1  # another SpecServer's is kept
    opmetrics.set_blocked("ns", "a", None)
    assert not [k for k in values if k[:2] == ("ns", "a")]
    opmetrics.set_blocked("ns", "b", None)
