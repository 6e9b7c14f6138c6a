"""The auto-speculation step for one SpecServer (pure): follow a switch, or ask the policy.

The evaluation itself (the state's round trip through status included) is the advisor's
``autocycle.evaluate``, the same call ``specserver-advisor replay`` makes.

Called by desired.py each cycle with the newest observation (or None), the policy state read
from status (``policystate.parse``, once, by observe.py) and the engine Deployment's mode.
Returns the speculation state to render and the status fields to write: the policy
state (a structured object, policystate.py, so a restarted operator resumes), the switch in
progress (written before the engine is touched, so a crash mid-switch completes exactly one
switch), the bounded ledger, the newest metrics (rounded, so unchanged load writes nothing)
and ``MetricsAvailable``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from specserver_advisor.launch.multinode import effective_policy
from specserver_advisor.models import (
    MAX_LEDGER_ENTRIES,
    AutoSpeculation,
    SpecServerSpec,
    SwitchInProgress,
)
from specserver_advisor.policy import zerosteps
from specserver_advisor.policy.autocycle import (
    evaluate,
    load_state,
    persisted,
    reconsider,
    record_blocked,
    record_fell_back,
)
from specserver_advisor.policy.autocycle import round_significant as _round
from specserver_advisor.policy.model import (
    KEEP,
    ROUTINE_REASONS,
    Decision,
    Observation,
    PolicyContext,
    PolicyState,
    Reason,
    SpecMode,
)
from specserver_advisor.policy.switchcost import modelled_startup_s, switch_deadline_s
from specserver_operator.core import policystate, switching
from specserver_operator.core.blocked import Blocked
from specserver_operator.core.switching import DeadlineEnd, iso, parse_time

PAUSE_ANNOTATION = "specserver.io/pause-auto-speculation"
METRICS_AVAILABLE = "MetricsAvailable"


@dataclass
class AutoStep:
    """What this cycle decided."""

    speculative: bool
    status: dict[str, Any] = field(default_factory=dict)
    decision: Decision | None = None
    events: list[tuple[str, str, str]] = field(default_factory=list)
    #: "completed" | "failed" | "cancelled" | "blocked" | "fellback"
    switch_result: str | None = None
    #: (status, reason, message) of MetricsAvailable; None while a switch is followed.
    metrics_condition: tuple[str, str, str] | None = None
    #: (status, reason, message) of EngineZeroSteps (zerosteps.py); None: not applicable.
    steps_condition: tuple[str, str, str] | None = None


def last_metrics(obs: Observation, now: float) -> dict[str, Any]:
    """Newest metrics for status (read at ``now``), rounded to two significant digits."""
    out = {
        "observedAt": iso(now),
        "acceptLength": _round(obs.accept_length),
        "ttftP99Seconds": _round(obs.ttft_p99_s),
        "tpotP50Milliseconds": _round(obs.tpot_p50_ms),
        "runningRequests": _round(obs.running),
        "queuedRequests": _round(obs.queued),
        "outputTokensPerSecond": _round(obs.output_tok_s),
        "specNumSteps": _round(obs.spec_num_steps),
    }
    return {k: v for k, v in out.items() if v is not None}


def _ledger(
    status: dict[str, Any], decision: Decision, mode: SpecMode, message: str
) -> list[dict[str, Any]]:
    return _append(status, decision.ts, decision.action, decision.reason, mode, message)


def _append(
    status: dict[str, Any], ts: float, action: str, reason: str, mode: SpecMode, message: str
) -> list[dict[str, Any]]:
    """The bounded ledger with one entry more."""
    entries = list(status.get("decisions") or [])
    entries.append(
        {
            "time": iso(ts),
            "action": action,
            "reason": str(reason),
            "mode": str(mode.status),
            "message": message[:300],
        }
    )
    return entries[-MAX_LEDGER_ENTRIES:]


def _summary(decision: Decision) -> str:
    keys = ("load", "accept_length", "ttft_p99_s", "running", "queued")
    inputs = decision.inputs.to_json()
    parts = [f"{k}={inputs[k]:.3g}" for k in keys if isinstance(inputs.get(k), int | float)]
    th = decision.thresholds
    parts += [
        f"{k}={th[k]:.3g}"
        for k in ("crossover", "accept_floor", "ttft_p99_slo_s")
        if isinstance(th.get(k), int | float) and math.isfinite(th[k])
    ]
    return ", ".join(parts)


#: The metrics error when neither the SpecServer nor the operator names a Prometheus.
NO_PROMETHEUS_URL = (
    "no Prometheus URL configured (spec.autoSpeculation.prometheusUrl or the operator's "
    "SPECSERVER_PROMETHEUS_URL)"
)


def auto_step(
    spec: SpecServerSpec,
    status: dict[str, Any],
    switch: SwitchInProgress | None,
    stored: PolicyState | None,
    obs: Observation | None,
    metrics_error: str | None,
    ctx: PolicyContext,
    running: SpecMode | None,
    engine_ready: bool,
    now: float,
    paused: bool = False,
    blocked: Blocked | None = None,
) -> AutoStep:
    """One cycle. ``status``: the stored status (its metrics, ledger and last reason, what the
    step's fields are written over); ``switch`` and ``stored``: its switch under way and policy
    state, typed (observe.py; None: none, or unreadable); ``running``: the mode of the engine
    Deployment (None: none); ``blocked``: why the switch's new engine is not Ready (None: no
    cause known, or no switch)."""
    policy = effective_policy(spec)
    if switch is not None:
        followed = _follow_switch(
            status, stored, switch, policy, running, engine_ready, now, ctx, blocked
        )
        if followed is not None:
            return followed
        # The policy makes no decision while paused, a cancel included; nor on a switch that
        # fell back to Recreate (the old engine is freed: it is seen through).
        if paused or switch.fallback:
            return AutoStep(speculative=SpecMode.from_status(switch.target).speculative)
        return _cancel_switch(status, stored, switch, policy, obs, ctx, now)
    if obs is None:
        why = (
            (
                "NoPrometheusURL"
                if metrics_error == NO_PROMETHEUS_URL
                else "PrometheusUnavailable",
                metrics_error,
            )
            if metrics_error
            else ("NoSeries", "no engine series for this SpecServer")
        )
    else:
        stale = obs.age_s is None or obs.age_s > policy.stale_after_seconds
        # A fixed message (not the growing age), so a stale spell writes its condition once.
        limit = f"no engine sample within staleAfterSeconds ({policy.stale_after_seconds}s)"
        # A held sample gone stale because Prometheus keeps failing: the reason names the cause.
        why = (
            ("PrometheusUnavailable", f"{metrics_error}; {limit}")
            if metrics_error
            else (
                "Stale",
                limit,
            )
        )
        if not stale:
            why = ("", "")
    metrics_ok = not why[0]
    decision, state, keep = evaluate(
        obs, stored, running, now, policy, ctx, spec.mode.value, paused
    )
    step = AutoStep(speculative=state.mode.speculative, decision=decision)
    step.metrics_condition = (
        ("True", "Available", "signals are fresh")
        if metrics_ok
        else ("False", why[0], why[1] or "")
    )
    if keep is not stored:  # else what status holds stands (statusmodel.py reads it)
        step.status["policyState"] = policystate.to_status(keep)
    step.steps_condition = steps_condition(decision, state.mode, ctx, metrics_ok)
    if metrics_ok and obs is not None:
        fresh = last_metrics(obs, now)
        old = {k: v for k, v in (status.get("lastMetrics") or {}).items() if k != "observedAt"}
        # observedAt moves every cycle: write only when a (rounded) value changed.
        if old != {k: v for k, v in fresh.items() if k != "observedAt"}:
            step.status["lastMetrics"] = fresh
    previous = status.get("lastDecisionReason")
    if decision.action != KEEP:
        target = SpecMode.from_action(decision.action)
        step.status["switch"] = {
            "target": str(target.status),
            "previous": str(target.other.status),
            "startedAt": iso(now),
            "reason": str(decision.reason),
            "deadline": iso(now + switch_deadline_s(policy, ctx)),
        }
        step.status["decisions"] = _ledger(status, decision, state.mode, _summary(decision))
        verb = "SpeculationEnabled" if target.speculative else "SpeculationDisabled"
        step.events.append(("Normal", verb, f"{decision.reason}: {_summary(decision)}"))
    elif decision.reason != previous and decision.reason not in ROUTINE_REASONS:
        step.events.append(
            (
                "Normal" if metrics_ok else "Warning",
                str(decision.reason),
                f"kept speculation {state.mode}: "
                # Without metrics the cause is why there are none, not the policy's inputs.
                f"{(why[1] if not metrics_ok else _summary(decision)) or decision.reason}",
            )
        )
    step.status["lastDecisionReason"] = str(decision.reason)
    return step


def steps_condition(
    decision: Decision, mode: SpecMode, ctx: PolicyContext, metrics_ok: bool
) -> tuple[str, str, str] | None:
    """EngineZeroSteps: which level acted on this cycle (None: the On engine does not adapt,
    or its cap keeps every zero-step tier out of reach)."""
    if not ctx.engine_adapts_steps or math.isinf(ctx.zero_step_batch):
        return None
    if mode == SpecMode.OFF:
        return ("False", "DraftUnloaded", "Auto runs the engine without the draft")
    if decision.inputs.spec_num_steps == 0:
        return (
            "True",
            str(zerosteps.REASON),
            "SGLang's --speculative-adaptive ran 0 draft steps over the signal window (its "
            f"tiers may from a running batch of {ctx.zero_step_batch:.0f}): speculation is off "
            "inside the engine with the draft still loaded; Auto does not score these readings "
            "as speculation",
        )
    if not metrics_ok:
        return ("Unknown", "NoFreshSignals", "no fresh sglang:spec_num_steps reading")
    return ("False", "DraftStepsRunning", "SGLang's adaptive tier runs draft steps")


def _follow_switch(
    status: dict[str, Any],
    stored: PolicyState | None,
    switch: SwitchInProgress,
    policy: AutoSpeculation,
    running: SpecMode | None,
    engine_ready: bool,
    now: float,
    ctx: PolicyContext,
    blocked: Blocked | None,
) -> AutoStep | None:
    """The switch completed, or reached its deadline not Ready (switching.py: fell back to
    Recreate, cancelled as blocked, or failed and rolled back); None: neither yet."""
    want = SpecMode.from_status(switch.target)
    if running == want and engine_ready:
        return _completed(status, switch, want, now)
    limit = switch_deadline_s(policy, ctx)
    if now < switching.deadline_of(switch, limit):
        return None
    outcome = switching.at_deadline(switch, blocked, policy, load_state(stored, running), now)
    if outcome == DeadlineEnd.FALL_BACK:
        return _fall_back(status, stored, switch, running, now, limit, ctx, blocked)
    back = SpecMode.from_status(switch.previous)
    waited = now - parse_time(switch.fallback_at or switch.started_at)
    cause = switching.cause_text(blocked)
    where = f"{blocked.workload} " if blocked is not None else ""
    if outcome == DeadlineEnd.BLOCKED:
        state = record_blocked(stored, back, want, now, policy, ctx)
        step = AutoStep(speculative=back.speculative, switch_result="blocked")
        step.status["switch"] = None
        step.status["policyState"] = policystate.to_status(state)
        step.status["decisions"] = _append(
            status,
            now,
            back.action,
            DeadlineEnd.BLOCKED,
            back,
            f"waited {waited:.0f}s for {where or 'the new engine '}({cause})",
        )
        step.status["lastDecisionReason"] = str(DeadlineEnd.BLOCKED)
        step.events.append(
            (
                "Warning",
                str(DeadlineEnd.BLOCKED),
                f"switch to speculation {want} cancelled at its deadline after {waited:.0f}s: "
                f"{where}{cause}; {back} kept serving",
            )
        )
        return step
    state = load_state(stored, running)
    state.mode = back
    state.mode_since = now
    step = AutoStep(speculative=back.speculative, switch_result="failed")
    step.status["switch"] = None
    step.status["policyState"] = policystate.to_status(persisted(state, stored, now))
    what = "its Recreate fallback" if switch.fallback else "it"
    why = f"{what} not Ready within {waited:.0f}s"
    if blocked is not None:
        why += f" ({where}{cause})"
    step.status["decisions"] = _append(status, now, back.action, Reason.SWITCH_FAILED, back, why)
    step.status["lastDecisionReason"] = str(Reason.SWITCH_FAILED)
    step.events.append(
        ("Warning", str(Reason.SWITCH_FAILED), f"speculation {want}: {why}; rolled back")
    )
    return step


def _completed(
    status: dict[str, Any], switch: SwitchInProgress, want: SpecMode, now: float
) -> AutoStep:
    """The new engine is Ready and serves: the switch is over. After a fallback the event and
    the ledger give the downtime it took, measured from ``fallbackAt`` to Ready."""
    step = AutoStep(speculative=want.speculative, switch_result="completed")
    step.status["switch"] = None
    started = parse_time(switch.started_at)
    message = f"speculation {want} after {now - started:.0f}s ({switch.reason})"
    if switch.fallback_at:
        down = now - parse_time(switch.fallback_at)
        message += f"; fell back to Recreate: {down:.0f}s without a serving engine (measured)"
        step.status["decisions"] = _append(
            status, now, want.action, "SwitchCompleted", want, message
        )
    step.events.append(("Normal", "SwitchCompleted", message))
    return step


def _fall_back(
    status: dict[str, Any],
    stored: PolicyState | None,
    switch: SwitchInProgress,
    running: SpecMode | None,
    now: float,
    limit: float,
    ctx: PolicyContext,
    blocked: Blocked | None,
) -> AutoStep:
    """Retry the blocked switch as Recreate: the record gains ``fallback``/``fallbackAt`` and a
    second deadline (written before the engine is touched: desired.py's intent), the retry is
    counted in the hourly budget, and the ledger gives the modelled downtime."""
    want = SpecMode.from_status(switch.target)
    state = record_fell_back(stored, running, want, now)
    down = modelled_startup_s(ctx)
    waited = now - parse_time(switch.started_at)
    cause = switching.cause_text(blocked)
    message = (
        f"waited {waited:.0f}s, retried as Recreate (the old engine's GPUs freed first), "
        f"modelled downtime {down:.0f}s ({cause})"
    )
    step = AutoStep(speculative=want.speculative, switch_result="fellback")
    step.status["switch"] = switching.fallen_back(switch, now, now + limit)
    step.status["policyState"] = policystate.to_status(state)
    step.status["decisions"] = _append(
        status, now, want.action, DeadlineEnd.FALL_BACK, want, message
    )
    step.status["lastDecisionReason"] = str(DeadlineEnd.FALL_BACK)
    step.events.append(
        ("Warning", str(DeadlineEnd.FALL_BACK), f"switch to speculation {want}: {message}")
    )
    return step


def _cancel_switch(
    status: dict[str, Any],
    stored: PolicyState | None,
    switch: SwitchInProgress,
    policy: AutoSpeculation,
    obs: Observation | None,
    ctx: PolicyContext,
    now: float,
) -> AutoStep:
    """Cancel the switch under way when the policy says its reason ended (the old mode still
    serves: BlueGreen's Service has not moved, a RollingUpdate's surge pod is not Ready;
    ``autocycle.reconsider``, the call fleetsim makes); otherwise keep following it.

    A cancel renders the previous mode again: BlueGreen's standby is scaled back to zero with
    the Service still on the old mode (``bluegreen.plan``), a RollingUpdate goes back to the old
    pod template. It stays in the hourly switch budget.
    """
    want = SpecMode.from_status(switch.target)
    started = parse_time(switch.started_at)
    cancel = reconsider(obs, stored, want, switch.reason, started, now, policy, ctx)
    if cancel is None:
        return AutoStep(speculative=want.speculative)
    decision, state, keep = cancel
    back = state.mode.status
    step = AutoStep(
        speculative=state.mode.speculative, switch_result="cancelled", decision=decision
    )
    step.status["switch"] = None
    step.status["policyState"] = policystate.to_status(keep)
    why = f"{decision.inputs.cause}: {_summary(decision)}"
    step.status["decisions"] = _ledger(status, decision, state.mode, why)
    step.status["lastDecisionReason"] = str(decision.reason)
    step.events.append(
        (
            "Normal",
            str(Reason.SWITCH_CANCELLED),
            f"switch to speculation {want} ({switch.reason}) cancelled after "
            f"{now - started:.0f}s, before its engine was Ready; {back} kept serving ({why})",
        )
    )
    return step
