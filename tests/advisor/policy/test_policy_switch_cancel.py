"""A switch whose reason ended before the new engine is Ready is cancelled, where the old mode
still serves (BlueGreen, RollingUpdate), through ``autocycle.reconsider``: the call the operator
makes each cycle while it follows a switch, and fleetsim makes each tick of one. The state goes
through the stored JSON as in the operator.
"""

from __future__ import annotations

import pytest
from test_policy_switch_cost import CTX, seen  # the same context and signals

from specserver_advisor.models import AutoSpeculation, SwitchStrategy
from specserver_advisor.policy.autocycle import evaluate, reconsider
from specserver_advisor.policy.model import OFF, ON, PolicyState

KEEPS_SERVING = [SwitchStrategy.BLUE_GREEN, SwitchStrategy.ROLLING_UPDATE]


def switched(
    strategy: SwitchStrategy, load: int, mode: str = ON, **fields: object
) -> tuple[AutoSpeculation, PolicyState, str, float]:
    """Evaluate ``load`` every 30 s from ``mode`` until the policy switches: (policy, stored
    state, the switch's reason, when it was decided)."""
    policy = AutoSpeculation.model_validate(
        {"switchStrategy": strategy, "minDwellSeconds": 0, **fields}
    )
    stored: PolicyState | None = None
    for n in range(1, 20):
        now = 30.0 * n
        decision, _, stored = evaluate(seen(load), stored, mode, now, policy, CTX)
        if decision.action != "keep":
            return policy, stored, decision.reason, now
    raise AssertionError("no switch")


@pytest.mark.parametrize("strategy", KEEPS_SERVING)
def test_a_switch_off_whose_overload_ended_is_cancelled_while_the_old_mode_serves(
    strategy: SwitchStrategy,
) -> None:
    policy, stored, reason, started = switched(strategy, 40)
    assert reason == "TTFTSLOBreached"
    # The next cycle: On still serves, the burst is over (6 users, nothing queued).
    cancel = reconsider(seen(6), stored, OFF, reason, started, started + 30, policy, CTX)
    assert cancel is not None
    decision, state, new_stored = cancel
    assert (decision.action, decision.reason, decision.mode) == ("enable", "SwitchCancelled", ON)
    assert decision.inputs.cause == "OverloadEnded"
    assert state.mode == ON
    # The cancelled switch counts in the hourly budget and the dwell, as one that landed.
    assert state.switch_times == [started] and state.last_switch == started
    assert new_stored.mode == ON
    assert stored.mode == OFF  # the input is not modified


@pytest.mark.parametrize("strategy", KEEPS_SERVING)
def test_a_switch_is_followed_while_its_reason_holds(strategy: SwitchStrategy) -> None:
    policy, stored, reason, started = switched(strategy, 40)
    later = started + 30
    assert reconsider(seen(40), stored, OFF, reason, started, later, policy, CTX) is None
    # A reading from before the switch, a stale one, or none say nothing about it.
    old = seen(6, age=60.0)
    assert reconsider(old, stored, OFF, reason, started, later, policy, CTX) is None
    stale = seen(6, age=policy.stale_after_seconds + 1)
    assert reconsider(stale, stored, OFF, reason, started, started + 500, policy, CTX) is None
    assert reconsider(None, stored, OFF, reason, started, later, policy, CTX) is None
    # No load at all: nothing is served that either mode would serve better.
    assert reconsider(seen(0), stored, OFF, reason, started, later, policy, CTX) is None


def test_a_recreate_switch_is_never_cancelled() -> None:
    """Under Recreate the old engine is already gone: there is nothing to go back to."""
    policy, stored, reason, started = switched(SwitchStrategy.RECREATE, 40)
    assert reconsider(seen(6), stored, OFF, reason, started, started + 30, policy, CTX) is None


@pytest.mark.parametrize("strategy", KEEPS_SERVING)
def test_a_switch_on_whose_low_load_ended_is_cancelled(strategy: SwitchStrategy) -> None:
    policy, stored, reason, started = switched(strategy, 6, mode=OFF)
    assert reason == "LoadBelowCrossover"
    assert reconsider(seen(8), stored, ON, reason, started, started + 30, policy, CTX) is None
    cancel = reconsider(seen(40), stored, ON, reason, started, started + 30, policy, CTX)
    assert cancel is not None
    decision, state, _ = cancel
    assert (decision.action, decision.inputs.cause, state.mode) == (
        "disable",
        "OverloadReturned",
        OFF,
    )


@pytest.mark.parametrize("reason", ["ExploreOtherMode", "AcceptLengthLow", "SwitchDidNotPay"])
def test_only_a_switch_decided_on_load_is_cancelled_by_load(reason: str) -> None:
    policy, stored, _, started = switched(SwitchStrategy.BLUE_GREEN, 40)
    assert reconsider(seen(6), stored, OFF, reason, started, started + 30, policy, CTX) is None


def test_the_cancelled_switch_spends_the_hourly_budget() -> None:
    """With one switch an hour, the next overload after a cancelled switch stays On."""
    policy, stored, reason, started = switched(SwitchStrategy.BLUE_GREEN, 40, maxSwitchesPerHour=1)
    cancel = reconsider(seen(6), stored, OFF, reason, started, started + 30, policy, CTX)
    assert cancel is not None
    stored, now = cancel[2], started + 30
    reasons = []
    for _ in range(6):
        now += 30
        decision, _, stored = evaluate(seen(40), stored, ON, now, policy, CTX)
        reasons.append(decision.reason)
    assert "SwitchBudgetExhausted" in reasons, reasons
    assert decision.mode == ON
