"""The policy learns in closed loop: the L4 context the operator builds, against a world.

The world is the performance model's L4 (the same numbers the policy's prior came from), so
where the measured crossover and the model's signals disagree (a queue that builds at 16 users
while speculation still delivers more) the learned band must win.
"""

from __future__ import annotations

import dataclasses
from functools import cache

import pytest

from specserver_advisor.models import AutoSpeculation
from specserver_advisor.perf import calibration
from specserver_advisor.perf.model import Prediction, predict
from specserver_advisor.perf.plan import Plan, policy_context
from specserver_advisor.policy.autocycle import COUNT_CAP, evaluate
from specserver_advisor.policy.model import ON, Observation, PolicyState, learned_preference

POLICY = AutoSpeculation()
ACCEPT = 2.7


@cache
def l4() -> Plan:
    return calibration.field_plan("l4", [1])


@cache
def world(mode: str, load: int) -> Prediction:
    plan = l4()
    scn = dataclasses.replace(plan.scenario, accept_length=ACCEPT)
    return predict(scn, load, plan.cap_on if mode == ON else plan.cap_off, mode == ON)


def drive(
    series: list[int], policy: AutoSpeculation = POLICY
) -> tuple[list[tuple[int, str, str]], PolicyState]:
    """30 s cycles; a switch leaves 90 s without fresh metrics (the engine restarting).

    Each cycle is the operator's ``autocycle.evaluate``: the state goes through the status JSON
    it stores (a count that is not stored does not grow).
    """
    ctx = policy_context(l4(), policy)
    state, restart, switches = PolicyState(mode=ON), 0.0, []
    stored: PolicyState | None = None
    for i, load in enumerate(series):
        p, up = world(state.mode, load), restart <= 0
        obs = Observation(
            ts=30.0 * (i + 1),
            mode=state.mode,
            accept_length=ACCEPT if state.mode == ON else None,
            ttft_p99_s=p.ttft_p99_ms / 1000,
            running=p.running,
            queued=p.queued,
            output_tok_s=p.output_tok_s if up else None,
            age_s=5.0 if up else 1e9,
        )
        restart -= 30
        decision, state, stored = evaluate(obs, stored, state.mode, obs.ts, policy, ctx)
        if decision.action != "keep":
            switches.append((load, decision.action, decision.reason))
            restart = 90.0
    return switches, state


def learned(state: PolicyState) -> dict[str, str]:
    return {b: m for b in state.bands if (m := learned_preference(state, b) or "")}


@pytest.mark.parametrize(
    "series",
    [
        [40] * 120 + [4] * 120,  # overload, then quiet
        ([40] * 40 + [8] * 40) * 4,  # oscillating
        [2 + i * 30 // 480 for i in range(480)],  # ramp 2 -> 32
    ],
    ids=["overload_then_quiet", "oscillating", "ramp"],
)
def test_learned_bands_activate(series: list[int]) -> None:
    _, state = drive(series)
    bands = learned(state)
    assert set(bands.values()) == {"on", "off"}, bands


def test_measured_band_replaces_the_models_queue_signal() -> None:
    """At 16 users the queue builds (model says off) but speculation delivers more."""
    assert world(ON, 16).output_tok_s > world("off", 16).output_tok_s
    assert world(ON, 16).queued > 0
    switches, state = drive([16] * 200)
    assert switches[:2] == [(16, "disable", "QueueBuilding"), (16, "enable", "SwitchDidNotPay")]
    assert len(switches) == 2  # then it stays on: the learned band holds it
    assert state.mode == ON and "on" in learned(state).values()


def test_a_mode_just_left_for_breaches_is_not_explored_at_the_same_load() -> None:
    """A fast policy leaves speculation after two breaches, so On has fewer samples than
    learning needs; they scored below Off at this load, so Off does not go back to try On."""
    fast = AutoSpeculation(disable_after_breaches=2, enable_after_passes=3, min_dwell_seconds=60)
    assert world(ON, 24).queued > 0
    switches, state = drive([24] * 60, fast)
    assert switches == [(24, "disable", "TTFTSLOBreached")]
    (band,) = state.bands
    assert 0 < state.bands[band][ON]["n"] < 3 and state.mode == "off"


def test_oscillation_uses_the_learned_band_to_come_back() -> None:
    switches, _ = drive(([40] * 40 + [8] * 40) * 4)
    assert ("enable", "OtherModeFasterHere") in [(a, r) for _, a, r in switches]


def test_steady_load_counts_to_the_cap_then_writes_nothing() -> None:
    """The stored state carries the sample counts and band streak the policy compares, up to
    the cap; after that a steady load leaves the stored JSON unchanged (no status write)."""
    ctx = policy_context(l4(), POLICY)
    p = world(ON, 4)
    stored: PolicyState | None = None
    writes = []
    for i in range(40):
        obs = Observation(
            ts=0.0,
            accept_length=ACCEPT,
            ttft_p99_s=p.ttft_p99_ms / 1000,
            running=p.running,
            queued=p.queued,
            output_tok_s=p.output_tok_s,
            age_s=5.0,
        )
        before = stored
        _, state, stored = evaluate(obs, stored, ON, 30.0 * (i + 1), POLICY, ctx)
        writes.append(stored != before)
    (band,) = state.bands
    assert state.bands[band][ON]["n"] >= COUNT_CAP and state.band_streak >= COUNT_CAP
    assert sum(writes) <= COUNT_CAP and not any(writes[COUNT_CAP:])
