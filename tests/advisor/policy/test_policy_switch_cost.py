"""The policy weighs what a switch costs under the SpecServer's ``switchStrategy``.

Recreate restarts the engine (the replica serves nothing until the new one is Ready), so an
overload is confirmed over ``disableAfterBreaches`` evaluations. BlueGreen and RollingUpdate keep
the old mode serving through the switch: half the breaches confirm it, and a switch that landed
after its overload ended is undone at once. Driven through ``autocycle.evaluate``, the call the
operator makes each cycle, with the state stored and reloaded as JSON.
"""

from __future__ import annotations

import pytest

from specserver_advisor.models import AutoSpeculation, SwitchStrategy
from specserver_advisor.policy.autocycle import evaluate
from specserver_advisor.policy.model import OFF, ON, Observation, PolicyContext, PolicyState

#: Speculation pays below 16 users at any acceptance above 1.3.
CTX = PolicyContext([(1.0, 16.0), (4.0, 16.0)], break_even_accept=1.3, prior_accept=2.7)
STRATEGIES = [s for s in SwitchStrategy]


def seen(load: int, accept: float | None = 2.7, age: float = 5.0) -> Observation:
    """30 s of signals: ``load`` users; past 16, the rest queue and TTFT P99 is 20 s."""
    over = load > 16
    return Observation(
        ts=0.0,
        accept_length=accept,
        ttft_p99_s=20.0 if over else 0.8,
        running=16 if over else load,
        queued=load - 16 if over else 0,
        output_tok_s=300.0,
        age_s=age,
    )


class Operator:
    """Evaluations every 30 s as the operator makes them; a switch lands 90 s after it is
    decided (the signals here give no reason to cancel one; cancels are in
    test_policy_switch_cancel.py)."""

    def __init__(self, strategy: SwitchStrategy, **fields: object) -> None:
        self.policy = AutoSpeculation.model_validate({"switchStrategy": strategy, **fields})
        self.mode, self.now = ON, 0.0
        self.stored: PolicyState | None = None
        self.log: list[tuple[str, str]] = []

    def cycle(self, obs: Observation) -> tuple[str, str]:
        self.now += 30.0
        decision, state, self.stored = evaluate(
            obs, self.stored, self.mode, self.now, self.policy, CTX
        )
        self.log.append((decision.action, decision.reason))
        if decision.action != "keep":
            self.mode = state.mode
            self.now += 90.0
        return decision.action, decision.reason


def breaches_until_off(strategy: SwitchStrategy, **fields: object) -> int:
    op = Operator(strategy, **fields)
    for n in range(1, 20):
        if op.cycle(seen(40))[0] == "disable":
            return n
    raise AssertionError(op.log)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_an_overload_is_confirmed_faster_when_the_switch_costs_no_downtime(
    strategy: SwitchStrategy,
) -> None:
    no_downtime = strategy != SwitchStrategy.RECREATE
    assert breaches_until_off(strategy) == (3 if no_downtime else 6)
    assert breaches_until_off(strategy, disableAfterBreaches=5) == (3 if no_downtime else 5)
    assert breaches_until_off(strategy, disableAfterBreaches=1) == 1


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_switch_that_landed_after_its_overload_is_undone_at_once_without_downtime(
    strategy: SwitchStrategy,
) -> None:
    """A two-minute burst: speculation goes off as it ends; back at 6 users the next cycle
    re-enables (BlueGreen, RollingUpdate) or waits out the dwell and the passes (Recreate)."""
    op = Operator(strategy)
    while op.cycle(seen(40))[0] != "disable":
        pass
    assert op.mode == OFF
    back = op.cycle(seen(6, accept=None))
    if strategy == SwitchStrategy.RECREATE:
        assert back == ("keep", "EnablePending")
        for _ in range(10):
            assert op.cycle(seen(6, accept=None))[0] == "keep"  # 12 passes, 600 s dwell
    else:
        assert back == ("enable", "OverloadEnded") and op.mode == ON


def test_traffic_that_stopped_is_no_overload_that_ended() -> None:
    """The load went to nothing after the switch: nothing is served that speculation would
    serve better, so the usual passes and dwell hold the mode (as tests/cluster's BlueGreen
    switch test expects once its load ends)."""
    op = Operator(SwitchStrategy.BLUE_GREEN)
    while op.cycle(seen(40))[0] != "disable":
        pass
    idle = Observation(ts=0.0, running=0, queued=0, output_tok_s=0.0, age_s=5.0)
    for _ in range(15):
        assert op.cycle(idle)[0] == "keep"
    assert ("keep", "DwellTime") in op.log and op.mode == OFF


def test_a_switch_for_low_acceptance_is_not_undone_as_an_overload() -> None:
    """Acceptance below the floor turned speculation off: low load is no reason to undo it."""
    op = Operator(SwitchStrategy.BLUE_GREEN)
    while op.cycle(seen(6, accept=1.1))[0] != "disable":
        assert len(op.log) < 10, op.log
    assert op.log[-1] == ("disable", "AcceptLengthLow")
    for _ in range(5):
        assert op.cycle(seen(6, accept=None))[0] == "keep"


def bursts(op: Operator, count: int, gap_cycles: int) -> list[float]:
    """``count`` two-minute bursts to 40 users over 6, ``gap_cycles`` apart; when it went off."""
    off_at = []
    for _ in range(count):
        for _ in range(4):
            if op.cycle(seen(40))[0] == "disable":
                off_at.append(op.now)
        for _ in range(gap_cycles - 4):
            op.cycle(seen(6, accept=None if op.mode == OFF else 2.7))
    return off_at


def test_after_a_round_trip_the_next_burst_within_the_hour_is_confirmed_in_full() -> None:
    """Bursts every 40 minutes (fleetsim's bursty): the first is switched off for and undone
    (OverloadEnded); the next, within the hour of that round trip, needs all six breaches and
    so is waited out like under Recreate; the one after the hour is fast again."""
    op = Operator(SwitchStrategy.BLUE_GREEN)
    off_at = bursts(op, 3, 80)
    assert [round(t / 2400) for t in off_at] == [0, 2]
    reasons = [reason for action, reason in op.log if action != "keep"]
    assert reasons == ["TTFTSLOBreached", "OverloadEnded"] * 2
    pending = [r for a, r in op.log[80:84]]
    assert pending == ["BreachPending"] * 4  # four breaches, six needed after the round trip


def test_bursts_every_few_minutes_do_not_flap_the_engine() -> None:
    """Bursts every four minutes: one round trip (off, then undone), then every burst of the
    hour is confirmed in full, which a two-minute burst never is."""
    op = Operator(SwitchStrategy.BLUE_GREEN)
    off_at = bursts(op, 14, 8)
    assert len(off_at) == 1
    assert sum(1 for action, _ in op.log if action != "keep") == 2
