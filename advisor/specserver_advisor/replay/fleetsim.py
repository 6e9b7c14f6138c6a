"""Fleet simulation: traffic traces through the performance model, paying for each switch.

Compares, per trace, four arms: ``auto`` (the policy, switching the engine as the SpecServer's
``switchStrategy`` does), ``on``, ``off`` and ``on_adaptive`` (speculation on with SGLang's own
``--speculative-adaptive``: draft loaded, steps per batch tier), plus ``auto_two_level`` (the
policy over an adaptive On engine) and the bounds of ``fleetsim_oracle``: the ``oracle`` (best
mode per interval, free switches: an upper bound on every arm) and the ``paid_oracle`` (the best
schedule knowing the whole trace, each switch priced as the strategy prices it). Under
``Recreate`` a switch is a restart: the replica serves nothing until the new engine is Ready
(two-minute bursts are shorter than that, so the paid oracle is close to always-on there).
Under ``BlueGreen`` the old mode serves until the new engine is Ready (the switch lands
``STARTUP_S`` later, more for a group across nodes: ``fleetworld.switch_seconds``; no
downtime) and the switch costs GPU time instead, reported apart from goodput. Also reports
the bands the policy learned and the goodput learning added (auto against auto without
exploration). Printed by ``specserver-advisor fleetsim``. Pure and
deterministic.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from specserver_advisor.models import AutoSpeculation
from specserver_advisor.perf.plan import policy_context
from specserver_advisor.policy.autocycle import (
    evaluate,
    reconsider,
    record_blocked,
    record_fell_back,
)
from specserver_advisor.policy.model import (
    KEEP,
    OFF,
    ON,
    Observation,
    PolicyState,
    SpecMode,
    learned_preference,
)
from specserver_advisor.policy.switchcost import recreate_fallback_allowed
from specserver_advisor.replay.fleetbounds import run_oracle, run_paid_oracle
from specserver_advisor.replay.fleetworld import (
    ON_ADAPTIVE,
    TICK_S,
    Tick,
    TickResult,
    Trace,
    base_plan,
    deadline_ticks,
    keeps_serving,
    predict_tick,
    run_static,
    serve,
    switch_lands,
    switch_seconds,
    switch_ticks,
    traces,
)

#: The arms each trace reports.
ARMS = ("auto", "auto_two_level", "on", "off", "on_adaptive", "oracle", "paid_oracle")


@dataclass
class AutoRun:
    """What the policy arm delivered and learned over one trace."""

    results: list[TickResult]
    switches: int
    state: PolicyState
    #: GPU-seconds both engines ran side by side (a switch that keeps the old mode serving),
    #: counting only the ticks a cancelled switch's standby ran.
    switch_gpu_s: float = 0.0
    #: Switches cancelled before the new engine was Ready (``autocycle.reconsider``).
    cancelled: int = 0
    #: The first tick each landed switch's new mode served.
    landed_at: list[int] = field(default_factory=list)
    #: Switches whose new engine never got its GPUs, cancelled at the deadline
    #: (``autocycle.record_blocked``).
    blocked: int = 0
    #: Blocked switches retried as Recreate at the deadline (``blockedSwitchFallback``).
    fell_back: int = 0
    #: The tick each switch that reached its deadline blocked (either end) was decided at.
    blocked_at: list[int] = field(default_factory=list)


@dataclass
class _Switch:
    """A switch under way in ``run_auto``: ticks left, and whether the old mode serves them."""

    left: int
    serving: bool
    #: Its new engine never gets GPUs: at the end the deadline passes (Cancel or Recreate).
    blocked: bool = False
    #: The tick it was decided at.
    decided: int = 0


def run_auto(
    trace: Trace,
    policy: AutoSpeculation,
    on_engine: str = ON,
    gpu: str = "L4",
    spare_gpu: bool = True,
    nodes: int = 1,
) -> AutoRun:
    """The policy deciding every tick from what the replica showed in the previous one.

    ``on_engine`` is what the policy's "on" runs: ``on`` (fixed steps) or ``on_adaptive``
    (two-level control: SGLang adapts the steps, the policy decides whether the draft is loaded).
    A switch takes ``switch_ticks`` ticks (more for a replica across ``nodes`` nodes, whose
    longer restart the policy's context also carries), priced by ``policy.switch_strategy``:
    the replica is down (Recreate) or the old mode keeps serving (BlueGreen, RollingUpdate).
    Without ``spare_gpu`` a switch that keeps the old mode serving is blocked (its standby or
    surge pod needs a replica's GPUs, whole nodes for a group, and stays Pending): the old mode
    serves until the deadline (``switchcost.switch_deadline_s``), no gain and no extra GPUs,
    then, as the operator does, the switch is retried as Recreate where the spec and the
    budget allow it (``recreate_fallback_allowed``: the replica is down for a restart, then
    the new mode serves) or cancelled (``autocycle.record_blocked``: Auto backs off). While a
    switch that keeps the old mode serving is under way the policy is asked each tick, as the
    operator asks it, whether to cancel it (``autocycle.reconsider``); a cancelled switch
    stops, the old mode serving on.
    """
    ctx = policy_context(base_plan(gpu), policy)
    ctx.engine_adapts_steps = on_engine == ON_ADAPTIVE
    ctx.restart_extra_s = switch_seconds(gpu, nodes) - switch_seconds(gpu)
    ctx.restart_s = switch_seconds(gpu, nodes)
    serves = keeps_serving(policy.switch_strategy)
    lands = switch_lands(policy.switch_strategy, spare_gpu)
    restart = switch_ticks(gpu, nodes)
    deadline = deadline_ticks(policy, gpu, nodes)
    state, mode, old = PolicyState(mode=ON), ON, ON
    switch: _Switch | None = None
    stored: PolicyState | None = None
    run = AutoRun([], 0, state)
    results = run.results
    started = 0.0
    reason = ""
    for i, tick in enumerate(trace.ticks):
        now = (i + 1) * TICK_S
        engine = on_engine if mode == ON else OFF
        if switch is not None:
            switch.left -= 1
            if not switch.serving:  # a restart: the replica is down, then the new mode serves
                results.append(serve(tick, engine, TICK_S, policy, gpu))
                if not switch.left:
                    run.landed_at.append(i + 1)
                    switch = None
                continue
            serving = on_engine if old == ON else OFF
            result = serve(tick, serving, 0.0, policy, gpu)
            results.append(result)
            if not switch.blocked:
                run.switch_gpu_s += TICK_S  # the standby ran this tick
            if not switch.left:
                if not switch.blocked:
                    run.landed_at.append(i + 1)
                    switch = None
                    continue
                run.blocked_at.append(switch.decided)
                if recreate_fallback_allowed(policy, state, now):
                    stored = record_fell_back(stored, old, mode, now)
                    state = stored.copied()
                    run.fell_back += 1
                    switch = _Switch(restart, serving=False)
                else:
                    stored = record_blocked(stored, old, mode, now, policy, ctx)
                    state, mode, switch = stored.copied(), old, None
                    run.blocked += 1
                continue
            # The operator asks the policy each cycle whether the switch should be cancelled.
            obs = _observation(tick, result, serving, old, gpu)
            cancel = reconsider(obs, stored, mode, reason, started, now, policy, ctx)
            if cancel is not None:
                _, state, stored = cancel
                mode, switch = old, None
                run.cancelled += 1
            continue
        result = serve(tick, engine, 0.0, policy, gpu)
        results.append(result)
        obs = _observation(tick, result, engine, mode, gpu)
        # The operator's own evaluation, the state it stores handed back the next cycle.
        decision, state, stored = evaluate(obs, stored, mode, now, policy, ctx)
        if decision.action != KEEP:
            old, mode = mode, state.mode
            started, reason = now, decision.reason
            run.switches += 1
            if lands:
                switch = _Switch(restart, serving=serves)
            else:
                switch = _Switch(deadline, serving=True, blocked=True, decided=i + 1)
    run.state = state
    return run


def _observation(tick: Tick, result: TickResult, engine: str, mode: str, gpu: str) -> Observation:
    """What the operator reads after a tick served by ``engine`` (in policy mode ``mode``)."""
    p = predict_tick(tick.concurrency, tick.accept_length, engine, gpu)
    return Observation(
        ts=0.0,
        accept_length=tick.accept_length if mode == ON else None,
        ttft_p99_s=result.ttft_p99_s,
        running=p.running,
        queued=p.queued,
        output_tok_s=result.tok_s,
        age_s=5.0,
    )


def learned_bands(state: PolicyState) -> dict[str, SpecMode]:
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


def simulate(
    policy: AutoSpeculation | None = None, gpu: str = "L4", spare_gpu: bool = True, nodes: int = 1
) -> list[dict[str, Any]]:
    """Run every trace and arm on ``gpu`` (L4 by default); one result object per trace.

    Switches are priced by ``policy.switch_strategy`` (the SpecServer's); ``spare_gpu``: a
    RollingUpdate surge pod finds a GPU (``fleetsim_model.switch_lands``); ``nodes``: the
    replica is a group across that many nodes, each holding the same weights, whose restart
    is longer (``fleetworld.switch_seconds``).
    """
    policy = policy or AutoSpeculation()
    no_explore = policy.model_copy(update={"explore": False})
    rows = []
    for trace in traces():
        auto = run_auto(trace, policy, ON, gpu, spare_gpu, nodes)
        two_level = run_auto(trace, policy, ON_ADAPTIVE, gpu, spare_gpu, nodes)
        blind = run_auto(trace, no_explore, ON, gpu, spare_gpu, nodes)
        paid, paid_switches = run_paid_oracle(trace, policy, gpu, spare_gpu, nodes)
        runs = {
            "auto": (auto.results, auto.switches),
            "auto_two_level": (two_level.results, two_level.switches),
            "on": (run_static(trace, ON, policy, gpu), 0),
            "off": (run_static(trace, OFF, policy, gpu), 0),
            "on_adaptive": (run_static(trace, ON_ADAPTIVE, policy, gpu), 0),
            "oracle": run_oracle(trace, policy, gpu),
            "paid_oracle": (paid, paid_switches),
        }
        goodput = {k: _mean_good(res) for k, (res, _) in runs.items()}
        oracle = goodput["oracle"]
        rows.append(
            {
                "trace": trace.name,
                "switch_strategy": str(policy.switch_strategy),
                "keeps_serving": keeps_serving(policy.switch_strategy),
                "switch_lands": switch_lands(policy.switch_strategy, spare_gpu),
                "nodes": nodes,
                "switch_s": round(switch_seconds(gpu, nodes), 1),
                "mixed": trace.mixed,
                "hours": trace.hours,
                "goodput": {k: round(v, 1) for k, v in goodput.items()},
                "p99_ttft_s": {k: round(_p99(res), 2) for k, (res, _) in runs.items()},
                "switches": auto.switches,
                "switches_per_hour": round(auto.switches / trace.hours, 2),
                "cancelled_switches_per_hour": round(auto.cancelled / trace.hours, 2),
                # Switches whose new engine found no spare GPUs (``--no-spare-gpu``): decided,
                # waited out to the deadline, then cancelled (Auto backs off) or fell back.
                "blocked_fallback": str(policy.blocked_switch_fallback),
                "deadline_s": deadline_ticks(policy, gpu, nodes) * TICK_S,
                "blocked_switches": auto.blocked,
                "fell_back": auto.fell_back,
                "blocked_switches_per_hour": round(len(auto.blocked_at) / trace.hours, 2),
                "blocked_first_hour": sum(t * TICK_S <= 3600 for t in auto.blocked_at),
                "blocked_last_hour": sum(
                    t * TICK_S > (trace.hours - 1) * 3600 for t in auto.blocked_at
                ),
                "blocked_gaps_s": [
                    (b - a) * TICK_S for a, b in itertools.pairwise(auto.blocked_at)
                ],
                "oracle_switches_per_hour": round(runs["oracle"][1] / trace.hours, 2),
                "paid_oracle_switches_per_hour": round(paid_switches / trace.hours, 2),
                # Both engines' GPUs during a switch that keeps the old mode serving.
                "switch_gpu_s_per_hour": round(auto.switch_gpu_s / trace.hours, 1),
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
    """The benchmark table, under a line saying how a switch was priced."""
    lines = []
    if rows:
        first = rows[0]
        how = (
            f"the replica serves nothing until the new engine is Ready ({first['switch_s']:.0f} s)"
            if not first["keeps_serving"]
            else f"the old mode serves until the new engine is Ready ({first['switch_s']:.0f} s); "
            "both hold GPUs meanwhile"
            if first["switch_lands"]
            else "no spare GPUs: the new engine stays Pending, the old mode serves until the "
            f"deadline ({first['deadline_s']:.0f} s), then blockedSwitchFallback "
            f"{first['blocked_fallback']}"
        )
        across = f" (a group across {first['nodes']} nodes)" if first["nodes"] > 1 else ""
        lines += [f"switchStrategy {first['switch_strategy']}{across}: {how}", ""]
        if not first["switch_lands"]:
            lines += [_blocked_table(rows), ""]
    lines.append(
        "| trace | goodput auto | two-level | on | off | on+adaptive | oracle | paid oracle | "
        "auto/oracle | auto/paid oracle | "
        "P99 TTFT s auto / on / off / on+adaptive | switches/h | switch GPU-s/h | "
        "learned bands | learning gain |"
    )
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|")
    for r in rows:
        g, t = r["goodput"], r["p99_ttft_s"]
        lines.append(
            f"| {r['trace']} | {g['auto']:.1f} | {g['auto_two_level']:.1f} | {g['on']:.1f} | "
            f"{g['off']:.1f} | {g['on_adaptive']:.1f} | {g['oracle']:.1f} | "
            f"{g['paid_oracle']:.1f} | {r['adaptive_vs_oracle']:.3f} | "
            f"{r['adaptive_vs_paid_oracle']:.3f} | "
            f"{t['auto']} / {t['on']} / {t['off']} / {t['on_adaptive']} | "
            f"{r['switches_per_hour']} | {r['switch_gpu_s_per_hour']:.0f} | "
            f"{len(r['learned_bands'])} | {r['learning_gain']:+.1f} |"
        )
    return "\n".join(lines)


def _blocked_table(rows: list[dict[str, Any]]) -> str:
    """Per trace: the switches that found no GPUs, how they ended, and goodput against the
    mode Auto starts in (On) kept all along."""
    lines = [
        "| trace | hours | switches decided | blocked to the deadline | in the first hour | "
        "in the last hour | longest gap between them, s | fell back to Recreate | "
        "goodput auto | goodput staying On | auto - staying |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        g = r["goodput"]
        gap = max(r["blocked_gaps_s"], default=0.0)
        lines.append(
            f"| {r['trace']} | {r['hours']:g} | {r['switches']} | "
            f"{r['blocked_switches'] + r['fell_back']} | {r['blocked_first_hour']} | "
            f"{r['blocked_last_hour']} | {gap:.0f} | {r['fell_back']} | "
            f"{g['auto']:.1f} | {g['on']:.1f} | {g['auto'] - g['on']:+.1f} |"
        )
    return "\n".join(lines)
