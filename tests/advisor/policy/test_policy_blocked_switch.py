"""A switch whose new engine never gets its GPUs: the deadline it is given, and Auto's back-off.

The deadline (``switchcost.switch_deadline_s``) is ``switchTimeoutSeconds`` or derived from
the modelled start-up of the new engine; a switch cancelled at it is recorded with
``autocycle.record_blocked`` (what the operator stores), and ``autocycle.evaluate`` (the
operator's own call each cycle) then holds the switch to that mode (``SwitchBackoff``) with a
back-off that doubles per consecutive blocked attempt, at most an hour. Driven as the operator
drives it, the state stored and reloaded each cycle.
"""

from __future__ import annotations

import itertools
import math

import pytest
from test_policy_switch_cost import CTX, seen  # the same context and signals

from specserver_advisor.gpus import GPUS
from specserver_advisor.launch.multinode import MAX_GPUS_PER_NODE
from specserver_advisor.models import AutoSpeculation, SwitchStrategy
from specserver_advisor.policy.autocycle import (
    BACKOFF_CAP_S,
    evaluate,
    record_blocked,
    record_fell_back,
)
from specserver_advisor.policy.model import (
    NEUTRAL_CONTEXT,
    OFF,
    ON,
    PolicyContext,
    PolicyState,
    learned_preference,
)
from specserver_advisor.policy.switchcost import (
    modelled_startup_s,
    recreate_fallback_allowed,
    restart_seconds,
    switch_deadline_s,
)
from specserver_advisor.replay.fleetworld import base_plan
from specserver_advisor.sglang import memory
from specserver_advisor.structural import MAX_POLICY_SECONDS

BLUE_GREEN = AutoSpeculation.model_validate({"switchStrategy": "BlueGreen"})


# --- the deadline -------------------------------------------------------------------------


@pytest.mark.parametrize("gpu", sorted(GPUS))
def test_the_derived_deadline_outlasts_the_modelled_startup_of_every_shape(gpu: str) -> None:
    """Every GPU of the catalog, one node to the most a replica may span, and the most weights
    a node can hold (all its GPUs' memory): a blocked switch is never given up before the new
    engine could have been Ready, and never waits more than an hour unless the start-up
    itself takes longer."""
    full_node = GPUS[gpu].memory_gib * memory.GIB * MAX_GPUS_PER_NODE
    for nodes in (1, 2, 4, 8, 16, 64):
        for weights in (0.0, full_node / 8, full_node):
            startup = restart_seconds(weights, nodes)
            ctx = PolicyContext([], 1.0, 1.0, restart_s=startup)
            deadline = switch_deadline_s(BLUE_GREEN, ctx)
            assert startup + 300 < deadline <= max(3600, startup + 600), (gpu, nodes, weights)


@pytest.mark.parametrize("gpu", sorted(GPUS))
def test_a_planned_launch_carries_its_startup_into_the_deadline(gpu: str) -> None:
    """The plan's context (what the operator decides with) carries the modelled start-up;
    a larger replica is given longer."""
    from specserver_advisor.perf.plan import policy_context

    ctx = policy_context(base_plan(gpu), BLUE_GREEN)
    assert ctx.restart_s is not None and ctx.restart_s > restart_seconds(0.0)
    assert switch_deadline_s(BLUE_GREEN, ctx) > ctx.restart_s
    group = PolicyContext([], 1.0, 1.0, restart_s=restart_seconds(2e12, 4))
    assert switch_deadline_s(BLUE_GREEN, group) > switch_deadline_s(BLUE_GREEN, ctx)


def test_an_explicit_timeout_wins_and_an_unplanned_launch_still_gets_a_deadline() -> None:
    explicit = AutoSpeculation.model_validate({"switchTimeoutSeconds": 45})
    assert switch_deadline_s(explicit, NEUTRAL_CONTEXT) == 45.0
    unplanned = switch_deadline_s(BLUE_GREEN, NEUTRAL_CONTEXT)
    assert modelled_startup_s(NEUTRAL_CONTEXT) < unplanned <= 3600
    # A hostile or broken context (NaN, negative) falls back to the same modelled pod.
    for junk in (math.nan, -5.0, math.inf):
        ctx = PolicyContext([], 1.0, 1.0, restart_s=junk)
        assert switch_deadline_s(BLUE_GREEN, ctx) == unplanned
    assert AutoSpeculation().switch_timeout_seconds is None
    with pytest.raises(ValueError, match=r"switch_timeout_seconds|switchTimeoutSeconds"):
        AutoSpeculation.model_validate({"switchTimeoutSeconds": 5})
    assert MAX_POLICY_SECONDS >= 3600


# --- the back-off -------------------------------------------------------------------------


class StarvedCluster:
    """The operator's loop on a cluster that never has the GPUs for a standby: evaluations
    every 30 s; a switch waits out its deadline with the old mode serving, then is cancelled
    and recorded (``record_blocked``). Counts the attempts and when each was decided."""

    def __init__(self, policy: AutoSpeculation = BLUE_GREEN, ctx: PolicyContext = CTX) -> None:
        self.policy, self.ctx = policy, ctx
        self.now = 0.0
        self.stored: PolicyState | None = None
        self.attempts: list[float] = []
        self.reasons: list[str] = []

    def run_until(self, end: float, load: int) -> None:
        while self.now < end:
            self.now += 30.0
            decision, state, self.stored = evaluate(
                seen(load), self.stored, ON, self.now, self.policy, self.ctx
            )
            self.reasons.append(decision.reason)
            if decision.action == "keep":
                continue
            assert state.mode == OFF
            self.attempts.append(self.now)
            self.now += switch_deadline_s(self.policy, self.ctx)  # the standby stays Pending
            self.stored = record_blocked(self.stored, ON, OFF, self.now, self.policy, self.ctx)


def test_a_cluster_that_never_has_the_gpus_sees_attempts_at_growing_intervals() -> None:
    cluster = StarvedCluster()
    cluster.run_until(6 * 3600, load=40)  # an overload all day: Auto wants speculation off
    deadline = switch_deadline_s(cluster.policy, cluster.ctx)
    attempts = cluster.attempts
    gaps = [b - a for a, b in itertools.pairwise(attempts)]
    # Each gap is the deadline waited plus the back-off: doubling, then capped at an hour.
    assert gaps == sorted(gaps)
    assert gaps[1] >= 2 * gaps[0] - deadline - 60
    assert all(g <= deadline + BACKOFF_CAP_S + 300 for g in gaps)
    per_hour = [sum(h * 3600 <= t < (h + 1) * 3600 for t in attempts) for h in range(6)]
    assert per_hour[0] <= 3 and all(n <= 2 for n in per_hour[1:]), per_hour
    assert sum(per_hour) <= 9
    assert "SwitchBackoff" in cluster.reasons
    state = cluster.stored
    assert state is not None and state.mode == ON
    assert state.blocked_attempts == len(attempts) and state.blocked_mode == OFF


def test_the_back_off_doubles_per_attempt_and_stops_at_an_hour() -> None:
    ctx = PolicyContext([], 1.0, 1.0, restart_s=100.0)
    deadline = switch_deadline_s(BLUE_GREEN, ctx)
    stored: PolicyState | None = None
    now, backoffs = 1000.0, []
    for _ in range(8):
        stored = record_blocked(stored, ON, OFF, now, BLUE_GREEN, ctx)
        assert stored.blocked_until is not None
        backoffs.append(stored.blocked_until - now)
        now = stored.blocked_until + deadline  # retried at once, blocked again
    assert backoffs[:3] == [deadline, 2 * deadline, 4 * deadline]
    assert backoffs[-1] == BACKOFF_CAP_S and max(backoffs) == BACKOFF_CAP_S
    assert stored is not None and stored.blocked_attempts == 8
    # An hour after the last back-off ran out, a blocked switch starts the doubling afresh.
    later = record_blocked(stored, ON, OFF, stored.blocked_until + 3600, BLUE_GREEN, ctx)
    assert later.blocked_attempts == 1


def test_while_backing_off_the_blocked_switch_is_held_explorations_included() -> None:
    cluster = StarvedCluster()
    cluster.run_until(3600, load=40)
    first = cluster.attempts[0]
    after = cluster.reasons[int(first // 30) :]
    assert after.count("SwitchBackoff") > 0
    # Exploration holds too: a state ready to explore Off is held while Off backs off.
    policy = AutoSpeculation.model_validate(
        {"switchStrategy": "BlueGreen", "minDwellSeconds": 0, "explore": True}
    )
    ctx = PolicyContext([(1.0, 12.0), (4.0, 12.0)], 1.3, 2.7)
    stored: PolicyState | None = None
    reasons = []
    for n in range(1, 12):
        decision, _, stored = evaluate(seen(12), stored, ON, 30.0 * n, policy, ctx)
        reasons.append(decision.reason)
    assert "ExploreOtherMode" in reasons  # the world without a blocked switch explores here
    stored = None
    blocked = record_blocked(None, ON, OFF, 0.0, policy, ctx)
    reasons = []
    stored = blocked
    for n in range(1, 12):
        decision, _, stored = evaluate(seen(12), stored, ON, 30.0 * n, policy, ctx)
        reasons.append(decision.reason)
    assert "ExploreOtherMode" not in reasons and "SwitchBackoff" in reasons


def test_a_blocked_attempt_is_not_a_measurement() -> None:
    """The bands learned (and so the learned crossover) are what the old mode served: the
    blocked mode never ran, so it has no samples, and recording a block changes none."""
    cluster = StarvedCluster()
    cluster.run_until(3 * 3600, load=40)
    state = cluster.stored
    assert state is not None and state.bands
    assert all(OFF not in modes for modes in state.bands.values())
    before = {b: learned_preference(state, b) for b in state.bands}
    again = record_blocked(state, ON, OFF, cluster.now, cluster.policy, cluster.ctx)
    assert again.bands == state.bands
    assert {b: learned_preference(again, b) for b in again.bands} == before


def test_a_completed_switch_resets_the_attempts() -> None:
    cluster = StarvedCluster()
    cluster.run_until(3 * 3600, load=40)
    stored = cluster.stored
    assert stored is not None and stored.blocked_attempts >= 3
    # GPUs free up: the switch is decided once the back-off ran out, and lands (Off runs).
    assert stored.blocked_until is not None
    now = stored.blocked_until + 30
    decision, state, stored = evaluate(seen(40), stored, ON, now, cluster.policy, CTX)
    assert decision.action == "disable"
    _, state, stored = evaluate(seen(40), stored, OFF, now + 120, cluster.policy, CTX)
    assert (state.blocked_attempts, state.blocked_until, state.blocked_mode) == (0, None, None)
    assert stored.blocked_attempts == 0
    # The next blocked switch counts from one.
    again = record_blocked(stored, OFF, ON, now + 3000, cluster.policy, CTX)
    assert again.blocked_attempts == 1 and again.blocked_mode == ON


def test_the_recreate_fallback_needs_the_spec_and_the_budget() -> None:
    recreate = AutoSpeculation.model_validate(
        {"switchStrategy": "BlueGreen", "blockedSwitchFallback": "Recreate"}
    )
    one = PolicyState(mode=OFF, switch_times=[100.0])
    assert recreate_fallback_allowed(recreate, one, 1000.0)
    assert not recreate_fallback_allowed(BLUE_GREEN, one, 1000.0)  # Cancel is the default
    full = PolicyState(mode=OFF, switch_times=[100.0, 200.0, 300.0, 400.0])
    assert not recreate_fallback_allowed(recreate, full, 1000.0)
    assert recreate_fallback_allowed(recreate, full, 3800.0)  # an hour on, the budget is back
    fell = record_fell_back(one, ON, OFF, 1000.0)
    assert fell.mode == OFF and fell.switch_times == [100.0, 1000.0]
    assert one.switch_times == [100.0]  # the input is not modified


@pytest.mark.parametrize("strategy", list(SwitchStrategy))
def test_the_back_off_state_round_trips_through_json(strategy: SwitchStrategy) -> None:
    policy = AutoSpeculation.model_validate({"switchStrategy": strategy})
    state = record_blocked(None, ON, OFF, 500.0, policy, CTX)
    again = PolicyState.from_json(state.to_json())
    assert again == state and again.blocked_mode == OFF
