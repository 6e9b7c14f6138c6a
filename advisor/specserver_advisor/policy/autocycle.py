"""One auto-speculation evaluation exactly as the operator runs it (pure).

The operator keeps the policy state in the SpecServer status and reloads it each cycle; that
round trip is part of the decision (readings that moved nothing material and learned bands
younger than ``BANDS_PERSIST_S`` are not stored, so the next cycle does not see them):
``evaluate`` returns the ``PolicyState`` to store, which is the one it was given when nothing
material moved, and the caller hands it back next cycle (the operator as read from status,
policystate.py; replay and fleetsim as returned). The
operator's autopilot and ``specserver-advisor replay`` both call ``evaluate``, so replay shows the
decisions the controller makes on the same signals. While a switch is under way the operator
(and fleetsim) call ``reconsider`` instead: it cancels a switch whose reason ended before the
new engine is Ready, where the old mode still serves. A switch whose new engine never got its
GPUs and was cancelled at its deadline is recorded with ``record_blocked``: Auto backs off
before trying that switch again, and learns nothing from it.
"""

from __future__ import annotations

import copy
import math
from typing import Any

from specserver_advisor.models import AutoSpeculation
from specserver_advisor.policy.decide import decide
from specserver_advisor.policy.model import (
    MIN_SAMPLES,
    ON,
    Decision,
    Observation,
    PolicyContext,
    PolicyState,
    Reason,
    SpecMode,
    readings,
)
from specserver_advisor.policy.switchcost import cancel_reason, switch_deadline_s

#: The longest back-off after blocked switches: a cluster that never has the GPUs sees one
#: attempt an hour (plus the attempt's own deadline) once the doubling reaches it; an hour
#: after the last back-off ran out, the next blocked switch starts the doubling afresh.
BACKOFF_CAP_S = 3600.0
#: Learned band scores are persisted at most this often (they move every cycle).
BANDS_PERSIST_S = 300.0
#: Fields that follow every observation; written along with a material change, never alone.
VOLATILE_FIELDS = ("last_queued", "last_accept", "bands_saved_at", "band_streak")
#: Counters the policy compares with thresholds no larger than this (a band's samples and the
#: band's streak, both against ``2 * MIN_SAMPLES``): material until they reach it, so a steady
#: load writes a bounded number of times and then nothing, and the policy sees the counts grow.
COUNT_CAP = 2 * MIN_SAMPLES


def load_state(stored: PolicyState | None, running: SpecMode | None) -> PolicyState:
    """A copy of the persisted policy state, or a fresh one in the mode that runs now."""
    if stored is not None:
        return stored.copied()
    return PolicyState(mode=running or ON)


def round_significant(value: float | None, digits: int = 2) -> float | None:
    """``value`` to ``digits`` significant digits (None for None or NaN)."""
    if value is None or not math.isfinite(value):
        return None
    if value == 0:
        return 0.0
    return round(value, -math.floor(math.log10(abs(value))) + digits - 1)


def _counts(bands: dict[str, Any] | None) -> dict[str, dict[str, int]]:
    """Each band's sample count per mode, capped at ``COUNT_CAP``."""
    return {
        band: {mode: min(int(entry.get("n", 0)), COUNT_CAP) for mode, entry in modes.items()}
        for band, modes in (bands or {}).items()
    }


def _material(data: dict[str, Any]) -> dict[str, Any]:
    """What a restart must not lose: everything but the last readings and band bookkeeping.

    Band scores count at two significant digits, sample counts and the band streak up to
    ``COUNT_CAP`` (beyond it no decision changes).
    """
    out = {k: v for k, v in data.items() if k not in VOLATILE_FIELDS}
    out["band_streak"] = min(int(data.get("band_streak") or 0), COUNT_CAP)
    out["bands"] = {
        band: {mode: round_significant(entry.get("score")) for mode, entry in modes.items()}
        for band, modes in (data.get("bands") or {}).items()
    }
    out["band_counts"] = _counts(data.get("bands"))
    return out


def persisted(state: PolicyState, previous: PolicyState | None, now: float) -> PolicyState:
    """The state to store, or ``previous`` itself when nothing material moved.

    Steady load then writes nothing: the newest readings move every cycle but are only stored
    with a material change (a counter, the mode, a band's score at two significant digits, a
    sample count or the band streak below ``COUNT_CAP``); a band score that moved alone is
    stored at most every ``BANDS_PERSIST_S``. A count the policy compares is never lost between
    cycles (the operator reloads the stored state each cycle: a count not stored would not grow).
    """
    data = state.to_json()
    old = previous.to_json() if previous is not None else {}
    saved = old.get("bands_saved_at")
    recent = old and now - float(saved or 0) < BANDS_PERSIST_S
    if recent and _counts(data["bands"]) == _counts(old.get("bands")):
        data["bands"] = old.get("bands", {})
        data["bands_saved_at"] = now if saved is None else saved
    else:
        data["bands_saved_at"] = now
    if previous is not None and _material(data) == _material(old):
        return previous
    return PolicyState.from_json(data)


def evaluate(
    obs: Observation | None,
    stored: PolicyState | None,
    running: SpecMode | None,
    now: float,
    policy: AutoSpeculation,
    ctx: PolicyContext,
    spec_mode: str = "Auto",
    paused: bool = False,
) -> tuple[Decision, PolicyState, PolicyState]:
    """One evaluation: (decision, new state, the state to store).

    ``stored``: the state to store the previous evaluation returned (None at first; it is not
    modified). ``running``: the mode the engine runs now (None when unknown). The observation is
    taken as measured now, in the mode that runs (the engine it was read from); ``obs`` is not
    modified.
    """
    running = None if running is None else SpecMode(running)
    state = load_state(stored, running)
    if running is not None and running == state.blocked_mode:
        # The mode a switch was blocked to runs now (a switch to it completed): the back-off
        # is over and the next blocked switch counts from one.
        state.blocked_until, state.blocked_attempts, state.blocked_mode = None, 0, None
    if running is not None and running != state.mode:
        # The engine runs the other mode (spec.mode was Enabled/Disabled meanwhile): follow it.
        state.mode, state.mode_since = running, now
    if obs is None:
        seen = Observation(ts=now)
    else:
        seen = copy.copy(obs)
        seen.ts, seen.mode = now, running or state.mode
    decision, state = decide(seen, state, policy, ctx, spec_mode=spec_mode, paused=paused)
    return decision, state, persisted(state, stored, now)


def reconsider(
    obs: Observation | None,
    stored: PolicyState | None,
    target: SpecMode,
    switch_reason: str,
    started: float,
    now: float,
    policy: AutoSpeculation,
    ctx: PolicyContext,
) -> tuple[Decision, PolicyState, PolicyState] | None:
    """Cancel the switch under way to ``target``, or None to follow it on.

    Asked each cycle while the new engine is not Ready yet, with the newest observation (read
    from the old mode, which still serves: ``switchcost.cancel_reason`` says when, and only
    under a strategy that keeps it serving). A reading older than the switch or than
    ``staleAfterSeconds`` cancels nothing. On a cancel: a decision back to the previous mode
    (reason ``SwitchCancelled``, the cause in ``inputs.cause``), the state in that mode and
    the state to store. The cancelled switch stays in ``switch_times`` and
    ``last_switch``: it counts in the hourly budget (its standby took GPU time) and the dwell
    runs from its decision, as for a switch that landed. Pure; ``stored`` is not modified.
    """
    if obs is None or obs.age_s is None or obs.age_s > policy.stale_after_seconds:
        return None
    if now - obs.age_s < started:
        return None  # read before the switch was decided
    inputs = readings(obs)
    if inputs.running is None or inputs.queued is None:
        return None
    inputs.load = inputs.running + inputs.queued
    old = SpecMode(target).other
    state = load_state(stored, old)
    measured = inputs.accept_length if old == ON else None
    expected = (measured if measured and measured >= 1 else None) or state.last_accept
    crossover = ctx.crossover(expected or ctx.prior_accept)
    cause = cancel_reason(target, switch_reason, inputs, policy, crossover)
    if cause is None:
        return None
    state.mode, state.mode_since = old, now
    state.disable_breaches = state.enable_passes = state.queue_growth = 0
    state.exploring = False
    inputs.cause = cause
    thresholds = {
        "crossover": crossover,
        "dead_band": policy.dead_band,
        "ttft_p99_slo_s": policy.ttft_p99_slo_seconds,
    }
    decision = Decision(now, old.action, Reason.SWITCH_CANCELLED, old, inputs, thresholds)
    return decision, state, persisted(state, stored, now)


def backoff_s(attempts: int, deadline_s: float) -> float:
    """How long Auto waits after ``attempts`` consecutive blocked switches before trying again:
    the deadline after the first, doubling with each, at most ``BACKOFF_CAP_S``."""
    if attempts <= 0:
        return 0.0
    return min(deadline_s * 2.0 ** min(attempts - 1, 32), BACKOFF_CAP_S)


def record_blocked(
    stored: PolicyState | None,
    running: SpecMode | None,
    target: SpecMode,
    now: float,
    policy: AutoSpeculation,
    ctx: PolicyContext,
) -> PolicyState:
    """The state to store after a switch to ``target`` was cancelled at its deadline because
    its new engine never got its GPUs (the operator's ``SwitchBlocked``; fleetsim's Cancel).

    The mode stays the old one (``target.other``, the one that kept serving); the switch's
    counters restart. Auto backs off: no switch to ``target`` (exploration included; reason
    ``SwitchBackoff``) until ``blocked_until``, which is ``backoff_s`` of the consecutive
    blocked attempts to ``target`` after ``now``: the deadline (``switchcost.switch_deadline_s``)
    after the first, doubling, at most an hour. Attempts count afresh once the mode runs
    (``evaluate``) or an hour after the last back-off ran out. The blocked attempt is no
    measurement: learned bands are untouched. It stays in ``switch_times`` (it counts in the
    hourly budget, as a cancelled switch does). Pure; ``stored`` is not modified.
    """
    target = SpecMode(target)
    old = target.other
    state = load_state(stored, running if running is not None else old)
    stale = state.blocked_until is None or now - state.blocked_until >= BACKOFF_CAP_S
    consecutive = state.blocked_mode == target and not stale
    state.blocked_attempts = state.blocked_attempts + 1 if consecutive else 1
    state.blocked_mode = target
    state.blocked_until = now + backoff_s(state.blocked_attempts, switch_deadline_s(policy, ctx))
    state.mode, state.mode_since = old, now
    state.disable_breaches = state.enable_passes = state.queue_growth = 0
    state.exploring = False
    return persisted(state, stored, now)


def record_fell_back(
    stored: PolicyState | None, running: SpecMode | None, target: SpecMode, now: float
) -> PolicyState:
    """The state to store when a blocked switch to ``target`` is retried as Recreate
    (``switchcost.recreate_fallback_allowed``; the operator's ``SwitchFellBack``): the policy
    is in ``target`` from ``now``, and the Recreate restart counts in the hourly budget as a
    switch of its own. The back-off is untouched: it ends when ``target`` runs (``evaluate``).
    Pure; ``stored`` is not modified."""
    target = SpecMode(target)
    state = load_state(stored, running if running is not None else target.other)
    state.mode, state.mode_since, state.last_switch = target, now, now
    state.switch_times = [*state.switch_times, now]
    state.disable_breaches = state.enable_passes = state.queue_growth = 0
    return persisted(state, stored, now)
