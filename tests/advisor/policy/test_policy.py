"""The auto-speculation policy: every reason reachable, hysteresis, dwell, budget, overrides."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specserver_advisor.models import AutoSpeculation
from specserver_advisor.policy.decide import decide
from specserver_advisor.policy.model import (
    OFF,
    ON,
    Decision,
    Observation,
    PolicyContext,
    PolicyState,
    band_of,
)

# Crossover 20 at accept 2.5 (30 at 3.5); speculation stops paying below accept 1.3.
CTX = PolicyContext([(1.0, 0.0), (1.5, 10.0), (2.5, 20.0), (3.5, 30.0)], 1.3, 2.5)
FAST = AutoSpeculation(
    disable_after_breaches=2,
    enable_after_passes=3,
    min_dwell_seconds=300,
    max_switches_per_hour=4,
    explore=False,
)


def obs(ts: float, **kw: Any) -> Observation:
    base: dict[str, Any] = {
        "mode": None,
        "accept_length": 2.5,
        "ttft_p99_s": 1.0,
        "running": 4,
        "queued": 0,
        "output_tok_s": 100.0,
        "age_s": 5,
    }
    base.update(kw)
    return Observation(ts=ts, **base)


def run(
    observations: list[Observation],
    policy: AutoSpeculation = FAST,
    state: PolicyState | None = None,
    **kw: Any,
) -> tuple[list[Decision], PolicyState]:
    state = state or PolicyState(mode=ON)
    out = []
    for o in observations:
        d, state = decide(o, state, policy, CTX, **kw)
        out.append(d)
    return out, state


def last(observations: list[Observation], **kw: Any) -> Decision:
    return run(observations, **kw)[0][-1]


@pytest.mark.parametrize(
    ("signal", "reason"),
    [
        ({"accept_length": 1.1}, "AcceptLengthLow"),
        ({"ttft_p99_s": 9.0, "queued": 2}, "TTFTSLOBreached"),
        ({"running": 30}, "LoadAboveCrossover"),
    ],
)
def test_disable_reasons_after_consecutive_breaches(signal: dict[str, Any], reason: str) -> None:
    decisions, state = run([obs(t, **signal) for t in (1000, 1030)])
    assert [d.reason for d in decisions] == ["BreachPending", reason]
    assert decisions[-1].action == "disable" and state.mode == OFF


def test_queue_building() -> None:
    policy = FAST.model_copy(update={"ttft_p99_slo_seconds": 100.0})
    observations = [obs(1000 + 30 * i, queued=1 + i, running=8) for i in range(6)]
    decisions, _ = run(observations, policy=policy)
    assert "QueueBuilding" in [d.reason for d in decisions]


def test_enable_below_crossover_slowly() -> None:
    state = PolicyState(mode=OFF, last_accept=2.5)
    decisions, state = run(
        [obs(1000 + 30 * i, accept_length=None, running=5) for i in range(3)], state=state
    )
    assert [d.reason for d in decisions] == ["EnablePending", "EnablePending", "LoadBelowCrossover"]
    assert state.mode == ON


def test_dead_band_holds_both_ways() -> None:
    # Crossover 20, band 15%: off above 23, on below 17; 18..22 holds either mode.
    for load in (18, 20, 22):
        on, _ = run([obs(1000 + 30 * i, running=load) for i in range(5)])
        assert all(d.action == "keep" for d in on), load
        off, _ = run(
            [obs(1000 + 30 * i, running=load, accept_length=None) for i in range(8)],
            state=PolicyState(mode=OFF, last_accept=2.5),
        )
        assert all(d.action == "keep" for d in off), load


def test_no_data_stale_or_nan_holds_the_mode() -> None:
    for bad in ({"running": None}, {"queued": math.nan}, {"age_s": 500}, {"age_s": None}):
        decisions, state = run([obs(1000 + 30 * i, accept_length=1.0, **bad) for i in range(5)])
        assert {d.reason for d in decisions} == {"MetricsStale"}
        assert state.mode == ON and state.switch_times == []


def test_dwell_time_and_switch_budget() -> None:
    _, state = run([obs(t, running=30) for t in (1000, 1030)])
    assert state.mode == OFF and state.last_switch == 1030
    state.enable_passes = FAST.enable_after_passes - 1
    held, _ = decide(obs(1100, accept_length=None, running=2), state, FAST, CTX)
    assert held.reason == "DwellTime" and held.action == "keep"
    assert held.would == "enable:LoadBelowCrossover"
    busy = PolicyState(
        mode=ON, switch_times=[100.0, 400.0, 700.0, 1000.0], last_switch=1000.0, disable_breaches=5
    )
    d, _ = decide(obs(1400, accept_length=1.1), busy, FAST, CTX)
    assert d.reason == "SwitchBudgetExhausted" and d.action == "keep"


def test_manual_mode_and_pause_override_everything() -> None:
    d, state = decide(obs(1000), PolicyState(mode=ON), FAST, CTX, spec_mode="Disabled")
    assert (d.action, d.reason, state.mode) == ("disable", "ManualMode", OFF)
    # Honoured at once, even right after a switch and with the budget spent.
    spent = PolicyState(mode=OFF, last_switch=999.0, switch_times=[999.0] * 4)
    d, state = decide(obs(1000, running=None), spent, FAST, CTX, spec_mode="Enabled")
    assert (d.action, d.reason, state.mode) == ("enable", "ManualMode", ON)
    d, _ = decide(obs(1000, accept_length=1.0), PolicyState(mode=ON), FAST, CTX, paused=True)
    assert (d.action, d.reason) == ("keep", "Paused")


def test_dry_run_records_without_acting() -> None:
    policy = FAST.model_copy(update={"dry_run": True})
    decisions, state = run([obs(t, accept_length=1.1) for t in (1000, 1030)], policy=policy)
    assert decisions[-1].reason == "DryRun" and decisions[-1].would == "disable:AcceptLengthLow"
    assert state.mode == ON


def test_learned_crossover_overrides_the_model() -> None:
    # The model says load 25 is above the crossover, but speculation measured faster there.
    state = PolicyState(mode=ON)
    band = band_of(25, 2.5)
    state.bands = {
        band: {
            ON: {"score": 300.0, "n": 5, "at": 900.0},
            OFF: {"score": 200.0, "n": 5, "at": 900.0},
        }
    }
    decisions, state = run(
        [obs(1000 + 30 * i, running=25, output_tok_s=300.0) for i in range(4)], state=state
    )
    assert all(d.action == "keep" for d in decisions)
    assert decisions[-1].thresholds["learned"] == ON
    # ... and the other way round below the crossover.
    state = PolicyState(mode=ON)
    band = band_of(8, 2.5)
    state.bands = {
        band: {
            ON: {"score": 100.0, "n": 5, "at": 900.0},
            OFF: {"score": 200.0, "n": 5, "at": 900.0},
        }
    }
    d = last([obs(1000 + 30 * i, running=8, output_tok_s=100.0) for i in range(2)], state=state)
    assert d.reason == "OtherModeFasterHere" and d.action == "disable"


def test_exploration_says_so_and_keeps_budget() -> None:
    policy = FAST.model_copy(update={"explore": True})
    observations = [obs(1000 + 30 * i, running=16) for i in range(8)]
    decisions, state = run(observations, policy=policy)
    assert [d.reason for d in decisions].count("ExploreOtherMode") == 1
    assert state.mode == OFF and state.exploring


def test_state_round_trips_through_json() -> None:
    _, state = run([obs(1000 + 30 * i, running=5 + i) for i in range(5)])
    text = json.dumps(state.to_json())
    again = PolicyState.from_json(json.loads(text))
    assert again == state
    d1, s1 = decide(obs(2000), state, FAST, CTX)
    d2, s2 = decide(obs(2000), again, FAST, CTX)
    assert d1 == d2 and s1 == s2


def test_observation_json_errors_name_the_problem() -> None:
    with pytest.raises(ValueError, match="ts"):
        Observation.from_json({"running": 3})
    with pytest.raises(ValueError, match="mode"):
        Observation.from_json({"ts": 1, "mode": "sometimes"})
    assert Observation.from_json({"ts": 5, "unknown": 1}).ts == 5


maybe = st.one_of(st.none(), st.just(math.nan), st.floats(0, 80))
observation_lists = st.lists(
    st.fixed_dictionaries(
        {
            "dt": st.integers(1, 400),
            "accept_length": maybe,
            "ttft_p99_s": maybe,
            "running": maybe,
            "queued": maybe,
            "output_tok_s": maybe,
            "age_s": st.one_of(st.none(), st.floats(0, 300)),
            "mode": st.sampled_from([None, ON, OFF]),
        }
    ),
    max_size=120,
)


@settings(max_examples=150, deadline=None)
@given(observation_lists)
def test_never_more_switches_than_the_budget_allows(rows: list[dict[str, Any]]) -> None:
    policy = AutoSpeculation(
        disable_after_breaches=1,
        enable_after_passes=1,
        min_dwell_seconds=0,
        max_switches_per_hour=3,
    )
    state, ts, switches = PolicyState(mode=ON), 0.0, []
    for row in rows:
        ts += row.pop("dt")
        d, state = decide(Observation(ts=ts, **row), state, policy, CTX)
        if d.action != "keep":
            switches.append(ts)
    for t in switches:
        assert len([s for s in switches if t - 3600 < s <= t]) <= 3


@settings(max_examples=60, deadline=None)
@given(observation_lists)
def test_identical_input_gives_identical_decisions(rows: list[dict[str, Any]]) -> None:
    def once() -> list[dict[str, Any]]:
        state, ts, out = PolicyState(mode=ON), 0.0, []
        for row in rows:
            ts += row["dt"]
            fields = {k: v for k, v in row.items() if k != "dt"}
            d, state = decide(Observation(ts=ts, **fields), state, AutoSpeculation(), CTX)
            out.append(json.loads(json.dumps(d.to_json(), default=str)))
        return out

    assert once() == once()


def test_a_switch_that_delivers_less_is_reverted_without_dwelling() -> None:
    # Just switched on (dwell 300 s); at this load and acceptance speculation measured worse.
    band = band_of(8, 2.5)
    state = PolicyState(
        mode=ON,
        last_switch=1000.0,
        mode_since=1000.0,
        switch_times=[1000.0],
        bands={
            band: {
                ON: {"score": 80.0, "n": 3, "at": 1050.0},
                OFF: {"score": 200.0, "n": 9, "at": 900.0},
            }
        },
    )
    policy = FAST.model_copy(update={"disable_after_breaches": 1})
    d, state = decide(obs(1060, running=8, output_tok_s=80.0), state, policy, CTX)
    assert (d.action, d.reason) == ("disable", "SwitchDidNotPay")
    assert state.mode == OFF


def test_a_short_spike_is_not_explored() -> None:
    """Exploring needs the load to hold its band for 2 x MIN_SAMPLES consecutive cycles."""
    policy = FAST.model_copy(update={"explore": True})
    spikes = []
    for _ in range(4):  # four spikes of 4 cycles at load 16, between quiet stretches at 4
        spikes += [obs(0, running=16)] * 4 + [obs(0, running=4)] * 4
    series = [dataclasses.replace(o, ts=1000 + 30 * i) for i, o in enumerate(spikes)]
    decisions, _ = run(series, policy=policy)
    assert "ExploreOtherMode" not in {d.reason for d in decisions}
    held = [obs(2000 + 30 * i, running=16) for i in range(8)]
    decisions, _ = run(held, policy=policy)
    assert "ExploreOtherMode" in {d.reason for d in decisions}
