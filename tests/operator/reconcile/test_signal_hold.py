"""A Prometheus that fails for a while (a timeout on a loaded machine) rewrites no status: the
last good observations stand in for up to ``signals.HOLD_S``, ageing as they wait, and a
stale spell writes its condition once (signals.py, autopilot.py).

The Prometheus is a real loopback HTTP server answering the query API (or 503)."""

from __future__ import annotations

import copy
import dataclasses
import json
import time
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import pytest
from operatorfakes import STEADY, FakeClient, Signals, cycle

from loopbackhttp import Answer, serve, stop
from specserver_operator.reconcile import controller, signals
from specserver_operator.reconcile.signals import SignalCache

pytestmark = pytest.mark.cluster


class FakePrometheus:
    """Answers every instant query with one series for llm/x (value 1.0), or 503 when down."""

    def __init__(self) -> None:
        self.down = False
        self.queries: list[str] = []
        self.timeouts: list[str] = []
        self.server, self.url = serve(self.answer)

    def answer(self, path: str, _headers: dict[str, str]) -> Answer:
        params = parse_qs(urlsplit(path).query)
        self.queries.append(params["query"][0])
        self.timeouts.append(params["timeout"][0])
        if self.down:
            return 503, {}, b""
        series = {"metric": {"namespace": "llm", "specserver": "x"}, "value": [0, "1"]}
        body = json.dumps({"status": "success", "data": {"result": [series]}}).encode()
        return 200, {"Content-Type": "application/json"}, body


@pytest.fixture
def prom() -> Iterator[FakePrometheus]:
    server = FakePrometheus()
    yield server
    stop(server.server)


def test_a_failed_refresh_holds_the_last_good_observations_ageing(prom: FakePrometheus) -> None:
    cache = SignalCache(prom.url, min_interval_s=0, allowed=(prom.url,))
    cache.refresh(now=1000.0)
    good = cache.get("llm", "x", now=1000.0)
    assert good is not None and good.age_s == 1.0 and cache.last_error is None
    prom.down = True
    cache.refresh(now=1030.0)
    assert cache.last_error and "503" in cache.last_error and cache.query_errors == 1
    held = cache.get("llm", "x", now=1040.0)
    assert held is not None and held.running == 1.0
    assert held.age_s == 1.0 + 40.0  # as old as the sample really is by now
    # Prometheus answers again: fresh observations, no longer aged.
    prom.down = False
    cache.refresh(now=1050.0)
    fresh = cache.get("llm", "x", now=1060.0)
    assert fresh is not None and fresh.age_s == 1.0 and cache.last_error is None


def test_prometheus_is_asked_to_stop_when_the_refresh_budget_ends(prom: FakePrometheus) -> None:
    """One budget for the set (a loaded Prometheus took 11.6 s for the ten signals of a
    thousand SpecServers), and Prometheus stops evaluating when we stop waiting."""
    cache = SignalCache(prom.url, min_interval_s=0, allowed=(prom.url,))
    cache.refresh()
    assert len(prom.timeouts) == 11 and signals.QUERY_BUDGET_S >= 20  # one per signal
    assert prom.timeouts[0] == f"{signals.QUERY_BUDGET_S:.0f}s"
    assert all(1 <= int(t.rstrip("s")) <= signals.QUERY_BUDGET_S for t in prom.timeouts)


def test_an_outage_longer_than_the_hold_empties_the_cache(prom: FakePrometheus) -> None:
    cache = SignalCache(prom.url, min_interval_s=0, allowed=(prom.url,))
    cache.refresh(now=1000.0)
    prom.down = True
    cache.refresh(now=1000.0 + signals.HOLD_S)
    assert cache.get("llm", "x") is not None
    cache.refresh(now=1001.0 + signals.HOLD_S)
    assert cache.get("llm", "x") is None and cache.query_errors == 2
    assert cache.last_error and "503" in cache.last_error  # what the policy reports now


def test_a_blip_within_the_hold_rewrites_no_status(prom: FakePrometheus) -> None:
    """The controller over a held cache: MetricsAvailable stays True, nothing is written, and
    the held sample is not evaluated again (the policy would count it twice); once it is older
    than staleAfterSeconds the condition flips, once."""
    controller.clear_caches()
    client = FakeClient()
    cache = SignalCache(prom.url, min_interval_s=0, allowed=(prom.url,))
    cache.refresh()
    for t in range(3):  # settle
        cycle(client, cache, 2000 + 6 * t)  # type: ignore[arg-type]
    writes, status = client.writes, copy.deepcopy(client.status)
    prom.down = True
    cache.refresh()
    for t in range(3, 6):
        cycle(client, cache, 2000 + 6 * t)  # type: ignore[arg-type]
    assert client.writes == writes and client.status == status
    metrics = next(c for c in client.status["conditions"] if c["type"] == "MetricsAvailable")
    assert metrics["status"] == "True"
    # Still failing, and the held sample is now older than staleAfterSeconds (120 s).
    key = ("llm", "x")
    cache.observations[key] = dataclasses.replace(cache.observations[key], ts=time.time() - 200)
    for t in range(6, 9):
        cycle(client, cache, 2000 + 6 * t)  # type: ignore[arg-type]
    metrics = next(c for c in client.status["conditions"] if c["type"] == "MetricsAvailable")
    # The reason names the cause (Prometheus keeps failing), the message both.
    assert (metrics["status"], metrics["reason"]) == ("False", "PrometheusUnavailable")
    assert "503" in metrics["message"] and "staleAfterSeconds" in metrics["message"]
    assert client.status["lastDecisionReason"] == "MetricsStale"
    assert client.writes == writes + 1


def test_a_stale_spell_writes_its_condition_once() -> None:
    client = FakeClient()
    cycle(client, Signals(**STEADY), 1000)
    cycle(client, Signals(**dict(STEADY, age_s=500.0)), 1010)
    metrics = next(c for c in client.status["conditions"] if c["type"] == "MetricsAvailable")
    assert (metrics["status"], metrics["reason"]) == ("False", "Stale")
    assert "staleAfterSeconds (120s)" in metrics["message"]
    writes = client.writes
    for k, age in enumerate((506.0, 512.0, 518.0)):  # older each evaluation
        cycle(client, Signals(**dict(STEADY, age_s=age)), 1016 + 6 * k)
    assert client.writes == writes


def test_the_rates_span_the_operator_wide_signal_window(
    prom: FakePrometheus, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPECSERVER_SIGNAL_WINDOW_SECONDS sets the range of every rate the operator asks for
    (the quantiles and output tokens/s), and a quarter of it the running gauge's maximum; 60 s
    when unset."""
    SignalCache(prom.url, min_interval_s=0, allowed=(prom.url,)).refresh()
    # the five rates and the draft steps' maximum (sglang:spec_num_steps over the window)
    assert sum("[60s]" in q for q in prom.queries) == 6
    assert sum("max_over_time(" in q and "[15s]" in q for q in prom.queries) == 1
    prom.queries.clear()
    monkeypatch.setenv("SPECSERVER_SIGNAL_WINDOW_SECONDS", "20")
    SignalCache(prom.url, min_interval_s=0, allowed=(prom.url,)).refresh()
    rates = [q for q in prom.queries if "rate(" in q]
    assert len(rates) == 5 and all("[20s]" in q for q in rates)
    assert sum("max_over_time(" in q and "[5s]" in q for q in prom.queries) == 1
    assert not any("[60s]" in q or "[1m]" in q for q in prom.queries)
    assert sum("spec_num_steps" in q and "[20s]" in q for q in prom.queries) == 1
