"""Fleet simulation: traffic traces through the performance model, with restart costs.

Compares, per trace, four arms: ``auto`` (the policy, restarting the engine to switch), ``on``,
``off`` and ``on_adaptive`` (speculation on with SGLang's own ``--speculative-adaptive``: draft
loaded, steps per batch tier), plus ``auto_two_level`` (the policy over an adaptive On engine)
and an ``oracle`` that picks the best of on, off and on_adaptive in every interval and switches
for free: an upper bound on every arm; and a ``paid_oracle``, the best schedule knowing the
whole trace when every switch costs the modelled restart: the most any switching policy can
deliver (two-minute bursts are shorter than a restart, so it is close to always-on there, far
below the free oracle). Also reports the bands the policy learned and the
goodput learning added (auto against auto without exploration). Printed by
``specserver-advisor fleetsim``. Pure and deterministic.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from specserver_advisor import adaptive, calibration
from specserver_advisor.autocycle import evaluate
from specserver_advisor.gpus import lookup_gpu
from specserver_advisor.models import AutoSpeculation
from specserver_advisor.perfmodel import Prediction, predict
from specserver_advisor.plan import Plan, PlanInputs, make_plan, policy_context
from specserver_advisor.policy import (
    OFF,
    ON,
    Observation,
    PolicyState,
    learned_preference,
)
from specserver_advisor.sglang.flags import parse_server_argv

TICK_S = 30.0
STARTUP_S = 90.0
#: The on engine with SGLang's adaptive steps (the draft stays loaded).
ON_ADAPTIVE = "on_adaptive"
MODES = (ON, OFF, ON_ADAPTIVE)
STRATEGIES = ("auto", "auto_two_level", "on", "off", "on_adaptive", "oracle", "paid_oracle")


@dataclass(frozen=True)
class Tick:
    """Load during one evaluation interval."""

    concurrency: int
    accept_length: float


@dataclass(frozen=True)
class Trace:
    """A named sequence of ticks."""

    name: str
    ticks: tuple[Tick, ...]
    mixed: bool  # both modes are right part of the time

    @property
    def hours(self) -> float:
        return len(self.ticks) * TICK_S / 3600


def _ticks(
    hours: float, load: Callable[[float], float], accept: Callable[[float], float]
) -> tuple[Tick, ...]:
    n = int(hours * 3600 / TICK_S)
    return tuple(
        Tick(max(1, round(load(i * TICK_S))), round(accept(i * TICK_S), 3)) for i in range(n)
    )


def traces() -> list[Trace]:
    """The benchmark's traces (L4, Qwen3-8B + EAGLE-3)."""
    day = 24 * 3600.0
    out = [
        Trace(
            "diurnal",
            _ticks(24, lambda t: 2 + 46 * math.sin(math.pi * t / day) ** 2, lambda t: 2.7),
            mixed=True,
        ),
        # Two-minute spikes to 40 users every 40 minutes over a base of 6.
        Trace(
            "bursty", _ticks(4, lambda t: 40 if (t % 2400) < 120 else 6, lambda t: 2.7), mixed=False
        ),
        # Chat whose drafts rarely match (accept 1.15), then code (accept 3.2), at 10 users.
        Trace(
            "prompt_kind_step",
            _ticks(4, lambda t: 10, lambda t: 1.15 if t < 7200 else 3.2),
            mixed=True,
        ),
        # Prompts growing past the draft's trained context: acceptance decays 2.8 -> 1.1 in 3 h.
        Trace(
            "long_context_drift",
            _ticks(4, lambda t: 6, lambda t: max(1.1, 2.8 - 1.7 * t / 10800)),
            mixed=True,
        ),
    ]
    for level in (2, 12, 24, 40):
        out.append(
            Trace(f"steady_{level}", _ticks(2, _constant(level), _constant(2.7)), mixed=False)
        )
    return out


def _constant(value: float) -> Callable[[float], float]:
    return lambda _t: value


@cache
def _base_plan(gpu: str = "L4", adaptive_steps: bool = False) -> Plan:
    """Qwen3-8B + EAGLE-3 (3,1,4) at the L4 field's memory fraction, on ``gpu``.

    ``adaptive_steps``: the launch adds ``--speculative-adaptive`` (its resolution reserves the
    largest candidate's draft tokens per request, so the plan's cap is adaptive's own).
    """
    argv = ["--model-path", "Qwen/Qwen3-8B", *calibration.EAGLE3_314]
    argv += ["--mem-fraction-static", calibration.L4_FIELD_MFS]
    if adaptive_steps:
        argv.append("--speculative-adaptive")
    inputs = PlanInputs(
        parse_server_argv(argv).values,
        calibration.field_config("qwen3-8b"),
        calibration.field_config("qwen3-8b-eagle3"),
        lookup_gpu(gpu),
        accept_length=2.73,
        concurrency=[1, 8, 32],
    )
    return make_plan(inputs)


@cache
def _predict(concurrency: int, accept: float, mode: str, gpu: str = "L4") -> Prediction:
    plan = _base_plan(gpu)
    scn = dataclasses.replace(plan.scenario, accept_length=accept)
    if mode == ON_ADAPTIVE:
        return adaptive.predict_adaptive(scn, concurrency, _base_plan(gpu, True).cap_on)
    cap = plan.cap_on if mode == ON else plan.cap_off
    return predict(scn, concurrency, cap, mode == ON)


def _within(slo: float, mean: float) -> float:
    """Share of requests under an SLO when values spread uniformly over [0.5, 1.5] x mean."""
    if mean <= 0:
        return 1.0
    return min(1.0, max(0.0, (slo - 0.5 * mean) / mean))


@dataclass
class TickResult:
    """What one tick delivered."""

    tok_s: float
    good_tok_s: float
    ttft_p99_s: float


def serve(
    tick: Tick, mode: str, restarting_s: float, policy: AutoSpeculation, gpu: str = "L4"
) -> TickResult:
    """One tick in one mode; ``restarting_s`` seconds of it the replica is down."""
    p = _predict(tick.concurrency, tick.accept_length, mode, gpu)
    up = max(0.0, 1 - restarting_s / TICK_S)
    ttft = p.ttft_ms / 1000
    good = (
        p.output_tok_s
        * _within(policy.ttft_p99_slo_seconds, ttft)
        * _within(policy.tpot_slo_milliseconds, p.tpot_ms)
    )
    p99 = p.ttft_p99_ms / 1000 + restarting_s
    return TickResult(p.output_tok_s * up, good * up, p99)


def run_static(
    trace: Trace, mode: str, policy: AutoSpeculation, gpu: str = "L4"
) -> list[TickResult]:
    """A replica that never switches."""
    return [serve(t, mode, 0.0, policy, gpu) for t in trace.ticks]


@dataclass
class AutoRun:
    """What the policy arm delivered and learned over one trace."""

    results: list[TickResult]
    switches: int
    state: PolicyState


def run_auto(
    trace: Trace, policy: AutoSpeculation, on_engine: str = ON, gpu: str = "L4"
) -> AutoRun:
    """The policy deciding every tick from what the replica showed in the previous one.

    ``on_engine`` is what the policy's "on" runs: ``on`` (fixed steps) or ``on_adaptive``
    (two-level control: SGLang adapts the steps, the policy decides whether the draft is loaded).
    """
    ctx = policy_context(_base_plan(gpu), policy)
    ctx.engine_adapts_steps = on_engine == ON_ADAPTIVE
    state, mode, restart_left = PolicyState(mode=ON), ON, 0.0
    stored: str | None = None
    results: list[TickResult] = []
    switches = 0
    for i, tick in enumerate(trace.ticks):
        down = min(TICK_S, restart_left)
        restart_left -= down
        engine = on_engine if mode == ON else OFF
        result = serve(tick, engine, down, policy, gpu)
        results.append(result)
        p = _predict(tick.concurrency, tick.accept_length, engine, gpu)
        obs = Observation(
            ts=0.0,
            accept_length=tick.accept_length if mode == ON else None,
            ttft_p99_s=result.ttft_p99_s,
            running=p.running,
            queued=p.queued,
            output_tok_s=result.tok_s if not down else None,
            age_s=5.0 if not down else 1e9,
        )
        # The operator's own evaluation, state stored and reloaded as JSON between cycles.
        decision, state, stored = evaluate(obs, stored, mode, (i + 1) * TICK_S, policy, ctx)
        if decision.action != "keep":
            mode, restart_left, switches = state.mode, STARTUP_S, switches + 1
    return AutoRun(results, switches, state)


def run_oracle(
    trace: Trace, policy: AutoSpeculation, gpu: str = "L4"
) -> tuple[list[TickResult], int]:
    """The best of on, off and on_adaptive in every interval, switching for free.

    An upper bound on every arm: no arm can beat the best mode of each interval, and no
    switch here costs a restart.
    """
    results: list[TickResult] = []
    switches, last = 0, None
    for tick in trace.ticks:
        served = {m: serve(tick, m, 0.0, policy, gpu) for m in MODES}
        best = max(MODES, key=lambda m: served[m].good_tok_s)
        if last is not None and best != last:
            switches += 1
        results.append(served[best])
        last = best
    return results, switches


def paid_oracle_table(
    trace: Trace, policy: AutoSpeculation, gpu: str = "L4"
) -> tuple[list[dict[str, TickResult]], list[dict[str, float]], list[dict[str, str]]]:
    """The paid oracle's dynamic programme: what each mode serves per tick, and the best totals.

    ``best[i][m]``: the most goodput (summed over ticks) from tick ``i`` on with the replica up
    in mode ``m`` at tick ``i``; ``choice[i][m]``: the mode it runs next (another mode: a switch
    decided at the end of tick ``i``, the replica down for the next ``STARTUP_S``, as in the
    policy arm).
    """
    ticks = trace.ticks
    n, down = len(ticks), math.ceil(STARTUP_S / TICK_S)
    served = [{m: serve(t, m, 0.0, policy, gpu) for m in MODES} for t in ticks]
    best: list[dict[str, float]] = [dict.fromkeys(MODES, 0.0) for _ in range(n + 1)]
    choice: list[dict[str, str]] = [dict.fromkeys(MODES, "") for _ in range(n)]
    for i in range(n - 1, -1, -1):
        for m in MODES:
            options = {m: best[i + 1][m]}
            for other in MODES:
                if other != m:
                    options[other] = best[min(n, i + 1 + down)][other]
            nxt = max(options, key=lambda k: options[k])
            best[i][m] = served[i][m].good_tok_s + options[nxt]
            choice[i][m] = nxt
    return served, best, choice


def run_paid_oracle(trace: Trace, policy: AutoSpeculation, gpu: str = "L4") -> list[TickResult]:
    """The best schedule of on, off and on_adaptive knowing the whole trace, paying the restart.

    Dynamic programming over the trace (``paid_oracle_table``): every switch leaves the replica
    down for ``STARTUP_S`` as in the policy arm, with no dwell time or switch budget, and the
    first mode is free. The most any switching policy can deliver on this trace with the
    modelled restart; the free-switching ``oracle`` is an upper bound on it.
    """
    served, best, choice = paid_oracle_table(trace, policy, gpu)
    n, down = len(served), math.ceil(STARTUP_S / TICK_S)
    mode = max(MODES, key=lambda m: best[0][m])
    results: list[TickResult] = []
    i = 0
    while i < n:
        results.append(served[i][mode])
        nxt = choice[i][mode]
        if nxt != mode:
            for j in range(i + 1, min(n, i + 1 + down)):
                results.append(TickResult(0.0, 0.0, served[j][nxt].ttft_p99_s + STARTUP_S))
            i += down
        mode = nxt
        i += 1
    return results


def learned_bands(state: PolicyState) -> dict[str, str]:
    """Bands where the policy's own measurements name a winner (band -> mode)."""
    out = {}
    for band in sorted(state.bands):
        pref = learned_preference(state, band)
        if pref:
            out[band] = pref
    return out


def _p99(results: list[TickResult]) -> float:
    weighted = sorted((r.ttft_p99_s, r.tok_s) for r in results)
    total = sum(w for _, w in weighted) or 1.0
    acc = 0.0
    for value, w in weighted:
        acc += w
        if acc >= 0.99 * total:
            return value
    return weighted[-1][0] if weighted else 0.0


def simulate(policy: AutoSpeculation | None = None, gpu: str = "L4") -> list[dict[str, Any]]:
    """Run every trace and arm on ``gpu`` (L4 by default); one result object per trace."""
    policy = policy or AutoSpeculation()
    no_explore = policy.model_copy(update={"explore": False})
    rows = []
    for trace in traces():
        auto = run_auto(trace, policy, ON, gpu)
        two_level = run_auto(trace, policy, ON_ADAPTIVE, gpu)
        blind = run_auto(trace, no_explore, ON, gpu)
        runs = {
            "auto": (auto.results, auto.switches),
            "auto_two_level": (two_level.results, two_level.switches),
            "on": (run_static(trace, ON, policy, gpu), 0),
            "off": (run_static(trace, OFF, policy, gpu), 0),
            "on_adaptive": (run_static(trace, ON_ADAPTIVE, policy, gpu), 0),
            "oracle": run_oracle(trace, policy, gpu),
            "paid_oracle": (run_paid_oracle(trace, policy, gpu), 0),
        }
        goodput = {k: _mean_good(res) for k, (res, _) in runs.items()}
        oracle = goodput["oracle"]
        rows.append(
            {
                "trace": trace.name,
                "mixed": trace.mixed,
                "hours": trace.hours,
                "goodput": {k: round(v, 1) for k, v in goodput.items()},
                "p99_ttft_s": {k: round(_p99(res), 2) for k, (res, _) in runs.items()},
                "switches_per_hour": round(auto.switches / trace.hours, 2),
                "oracle_switches_per_hour": round(runs["oracle"][1] / trace.hours, 2),
                "adaptive_vs_oracle": round(goodput["auto"] / oracle, 3) if oracle else 1.0,
                "adaptive_vs_paid_oracle": round(goodput["auto"] / goodput["paid_oracle"], 3)
                if goodput["paid_oracle"]
                else 1.0,
                "on_adaptive_vs_oracle": round(goodput["on_adaptive"] / oracle, 3)
                if oracle
                else 1.0,
                "learned_bands": learned_bands(auto.state),
                "learning_gain": round(goodput["auto"] - _mean_good(blind.results), 1),
            }
        )
    return rows


def _mean_good(results: list[TickResult]) -> float:
    return sum(r.good_tok_s for r in results) / len(results)


def render_table(rows: list[dict[str, Any]]) -> str:
    """The benchmark table."""
    head = (
        "| trace | goodput auto | two-level | on | off | on+adaptive | oracle | paid oracle | "
        "auto/oracle | auto/paid oracle | "
        "P99 TTFT s auto / on / off / on+adaptive | switches/h | learned bands | learning gain |"
    )
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|"]
    for r in rows:
        g, t = r["goodput"], r["p99_ttft_s"]
        lines.append(
            f"| {r['trace']} | {g['auto']:.1f} | {g['auto_two_level']:.1f} | {g['on']:.1f} | "
            f"{g['off']:.1f} | {g['on_adaptive']:.1f} | {g['oracle']:.1f} | "
            f"{g['paid_oracle']:.1f} | {r['adaptive_vs_oracle']:.3f} | "
            f"{r['adaptive_vs_paid_oracle']:.3f} | "
            f"{t['auto']} / {t['on']} / {t['off']} / {t['on_adaptive']} | "
            f"{r['switches_per_hour']} | {len(r['learned_bands'])} | {r['learning_gain']:+.1f} |"
        )
    return "\n".join(lines)
