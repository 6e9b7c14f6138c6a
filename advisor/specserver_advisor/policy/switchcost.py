"""What a switch costs the auto-speculation policy under the SpecServer's ``switchStrategy``.

Recreate restarts the engine: the replica serves nothing until the new one is Ready, so an
overload is confirmed over ``disableAfterBreaches`` evaluations. BlueGreen and RollingUpdate
keep the old mode serving meanwhile: a switch costs no downtime, only the new engine's GPU
time, so an overload is confirmed sooner and a switch that landed after its overload ended is
undone at once, and a switch whose reason ended before the new engine is Ready is cancelled
(``cancel_reason``). Pure; called by ``policy.decide`` and ``autocycle.reconsider``.
"""

from __future__ import annotations

import itertools
import math

from specserver_advisor.models import AutoSpeculation, SwitchStrategy
from specserver_advisor.policy.model import OFF, ON, PolicyState, Readings, Reason, SpecMode


def switch_keeps_serving(policy: AutoSpeculation) -> bool:
    """A switch leaves the old mode serving until the new engine is Ready (no downtime):
    BlueGreen, and RollingUpdate (its surge pod). Recreate stops the engine first."""
    return policy.switch_strategy != SwitchStrategy.RECREATE


def breaches_needed(policy: AutoSpeculation, state: PolicyState) -> int:
    """Consecutive breaching evaluations before speculation is switched off.

    ``disableAfterBreaches`` when a switch is a restart (Recreate: confirming waits out
    overloads too short to pay back the downtime); half of it, rounded up, when the old mode
    keeps serving through the switch: then a switch costs no downtime, only the new engine's
    GPU time, and a switch that lands after the overload is undone at once (``OverloadEnded``).
    Not while a switch of the last hour was undone within the dwell (a round trip: the overload
    behind it was shorter than a switch, so the next one may be too).
    """
    if switch_keeps_serving(policy) and not _round_trip(state, policy):
        return math.ceil(policy.disable_after_breaches / 2)
    return policy.disable_after_breaches


def _round_trip(state: PolicyState, policy: AutoSpeculation) -> bool:
    """Two switches of the last hour less than the dwell apart: one was undone."""
    times = state.switch_times
    return any(b - a < policy.min_dwell_seconds for a, b in itertools.pairwise(times))


def overload_ended(state: PolicyState, policy: AutoSpeculation, now: float, load: float) -> bool:
    """Speculation was switched off within the dwell, not as an exploration, by a switch that
    kept the old mode serving, and the load is back below the crossover: the overload ended
    before the switch landed (a two-minute burst). Without downtime, undoing it costs no more
    than the switch did, so it is undone at once rather than after ``enableAfterPasses``.
    Not with no load at all: nothing is served that speculation would serve better, so the
    usual passes and dwell apply."""
    return (
        load > 0
        and switch_keeps_serving(policy)
        and not state.exploring
        and state.last_switch is not None
        and now - state.last_switch < policy.min_dwell_seconds
    )


#: Switches decided on load alone, per target mode: speculation off for an overload, on for a
#: low load. Only these end when the load does (an exploration, a measured loss, low acceptance
#: or a manual mode do not).
LOAD_SWITCHES = {
    OFF: (Reason.TTFT_SLO_BREACHED, Reason.QUEUE_BUILDING, Reason.LOAD_ABOVE_CROSSOVER),
    ON: (Reason.LOAD_BELOW_CROSSOVER, Reason.OVERLOAD_ENDED),
}


def cancel_reason(
    target: SpecMode,
    switch_reason: str,
    inputs: Readings,
    policy: AutoSpeculation,
    crossover: float,
) -> Reason | None:
    """Why a switch under way should be cancelled before its new engine is Ready, or None.

    Only where the old mode still serves (BlueGreen, RollingUpdate: cancelling costs nothing
    but the standby's GPU time so far; under Recreate the old engine is already gone), and only
    a switch decided on load: ``OverloadEnded`` for a switch off whose overload is over (load,
    measured in the old mode, back below the crossover less the dead band, nothing queued, TTFT
    within its SLO; the same test as ``LoadBelowCrossover``), ``OverloadReturned`` for a switch
    on whose low load ended (TTFT over its SLO with requests queued, or load above the crossover
    plus the dead band). Not with no load at all (nothing served: the switch is not wrong yet).
    ``inputs``: ``load``, ``queued`` and ``ttft_p99_s`` as ``policy.decide`` reads them.
    """
    if not switch_keeps_serving(policy) or switch_reason not in LOAD_SWITCHES.get(target, ()):
        return None
    load, queued, ttft = inputs.load, inputs.queued, inputs.ttft_p99_s
    assert load is not None and queued is not None
    within_slo = ttft is None or ttft <= policy.ttft_p99_slo_seconds
    if target == OFF:
        below = 0 < load < crossover * (1 - policy.dead_band)
        return Reason.OVERLOAD_ENDED if below and queued == 0 and within_slo else None
    over = (queued > 0 and not within_slo) or load > crossover * (1 + policy.dead_band)
    return Reason.OVERLOAD_RETURNED if over else None
