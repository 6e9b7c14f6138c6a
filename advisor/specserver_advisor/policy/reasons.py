"""Why the auto-speculation policy would switch: the reasons to disable or enable speculation.

Pure helpers of ``policy.decide`` (and of ``switchcost.cancel_reason``, which asks the same
questions of a switch under way): each returns the reason a switch is due, or None.
"""

from __future__ import annotations

from specserver_advisor.models import AutoSpeculation
from specserver_advisor.policy.model import (
    OFF,
    ON,
    PolicyContext,
    PolicyState,
    Readings,
    Reason,
    SpecMode,
)


def after_switch(state: PolicyState, policy: AutoSpeculation, now: float, reason: Reason) -> Reason:
    """Within the dwell after a switch, measured worse at the same load: the switch did not pay.

    The new mode's score in this band (learned since the switch) is below what the old mode
    delivered there; the policy reverts at once and says so.
    """
    recent = state.last_switch is not None and now - state.last_switch < policy.min_dwell_seconds
    faster = reason == Reason.OTHER_MODE_FASTER_HERE
    return Reason.SWITCH_DID_NOT_PAY if faster and recent else reason


def disable_reason(
    inputs: Readings,
    state: PolicyState,
    policy: AutoSpeculation,
    floor: float,
    crossover: float,
    learned: SpecMode | None,
    ctx: PolicyContext,
) -> Reason | None:
    """``inputs`` with ``load`` and ``queued`` known (``policy.decide`` checked)."""
    accept, ttft, queued, load = inputs.accept_length, inputs.ttft_p99_s, inputs.queued, inputs.load
    assert queued is not None and load is not None
    if accept is not None and accept < floor and not ctx.engine_adapts_steps:
        return Reason.ACCEPT_LENGTH_LOW
    if learned == ON:
        return None  # measured: speculation delivers more at this load
    if ttft is not None and ttft > policy.ttft_p99_slo_seconds and queued > 0:
        return Reason.TTFT_SLO_BREACHED
    if state.queue_growth >= policy.queue_growth_evaluations:
        return Reason.QUEUE_BUILDING
    if learned == OFF:
        return Reason.OTHER_MODE_FASTER_HERE
    if load > crossover * (1 + policy.dead_band):
        return Reason.LOAD_ABOVE_CROSSOVER
    return None


def enable_reason(
    inputs: Readings,
    policy: AutoSpeculation,
    floor: float,
    crossover: float,
    learned: SpecMode | None,
    expected_accept: float,
) -> Reason | None:
    """``inputs`` with ``load`` and ``queued`` known (``policy.decide`` checked)."""
    ttft, queued, load = inputs.ttft_p99_s, inputs.queued, inputs.load
    assert queued is not None and load is not None
    if expected_accept < floor or learned == OFF:
        return None
    if learned == ON:
        return Reason.OTHER_MODE_FASTER_HERE
    if queued > 0 or (ttft is not None and ttft > policy.ttft_p99_slo_seconds):
        return None
    if load < crossover * (1 - policy.dead_band):
        return Reason.LOAD_BELOW_CROSSOVER
    return None
