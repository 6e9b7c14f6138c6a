"""Outbound calls have a total deadline, not a per-read timeout: a tarpit that accepts and
never answers, or drips a byte every second, costs its caller the budget and no more. The
tarpits are real loopback HTTP servers."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from loopbacktcp import Drip, Listener, Tarpit
from specserver_advisor.loaders.configs import ConfigNotFoundError, fetch_from_endpoint
from specserver_operator.kube import deadline as calldeadline
from specserver_operator.reconcile import signals
from specserver_operator.reconcile.signals import SignalCache, refresh_all


@pytest.fixture(params=["silent", "drip"])
def tarpit(request: pytest.FixtureRequest) -> Iterator[Listener]:
    """An endpoint that accepts and never answers, or drips a body byte every half second."""
    pit = Tarpit() if request.param == "silent" else Drip(0.5)
    yield pit
    pit.close()


def test_a_config_endpoint_tarpit_is_a_config_error_within_the_budget(tarpit: Listener) -> None:
    started = time.monotonic()
    with pytest.raises(ConfigNotFoundError):
        fetch_from_endpoint(tarpit.url, "org/model", None, "config.json", None, timeout=1.5)
    # Without the budget a tarpit holds it for ever; the slack is a loaded CI machine's.
    assert time.monotonic() - started < 5.0


def test_a_prometheus_tarpit_holds_neither_the_cycle_nor_the_readers(
    tarpit: Listener, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(signals, "QUERY_BUDGET_S", 6.0)
    cache = SignalCache(tarpit.url, min_interval_s=0, allowed=(tarpit.url,))
    started = time.monotonic()
    refresh_all([cache], wait_s=0.5)
    # The cycle waited its share (0.5 s, with a loaded machine's slack), not the query's 6 s.
    assert time.monotonic() - started < 3.0
    assert cache.get("ns", "x") is None  # and a reader is not blocked by the running query
    assert cache.running is not None
    cache.running.join(15)
    assert not cache.running.is_alive()  # the query itself gave up at its own budget
    assert cache.last_error and cache.query_errors == 1


def test_a_within_block_ends_every_call_in_it_by_its_own_end() -> None:
    """``Watchdog.within`` (the Lease elector's round): calls inside end by the block's end,
    nested blocks keep the earliest end, and a call after the block gets its own budget."""
    watchdog = calldeadline.Watchdog()
    with watchdog.within(2.0):
        with watchdog.call(60.0) as call:
            assert 1.5 < call.budget_s <= 2.0
        with watchdog.within(30.0), watchdog.call(60.0) as inner:
            assert inner.budget_s <= 2.0  # the outer block ends first
        with watchdog.call(1.0) as short:
            assert short.budget_s <= 1.0  # a call's own budget still holds when it is shorter
    with watchdog.call(60.0) as after:
        assert after.budget_s == pytest.approx(60.0, abs=0.01)
