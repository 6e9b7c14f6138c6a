"""Fleet simulation's world: traces, what one tick serves in one mode, what a switch costs.

The performance model's prediction for Qwen3-8B + EAGLE-3 at each tick's load and acceptance,
turned into goodput under the SLOs. A switch costs what the operator's ``switchStrategy`` makes
it cost (``keeps_serving``), for as long as the replica takes to restart (``switch_seconds``:
longer for a group across nodes); a switch whose new engine finds no spare GPUs is blocked
until its deadline (``switch_lands``, ``deadline_ticks``). Pure; used by ``fleetsim`` and
``fleetsim_oracle``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from specserver_advisor.gpus import lookup_gpu
from specserver_advisor.models import AutoSpeculation, SwitchStrategy
from specserver_advisor.perf import adaptive, calibration
from specserver_advisor.perf.model import Prediction, predict
from specserver_advisor.perf.plan import Plan, PlanInputs, make_plan, weight_bytes_per_node
from specserver_advisor.policy.model import OFF, ON, PolicyContext
from specserver_advisor.policy.switchcost import group_restart_extra_s, switch_deadline_s
from specserver_advisor.sglang.flags import parse_server_argv

TICK_S = 30.0
#: From a switch's decision until the new engine is Ready (weights loaded, graphs captured).
STARTUP_S = 90.0
#: Whole ticks a switch takes: the new engine takes the traffic at the first tick after it.
SWITCH_TICKS = math.ceil(STARTUP_S / TICK_S)
#: The most nodes a replica may span (``spec.resources.nodes``' bound).
MAX_NODES = 64
#: The on engine with SGLang's adaptive steps (the draft stays loaded).
ON_ADAPTIVE = "on_adaptive"
MODES = (ON, OFF, ON_ADAPTIVE)


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
def base_plan(gpu: str = "L4", adaptive_steps: bool = False) -> Plan:
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


def switch_seconds(gpu: str = "L4", nodes: int = 1) -> float:
    """From a switch's decision until the new engine is Ready: ``STARTUP_S`` for one pod; a
    replica across ``nodes`` nodes, each with the base plan's weights, adds its slowest pod and
    the cross-node rendezvous (``switchcost.group_restart_extra_s``)."""
    return STARTUP_S + group_restart_extra_s(weight_bytes_per_node(base_plan(gpu)), nodes)


def switch_ticks(gpu: str = "L4", nodes: int = 1) -> int:
    """Whole ticks a switch takes (``SWITCH_TICKS`` on one node)."""
    return math.ceil(switch_seconds(gpu, nodes) / TICK_S)


def deadline_ticks(policy: AutoSpeculation, gpu: str = "L4", nodes: int = 1) -> int:
    """Whole ticks a blocked switch waits before it is cancelled or falls back: the operator's
    deadline (``switchcost.switch_deadline_s``: ``switchTimeoutSeconds``, or derived from the
    modelled start-up, ``switch_seconds``)."""
    ctx = PolicyContext([], 1.0, 1.0, restart_s=switch_seconds(gpu, nodes))
    return math.ceil(switch_deadline_s(policy, ctx) / TICK_S)


@cache
def predict_tick(concurrency: int, accept: float, mode: str, gpu: str = "L4") -> Prediction:
    plan = base_plan(gpu)
    scn = dataclasses.replace(plan.scenario, accept_length=accept)
    if mode == ON_ADAPTIVE:
        return adaptive.predict_adaptive(scn, concurrency, base_plan(gpu, True).cap_on)
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
    p = predict_tick(tick.concurrency, tick.accept_length, mode, gpu)
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


def keeps_serving(strategy: SwitchStrategy) -> bool:
    """Whether the old mode keeps serving while a switch's new engine starts (as the operator
    renders the strategy).

    ``Recreate``: the one Deployment's pod stops before the new one starts (Deployment strategy
    ``Recreate``), so the replica is down for ``STARTUP_S``. ``BlueGreen``: the other mode's
    Deployment starts while the Service still selects the old one, and the selector moves once
    it is Ready (``bluegreen.plan``): no downtime, the switch takes effect ``STARTUP_S`` later,
    and both engines hold GPUs meanwhile. ``RollingUpdate`` (maxSurge 1, maxUnavailable 0): the
    old pod stays until the surge pod is Ready.
    """
    return strategy != SwitchStrategy.RECREATE


def switch_lands(strategy: SwitchStrategy, spare_gpu: bool = True) -> bool:
    """Whether a switch's new engine gets its GPUs.

    A switch that keeps the old mode serving starts the new engine beside it: a BlueGreen
    standby needs each replica's GPUs again (replicas x gpus; whole nodes for a group across
    nodes), a RollingUpdate surge pod one replica's. Without spare GPUs it stays Pending
    (Unschedulable, over quota or held by Kueue), the old mode serves on, and at the deadline
    the operator cancels the switch or retries it as Recreate (``blockedSwitchFallback``).
    Recreate frees the replica's own GPUs first and always lands. fleetsim cannot see the
    cluster's free GPUs: the caller says (``spare_gpu``; ``specserver-advisor fleetsim
    --no-spare-gpu``: no spare GPUs, for every strategy).
    """
    return spare_gpu or strategy == SwitchStrategy.RECREATE
