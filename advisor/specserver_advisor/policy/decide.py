"""The auto-speculation policy: decide to keep, enable or disable speculation each cycle.

A pure decision engine: ``decide(observation, state, policy, context, now, ...)`` returns a
``Decision`` and the next ``PolicyState``. Called by the operator each evaluation cycle, by
``specserver-advisor replay`` over recorded metrics and by ``fleetsim``. The state is kept in
the SpecServer status (JSON round-trippable) so a restarted operator continues where it stopped. The
data types and per-band learning are in ``policy.model`` (import them from there), the reasons
to switch in ``policy.reasons``, what a switch costs in ``switchcost``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from specserver_advisor.models import AutoSpeculation
from specserver_advisor.policy import zerosteps
from specserver_advisor.policy.model import (
    DISABLE,
    ENABLE,
    KEEP,
    LEARN_MARGIN,
    MIN_SAMPLES,
    ON,
    Decision,
    Observation,
    PolicyContext,
    PolicyState,
    Readings,
    Reason,
    SpecMode,
    accept_floor,
    band_of,
    fresh_band_entry,
    learn_band,
    learned_preference,
    readings,
    score,
)
from specserver_advisor.policy.reasons import after_switch, disable_reason, enable_reason
from specserver_advisor.policy.switchcost import breaches_needed, overload_ended


@dataclass
class _Cycle:
    """One evaluation in progress: the state being updated and what the decision will show."""

    now: float
    state: PolicyState
    policy: AutoSpeculation
    inputs: Readings
    thresholds: dict[str, Any]

    def finish(
        self, action: str, reason: Reason, would: str | None = None
    ) -> tuple[Decision, PolicyState]:
        st = self.state
        if action != KEEP:
            st.mode = SpecMode.from_action(action)
            st.mode_since = self.now
            st.last_switch = self.now
            st.switch_times.append(self.now)
            st.disable_breaches = st.enable_passes = st.queue_growth = 0
            st.exploring = reason == Reason.EXPLORE_OTHER_MODE
        decision = Decision(self.now, action, reason, st.mode, self.inputs, self.thresholds, would)
        return decision, st

    def gated(self, action: str, reason: Reason) -> tuple[Decision, PolicyState]:
        """Switch unless a blocked switch's back-off, dwell time, the hourly budget or dry run
        forbid it."""
        st, pol = self.state, self.policy
        would = f"{action}:{reason}"
        if st.backing_off(SpecMode.from_action(action), self.now):
            # A switch to this mode was blocked (its engine never got its GPUs): wait out the
            # back-off (``autocycle.record_blocked``), explorations included.
            self.thresholds["blocked_until"] = st.blocked_until
            self.thresholds["blocked_attempts"] = st.blocked_attempts
            return self.finish(KEEP, Reason.SWITCH_BACKOFF, would)
        # An exploration, a switch measured to deliver less, or one that landed after its
        # overload (no downtime either way) is undone without dwelling.
        revert = st.exploring or reason in (Reason.SWITCH_DID_NOT_PAY, Reason.OVERLOAD_ENDED)
        if (
            not revert
            and st.last_switch is not None
            and self.now - st.last_switch < pol.min_dwell_seconds
        ):
            self.thresholds["min_dwell_s"] = pol.min_dwell_seconds
            return self.finish(KEEP, Reason.DWELL_TIME, would)
        if len(st.switch_times) >= pol.max_switches_per_hour:
            self.thresholds["max_switches_per_hour"] = pol.max_switches_per_hour
            return self.finish(KEEP, Reason.SWITCH_BUDGET_EXHAUSTED, would)
        if pol.dry_run:
            return self.finish(KEEP, Reason.DRY_RUN, would)
        return self.finish(action, reason)

    def explore(
        self, band: str, crossover: float, crossover_prior: float
    ) -> tuple[Decision, PolicyState] | None:
        """Try the other mode in a band seen (recently) only in this mode, where it may win.

        "May win": the load is within 1.5x of the crossover at the accept length last seen, and
        below 1.25x the crossover at the draft's typical accept length (acceptance cannot be
        seen while speculation is off, and may have recovered). Keeps one switch of the hourly
        budget in reserve to come back, and explores only a load that has held its band for
        ``2 * MIN_SAMPLES`` consecutive cycles: a trial started in a short spike lands after it
        and measures the other mode at a load it was not meant for. A mode with recent samples
        in this band that scored below this mode's (fewer than ``MIN_SAMPLES``: the breaches
        that made the policy leave it) is not explored: it was measured, and lost.
        """
        st, pol = self.state, self.policy
        if not pol.explore or len(st.switch_times) > pol.max_switches_per_hour - 2:
            return None
        seen = st.bands.get(band, {})
        other = st.mode.other
        mine = seen.get(st.mode)
        if (
            fresh_band_entry(seen.get(other), self.now, pol.relearn_after_seconds)
            or not mine
            or mine["n"] < 2 * MIN_SAMPLES
            or st.band_streak < 2 * MIN_SAMPLES
        ):
            return None
        theirs = seen.get(other)
        if (
            theirs
            and theirs["n"] > 0
            and self.now - theirs.get("at", self.now) <= pol.relearn_after_seconds
            and theirs["score"] * (1 + LEARN_MARGIN) < mine["score"]
        ):
            return None  # measured here recently, and worse (e.g. the breaches that left it)
        load = float(band.split("@")[0])
        upper = max(crossover * 1.5 if st.mode == ON else crossover, crossover_prior * 1.25)
        if math.isinf(upper) or upper <= 0 or not crossover / 1.5 <= load <= upper:
            return None
        if st.last_switch is not None and self.now - st.last_switch < pol.min_dwell_seconds:
            return None
        return self.gated(other.action, Reason.EXPLORE_OTHER_MODE)


def decide(
    obs: Observation,
    state: PolicyState,
    policy: AutoSpeculation,
    ctx: PolicyContext,
    spec_mode: str = "Auto",
    paused: bool = False,
) -> tuple[Decision, PolicyState]:
    """One evaluation. Returns the decision and the new state (the input is not modified).

    Args:
        obs: this cycle's signals; ``obs.mode`` says which mode they were measured in.
        state: the state returned by the previous call (``PolicyState()`` at first).
        policy: the SpecServer's ``autoSpeculation`` block (defaults when absent).
        ctx: the performance model's crossover and break-even predictions.
        spec_mode: ``spec.mode``; Enabled/Disabled override everything.
        paused: the pause annotation is set.
    """
    state = state.copied()
    now = float(obs.ts)
    state.switch_times = [t for t in state.switch_times if now - t < 3600]
    floor = accept_floor(policy, ctx)
    inputs = readings(obs)
    thresholds: dict[str, Any] = {
        "accept_floor": floor,
        "ttft_p99_slo_s": policy.ttft_p99_slo_seconds,
    }
    cycle = _Cycle(now, state, policy, inputs, thresholds)
    target = SpecMode.forced_by(spec_mode)
    if target is not None:
        if state.mode != target:
            return cycle.finish(target.action, Reason.MANUAL_MODE)
        return cycle.finish(KEEP, Reason.MANUAL_MODE)
    if paused:
        return cycle.finish(KEEP, Reason.PAUSED)
    running, queued, age = inputs.running, inputs.queued, inputs.age_s
    if running is None or queued is None or age is None or age > policy.stale_after_seconds:
        thresholds["stale_after_s"] = policy.stale_after_seconds
        return cycle.finish(KEEP, Reason.METRICS_STALE)
    load = running + queued
    inputs.load = load
    if inputs.accept_length is not None and inputs.accept_length < 1:
        # SGLang's gauge reads 0 when no verify step ran in the interval (an idle engine).
        inputs.accept_length = None
    zero_steps = zerosteps.ran_zero_steps(obs, state.mode, ctx)
    if zero_steps:
        # SGLang's adaptive tier ran no drafts: its accept length counts trivial verifies and
        # the throughput is a plain decode's; neither is speculation's (zerosteps.py).
        inputs.spec_num_steps = 0
        inputs.accept_length = None
        thresholds["zero_step_batch"] = ctx.zero_step_batch
    accept = inputs.accept_length if state.mode == ON else None
    if accept:
        state.last_accept = accept
    expected_accept = accept or state.last_accept or ctx.prior_accept
    band = band_of(load, expected_accept)
    state.band_streak = state.band_streak + 1 if band == state.last_band else 1
    state.last_band = band
    measured = (obs.mode or state.mode) == state.mode and not zero_steps
    if inputs.output_tok_s is not None and measured:
        value = score(inputs.output_tok_s, inputs.ttft_p99_s, policy.ttft_p99_slo_seconds)
        learn_band(state, band, state.mode, value, now)
    crossover = ctx.crossover(expected_accept)
    crossover_prior = ctx.crossover(ctx.prior_accept)
    learned = learned_preference(state, band, now, policy.relearn_after_seconds)
    growing = state.last_queued is not None and queued > 0 and queued >= state.last_queued
    state.queue_growth = state.queue_growth + 1 if growing else 0
    state.last_queued = queued
    thresholds.update(
        {
            "crossover": crossover,
            "dead_band": policy.dead_band,
            "band": band,
            "learned": learned,
            "expected_accept": expected_accept,
        }
    )
    if state.mode == ON:
        if zero_steps:  # one controller per decision: the engine's, unless memory says
            reason = zerosteps.memory_reason(inputs, state, policy)
        else:
            reason = disable_reason(inputs, state, policy, floor, crossover, learned, ctx)
        state.enable_passes = 0
        state.disable_breaches = state.disable_breaches + 1 if reason else 0
        if not reason and zero_steps:
            return cycle.finish(KEEP, Reason.ENGINE_RAN_ZERO_STEPS)
        if not reason:
            return cycle.explore(band, crossover, crossover_prior) or cycle.finish(
                KEEP, Reason.WITHIN_THRESHOLDS
            )
        needed = breaches_needed(policy, state, ctx.restart_extra_s)
        thresholds["breaches"] = f"{state.disable_breaches}/{needed}"
        if state.disable_breaches < needed:
            return cycle.finish(KEEP, Reason.BREACH_PENDING, would=f"{DISABLE}:{reason}")
        return cycle.gated(DISABLE, after_switch(state, policy, now, reason))
    if ctx.engine_adapts_steps:
        expected_accept = max(expected_accept, floor)
    reason = enable_reason(inputs, policy, floor, crossover, learned, expected_accept)
    state.disable_breaches = 0
    state.enable_passes = state.enable_passes + 1 if reason else 0
    if not reason:
        return cycle.explore(band, crossover, crossover_prior) or cycle.finish(
            KEEP, Reason.WITHIN_THRESHOLDS
        )
    load_reasons = (Reason.LOAD_BELOW_CROSSOVER, Reason.OTHER_MODE_FASTER_HERE)
    if reason in load_reasons and overload_ended(state, policy, now, load):
        return cycle.gated(ENABLE, Reason.OVERLOAD_ENDED)
    thresholds["passes"] = f"{state.enable_passes}/{policy.enable_after_passes}"
    if state.enable_passes < policy.enable_after_passes:
        return cycle.finish(KEEP, Reason.ENABLE_PENDING, would=f"{ENABLE}:{reason}")
    return cycle.gated(ENABLE, after_switch(state, policy, now, reason))
