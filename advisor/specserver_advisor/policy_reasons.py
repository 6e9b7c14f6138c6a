"""Why the auto-speculation policy would switch: the reasons to disable or enable speculation.

Pure helpers of ``policy.decide`` (and of ``switchcost.cancel_reason``, which asks the same
questions of a switch under way): each returns the reason a switch is due, or None.
"""

from __future__ import annotations

from typing import Any

from specserver_advisor.models import AutoSpeculation
from specserver_advisor.policy_model import OFF, ON, PolicyContext, PolicyState


def after_switch(state: PolicyState, policy: AutoSpeculation, now: float, reason: str) -> str:
    """Within the dwell after a switch, measured worse at the same load: the switch did not pay.

    The new mode's score in this band (learned since the switch) is below what the old mode
    delivered there; the policy reverts at once and says so.
    """
    recent = state.last_switch is not None and now - state.last_switch < policy.min_dwell_seconds
    return "SwitchDidNotPay" if reason == "OtherModeFasterHere" and recent else reason


def disable_reason(
    inputs: dict[str, Any],
    state: PolicyState,
    policy: AutoSpeculation,
    floor: float,
    crossover: float,
    learned: str | None,
    ctx: PolicyContext,
) -> str | None:
    accept, ttft, queued, load = (
        inputs["accept_length"],
        inputs["ttft_p99_s"],
        inputs["queued"],
        inputs["load"],
    )
    if accept is not None and accept < floor and not ctx.engine_adapts_steps:
        return "AcceptLengthLow"
    if learned == ON:
        return None  # measured: speculation delivers more at this load
    if ttft is not None and ttft > policy.ttft_p99_slo_seconds and queued > 0:
        return "TTFTSLOBreached"
    if state.queue_growth >= policy.queue_growth_evaluations:
        return "QueueBuilding"
    if learned == OFF:
        return "OtherModeFasterHere"
    if load > crossover * (1 + policy.dead_band):
        return "LoadAboveCrossover"
    return None


def enable_reason(
    inputs: dict[str, Any],
    policy: AutoSpeculation,
    floor: float,
    crossover: float,
    learned: str | None,
    expected_accept: float,
) -> str | None:
    ttft, queued, load = inputs["ttft_p99_s"], inputs["queued"], inputs["load"]
    if expected_accept < floor or learned == OFF:
        return None
    if learned == ON:
        return "OtherModeFasterHere"
    if queued > 0 or (ttft is not None and ttft > policy.ttft_p99_slo_seconds):
        return None
    if load < crossover * (1 - policy.dead_band):
        return "LoadBelowCrossover"
    return None
