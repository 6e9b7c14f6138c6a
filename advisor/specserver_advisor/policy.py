"""The auto-speculation policy: decide to keep, enable or disable speculation each cycle.

A pure decision engine: ``decide(observation, state, policy, context, now, ...)`` returns a
``Decision`` and the next ``PolicyState``. Called by the operator each evaluation cycle, by
``specserver-advisor replay`` over recorded metrics and by ``fleetsim``. The state is plain
JSON (kept in the SpecServer status) so a restarted operator continues where it stopped.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

from specserver_advisor.models import AutoSpeculation
from specserver_advisor.switchcost import breaches_needed, overload_ended

ON, OFF = "on", "off"
EWMA = 0.3
#: A learned comparison needs this many samples in each mode before it overrides the model.
MIN_SAMPLES = 3
#: A learned throughput difference below this fraction counts as a tie.
LEARN_MARGIN = 0.05


@dataclass
class Observation:
    """One cycle's signals for one SpecServer; any field may be None or NaN."""

    ts: float
    mode: str | None = None
    accept_length: float | None = None
    ttft_p99_s: float | None = None
    ttft_p50_s: float | None = None
    tpot_p50_ms: float | None = None
    itl_p99_ms: float | None = None
    running: float | None = None
    queued: float | None = None
    output_tok_s: float | None = None
    kv_usage: float | None = None
    max_running_requests: float | None = None
    age_s: float | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Observation:
        known: dict[str, Any] = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        ts = _num(known.pop("ts", None))
        if ts is None:
            raise ValueError("observation has no numeric 'ts'")
        mode = known.get("mode")
        if mode is not None and mode not in (ON, OFF):
            raise ValueError(f"observation 'mode' must be 'on' or 'off', got {mode!r}")
        return cls(ts=ts, **known)


def _num(value: float | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) or math.isinf(number) else number


@dataclass
class PolicyContext:
    """What the performance model predicts for this target, draft and GPU."""

    #: (accept length, crossover concurrency) pairs, ascending accept length. ``math.inf``:
    #: speculation wins everywhere in range; 0: it never wins.
    crossover_by_accept: list[tuple[float, float]]
    #: Accept length below which speculation does not pay even at low load.
    break_even_accept: float
    prior_accept: float
    #: The On engine runs SGLang's ``--speculative-adaptive``: SGLang itself cuts the draft
    #: steps when acceptance is low, so low acceptance alone is no reason to restart without
    #: the draft (the policy still unloads it for load, queueing and measured losses).
    engine_adapts_steps: bool = False

    def crossover(self, accept: float) -> float:
        """Predicted crossover concurrency at an accept length (linear interpolation)."""
        table = self.crossover_by_accept
        if not table:
            return math.inf
        if accept <= table[0][0]:
            return table[0][1]
        for (a0, c0), (a1, c1) in itertools.pairwise(table):
            if a0 <= accept <= a1:
                if math.isinf(c0) or math.isinf(c1):
                    return c1 if accept - a0 > a1 - accept else c0
                return c0 + (c1 - c0) * (accept - a0) / (a1 - a0)
        return table[-1][1]


@dataclass
class PolicyState:
    """Everything the policy remembers between cycles (JSON round-trippable)."""

    mode: str = ON
    mode_since: float = 0.0
    last_switch: float | None = None
    switch_times: list[float] = field(default_factory=list)
    disable_breaches: int = 0
    enable_passes: int = 0
    queue_growth: int = 0
    last_queued: float | None = None
    last_accept: float | None = None
    #: The last switch was an exploration: reverting it is not held by the dwell time.
    exploring: bool = False
    #: The load band of the last cycle and for how many consecutive cycles it has held.
    last_band: str | None = None
    band_streak: int = 0
    #: band -> mode -> {"tok_s": ewma, "n": samples}
    bands: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        # Not dataclasses.asdict: its deep copy was most of the operator's per-object CPU.
        out = {name: getattr(self, name) for name in self.__dataclass_fields__}
        out["switch_times"] = list(self.switch_times)
        out["bands"] = {
            b: {m: dict(e) for m, e in modes.items()} for b, modes in self.bands.items()
        }
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PolicyState:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


@dataclass
class Decision:
    """The policy's answer for one cycle."""

    ts: float
    action: str  # keep | enable | disable
    reason: str
    mode: str  # mode after the decision
    inputs: dict[str, Any] = field(default_factory=dict)
    thresholds: dict[str, Any] = field(default_factory=dict)
    would: str | None = None  # in dry run: the action that was not taken

    def to_json(self) -> dict[str, Any]:
        out = {"ts": self.ts, "action": self.action, "reason": self.reason, "mode": self.mode}
        out.update(self.inputs)
        out["thresholds"] = self.thresholds
        if self.would:
            out["would"] = self.would
        return out


def band_of(load: float, accept: float) -> str:
    """Learning key: half-octave concurrency band x accept-length band (0.2 wide)."""
    step = max(0, round(2 * math.log2(max(1.0, load))))
    return f"{round(2 ** (step / 2))}@{round(accept * 5) / 5:.1f}"


def _learn(state: PolicyState, band: str, mode: str, score: float, now: float) -> None:
    entry = state.bands.setdefault(band, {}).setdefault(mode, {"score": score, "n": 0})
    entry["score"] = score if entry["n"] == 0 else (1 - EWMA) * entry["score"] + EWMA * score
    entry["n"] += 1
    entry["at"] = now


def score(tok_s: float, ttft_p99_s: float | None, slo_s: float) -> float:
    """What a cycle delivered: output throughput, scaled down when TTFT P99 misses its SLO."""
    if ttft_p99_s is None or ttft_p99_s <= slo_s:
        return tok_s
    return tok_s * slo_s / ttft_p99_s


def _fresh(entry: dict[str, float] | None, now: float, max_age: float) -> bool:
    if not entry:
        return False
    return entry["n"] >= MIN_SAMPLES and now - entry.get("at", now) <= max_age


def learned_preference(
    state: PolicyState, band: str, now: float = 0.0, max_age: float = math.inf
) -> str | None:
    """The mode that delivered more in this band, when both were seen enough, recently."""
    seen = state.bands.get(band, {})
    on, off = seen.get(ON), seen.get(OFF)
    if not on or not off or not _fresh(on, now, max_age) or not _fresh(off, now, max_age):
        return None
    if on["score"] > off["score"] * (1 + LEARN_MARGIN):
        return ON
    if off["score"] > on["score"] * (1 + LEARN_MARGIN):
        return OFF
    return None


def accept_floor(policy: AutoSpeculation, ctx: PolicyContext) -> float:
    """The configured floor, or 5% above the model's low-load break-even accept length."""
    return policy.accept_length_floor or round(ctx.break_even_accept * 1.05, 3)


@dataclass
class _Cycle:
    """One evaluation in progress: the state being updated and what the decision will show."""

    now: float
    state: PolicyState
    policy: AutoSpeculation
    inputs: dict[str, Any]
    thresholds: dict[str, Any]

    def finish(
        self, action: str, reason: str, would: str | None = None
    ) -> tuple[Decision, PolicyState]:
        st = self.state
        if action != "keep":
            st.mode = ON if action == "enable" else OFF
            st.mode_since = self.now
            st.last_switch = self.now
            st.switch_times.append(self.now)
            st.disable_breaches = st.enable_passes = st.queue_growth = 0
            st.exploring = reason == "ExploreOtherMode"
        decision = Decision(self.now, action, reason, st.mode, self.inputs, self.thresholds, would)
        return decision, st

    def gated(self, action: str, reason: str) -> tuple[Decision, PolicyState]:
        """Switch unless dwell time, the hourly budget or dry run forbid it."""
        st, pol = self.state, self.policy
        would = f"{action}:{reason}"
        # An exploration, a switch measured to deliver less, or one that landed after its
        # overload (no downtime either way) is undone without dwelling.
        revert = st.exploring or reason in ("SwitchDidNotPay", "OverloadEnded")
        if (
            not revert
            and st.last_switch is not None
            and self.now - st.last_switch < pol.min_dwell_seconds
        ):
            self.thresholds["min_dwell_s"] = pol.min_dwell_seconds
            return self.finish("keep", "DwellTime", would)
        if len(st.switch_times) >= pol.max_switches_per_hour:
            self.thresholds["max_switches_per_hour"] = pol.max_switches_per_hour
            return self.finish("keep", "SwitchBudgetExhausted", would)
        if pol.dry_run:
            return self.finish("keep", "DryRun", would)
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
        other = OFF if st.mode == ON else ON
        mine = seen.get(st.mode)
        if (
            _fresh(seen.get(other), self.now, pol.relearn_after_seconds)
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
        return self.gated("enable" if other == ON else "disable", "ExploreOtherMode")


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
    state = PolicyState.from_json(state.to_json())
    now = float(obs.ts)
    state.switch_times = [t for t in state.switch_times if now - t < 3600]
    floor = accept_floor(policy, ctx)
    inputs: dict[str, Any] = {
        k: _num(getattr(obs, k))
        for k in ("accept_length", "ttft_p99_s", "running", "queued", "output_tok_s", "age_s")
    }
    thresholds: dict[str, Any] = {
        "accept_floor": floor,
        "ttft_p99_slo_s": policy.ttft_p99_slo_seconds,
    }
    cycle = _Cycle(now, state, policy, inputs, thresholds)
    if spec_mode in ("Enabled", "Disabled"):
        target = ON if spec_mode == "Enabled" else OFF
        if state.mode != target:
            return cycle.finish("enable" if target == ON else "disable", "ManualMode")
        return cycle.finish("keep", "ManualMode")
    if paused:
        return cycle.finish("keep", "Paused")
    running, queued, age = inputs["running"], inputs["queued"], inputs["age_s"]
    if running is None or queued is None or age is None or age > policy.stale_after_seconds:
        thresholds["stale_after_s"] = policy.stale_after_seconds
        return cycle.finish("keep", "MetricsStale")
    load = running + queued
    inputs["load"] = load
    if inputs["accept_length"] is not None and inputs["accept_length"] < 1:
        # SGLang's gauge reads 0 when no verify step ran in the interval (an idle engine).
        inputs["accept_length"] = None
    accept = inputs["accept_length"] if state.mode == ON else None
    if accept:
        state.last_accept = accept
    expected_accept = accept or state.last_accept or ctx.prior_accept
    band = band_of(load, expected_accept)
    state.band_streak = state.band_streak + 1 if band == state.last_band else 1
    state.last_band = band
    if inputs["output_tok_s"] is not None and (obs.mode or state.mode) == state.mode:
        value = score(inputs["output_tok_s"], inputs["ttft_p99_s"], policy.ttft_p99_slo_seconds)
        _learn(state, band, state.mode, value, now)
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
        reason = _disable_reason(inputs, state, policy, floor, crossover, learned, ctx)
        state.enable_passes = 0
        state.disable_breaches = state.disable_breaches + 1 if reason else 0
        if not reason:
            return cycle.explore(band, crossover, crossover_prior) or cycle.finish(
                "keep", "WithinThresholds"
            )
        needed = breaches_needed(policy, state)
        thresholds["breaches"] = f"{state.disable_breaches}/{needed}"
        if state.disable_breaches < needed:
            return cycle.finish("keep", "BreachPending", would=f"disable:{reason}")
        return cycle.gated("disable", _after_switch(state, policy, now, reason))
    if ctx.engine_adapts_steps:
        expected_accept = max(expected_accept, floor)
    reason = _enable_reason(inputs, policy, floor, crossover, learned, expected_accept)
    state.disable_breaches = 0
    state.enable_passes = state.enable_passes + 1 if reason else 0
    if not reason:
        return cycle.explore(band, crossover, crossover_prior) or cycle.finish(
            "keep", "WithinThresholds"
        )
    if reason in ("LoadBelowCrossover", "OtherModeFasterHere") and overload_ended(
        state, policy, now, inputs["load"]
    ):
        return cycle.gated("enable", "OverloadEnded")
    thresholds["passes"] = f"{state.enable_passes}/{policy.enable_after_passes}"
    if state.enable_passes < policy.enable_after_passes:
        return cycle.finish("keep", "EnablePending", would=f"enable:{reason}")
    return cycle.gated("enable", _after_switch(state, policy, now, reason))


def _after_switch(state: PolicyState, policy: AutoSpeculation, now: float, reason: str) -> str:
    """Within the dwell after a switch, measured worse at the same load: the switch did not pay.

    The new mode's score in this band (learned since the switch) is below what the old mode
    delivered there; the policy reverts at once and says so.
    """
    recent = state.last_switch is not None and now - state.last_switch < policy.min_dwell_seconds
    return "SwitchDidNotPay" if reason == "OtherModeFasterHere" and recent else reason


def _disable_reason(
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


def _enable_reason(
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
