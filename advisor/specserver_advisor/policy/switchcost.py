"""What a switch costs the auto-speculation policy under the SpecServer's ``switchStrategy``.

Recreate restarts the engine: the replica serves nothing until the new one is Ready, so an
overload is confirmed over ``disableAfterBreaches`` evaluations. BlueGreen and RollingUpdate
keep the old mode serving meanwhile: a switch costs no downtime, only the new engine's GPU
time, so an overload is confirmed sooner and a switch that landed after its overload ended is
undone at once, and a switch whose reason ended before the new engine is Ready is cancelled
(``cancel_reason``). How long a restart takes is modelled here too (``restart_seconds``): a
LeaderWorkerSet group across nodes restarts slower than one pod, and an overload must outlast
the extra before a switch is worth it (``breaches_needed``), and how long a switch may wait for
its new engine before it is cancelled or falls back (``switch_deadline_s``). Pure; called by
``policy.decide``, ``autocycle.reconsider``, ``perf.plan.policy_context`` and ``fleetsim``.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from specserver_advisor.models import AutoSpeculation, BlockedSwitchFallback, SwitchStrategy
from specserver_advisor.policy.model import (
    OFF,
    ON,
    PolicyContext,
    PolicyState,
    Readings,
    Reason,
    SpecMode,
)

#: A pod's start before it reads weights: the old pod's termination, scheduling, the
#: container's start, Python, torch and SGLang imports and the CUDA context (an assumption
#: for a cached image, stated in docs/advisor.md).
POD_START_S = 30.0
#: What one node reads its checkpoint shards at, GB/s (a local NVMe or a node's PVC mount:
#: sequential reads of safetensors files; every node reads from its own storage at once).
STORAGE_GBS = 1.0
#: CUDA-graph capture of the decode batch sizes on each rank after the weights load (all
#: ranks capture at once; a rank's capture is the same on any node count).
GRAPH_CAPTURE_S = 30.0
#: Across nodes: NCCL's bootstrap over TCP to the leader's rendezvous port and its
#: inter-node communicators (IB/RoCE queue pairs) before the first collective, once a group.
RENDEZVOUS_S = 20.0
#: Spread of one pod's start-to-ready time (coefficient of variation: storage, page cache,
#: scheduling); a group is Ready only when its slowest pod is.
POD_SPREAD = 0.10


def restart_seconds(weight_bytes_per_node: float, nodes: int = 1) -> float:
    """From a restart until a replica of ``nodes`` pods is Ready again.

    Each pod starts (``POD_START_S``), reads its node's share of the weights from its own
    storage (all nodes in parallel, at ``STORAGE_GBS``) and captures its CUDA graphs; across
    nodes the group then meets at the leader's rendezvous (``RENDEZVOUS_S``), and it is
    Ready only when its slowest pod is: the expected maximum of ``nodes`` pod times spread by
    ``POD_SPREAD`` (about ``1 + spread * sqrt(2 ln n)``). The same weights per node restart
    slower across more nodes; ``group_restart_extra_s`` is by how much.
    """
    nodes = max(1, nodes)
    pod = POD_START_S + max(0.0, weight_bytes_per_node) / (STORAGE_GBS * 1e9) + GRAPH_CAPTURE_S
    slowest = pod * (1 + POD_SPREAD * math.sqrt(2 * math.log(nodes)))
    return slowest + (RENDEZVOUS_S if nodes > 1 else 0.0)


#: A switch's deadline is the modelled start-up plus slack for what the model leaves out:
#: ``DEADLINE_SLACK_FACTOR`` times the start-up (its spread, a cold page cache, a slower disk),
#: but at least ``DEADLINE_MIN_SLACK_S`` (an uncached SGLang image is gigabytes to pull, and a
#: cluster autoscaler takes minutes to add a GPU node) and at most ``DEADLINE_MAX_SLACK_S``.
DEADLINE_SLACK_FACTOR = 2.0
DEADLINE_MIN_SLACK_S = 600.0
DEADLINE_MAX_SLACK_S = 1800.0
#: No derived deadline is longer than an hour (the longest back-off: ``autocycle.BACKOFF_CAP_S``)
#: unless the modelled start-up itself is longer: then start-up + ``DEADLINE_MIN_SLACK_S``.
DEADLINE_CAP_S = 3600.0


def modelled_startup_s(ctx: PolicyContext) -> float:
    """Seconds the new engine of a switch takes to be Ready as modelled: ``ctx.restart_s``
    (its weights per node and node count, ``perf.plan.policy_context``), else one pod with no
    weights plus the context's multi-node extra (a launch the advisor could not plan)."""
    if ctx.restart_s is not None and math.isfinite(ctx.restart_s) and ctx.restart_s > 0:
        return ctx.restart_s
    return restart_seconds(0.0) + max(0.0, ctx.restart_extra_s)


def switch_deadline_s(policy: AutoSpeculation, ctx: PolicyContext) -> float:
    """Seconds a switch waits for its new engine to be Ready before it is cancelled or falls
    back: ``switchTimeoutSeconds`` when set, else derived from the modelled start-up.

    Derived: start-up + slack, slack = ``DEADLINE_SLACK_FACTOR`` x start-up within
    [``DEADLINE_MIN_SLACK_S``, ``DEADLINE_MAX_SLACK_S``], the whole at most ``DEADLINE_CAP_S``
    but never less than start-up + ``DEADLINE_MIN_SLACK_S`` (the cap never gives up on an
    engine the model says is still loading).
    The start-up model assumes a cached image on a node that is there; the slack is what a
    healthy switch may need beyond it, so a switch that is merely slow is not cancelled, while
    one whose engine cannot be placed is given up within about ten minutes for a small model
    and within an hour for the largest (a node's weights read at ``STORAGE_GBS``). Too short
    wastes a standby that would have landed (and backs Auto off); too long holds the switch,
    and under Recreate the replica, without a serving new engine.
    """
    if policy.switch_timeout_seconds is not None:
        return float(policy.switch_timeout_seconds)
    startup = modelled_startup_s(ctx)
    slack = min(max(DEADLINE_SLACK_FACTOR * startup, DEADLINE_MIN_SLACK_S), DEADLINE_MAX_SLACK_S)
    return max(min(startup + slack, DEADLINE_CAP_S), startup + DEADLINE_MIN_SLACK_S)


def recreate_fallback_allowed(policy: AutoSpeculation, state: PolicyState, now: float) -> bool:
    """A switch blocked at its deadline is retried as Recreate (``SwitchFellBack``): the spec
    allows it (``blockedSwitchFallback: Recreate``) and the hourly switch budget has room for
    the extra restart (``state.switch_times`` of the last hour, the blocked switch counted,
    below ``maxSwitchesPerHour``). Otherwise the switch is cancelled (``SwitchBlocked``)."""
    if policy.blocked_switch_fallback != BlockedSwitchFallback.RECREATE:
        return False
    recent = [t for t in state.switch_times if now - t < 3600]
    return len(recent) < policy.max_switches_per_hour


@dataclass(frozen=True)
class SpareNeed:
    """What a speculation switch needs free in the cluster beside the running engines."""

    #: GPUs beyond the replicas' own.
    gpus: int
    #: Whole nodes among them (a LeaderWorkerSet group across nodes takes whole nodes); 0 on
    #: one node, where the GPUs may sit on any nodes with room.
    nodes: int
    #: Whether the old mode keeps serving while the new engine starts (no downtime).
    keeps_serving: bool


def spare_gpus(
    replicas: int, gpus: int, nodes: int = 1, max_surge: int = 1
) -> dict[SwitchStrategy, SpareNeed]:
    """Per ``switchStrategy``, the spare GPUs a switch of this shape needs to land without
    downtime. BlueGreen starts the other mode's engine for every replica beside the old one:
    ``replicas x gpus`` (whole nodes, ``replicas x nodes``, for a group across nodes).
    RollingUpdate with a surge of one (``maxSurge`` 1) starts one new replica at a time: one
    replica's GPUs (its whole nodes across nodes); with ``maxSurge`` 0 it restarts in place,
    with downtime, and needs none. Recreate stops the old engine first: none, and the replica
    is down for a restart. Without them the new engine stays Pending until the deadline
    (``switch_deadline_s``), then the switch is cancelled or falls back to Recreate."""
    replicas, gpus, nodes = max(0, replicas), max(0, gpus), max(1, nodes)
    whole = nodes if nodes > 1 else 0
    surge = 1 if max_surge else 0
    return {
        SwitchStrategy.BLUE_GREEN: SpareNeed(replicas * gpus, replicas * whole, True),
        SwitchStrategy.ROLLING_UPDATE: SpareNeed(surge * gpus, surge * whole, bool(surge)),
        SwitchStrategy.RECREATE: SpareNeed(0, 0, False),
    }


def switch_keeps_serving(policy: AutoSpeculation) -> bool:
    """A switch leaves the old mode serving until the new engine is Ready (no downtime):
    BlueGreen, and RollingUpdate with a surge (``maxSurge`` unset is one engine's default, 1;
    ``launch.multinode.effective_policy`` settles it for a LeaderWorkerSet, 0 unless the spec
    says a spare group exists). Recreate, and a RollingUpdate without a surge, stop the old
    engine first."""
    if policy.switch_strategy == SwitchStrategy.ROLLING_UPDATE:
        return policy.max_surge != 0
    return policy.switch_strategy != SwitchStrategy.RECREATE


def group_restart_extra_s(weight_bytes_per_node: float, nodes: int) -> float:
    """Seconds a group of ``nodes`` pods takes to restart beyond one pod with the same weights
    per node (0 on one node): its slowest pod and the cross-node rendezvous."""
    if nodes <= 1:
        return 0.0
    return restart_seconds(weight_bytes_per_node, nodes) - restart_seconds(weight_bytes_per_node)


def breaches_needed(policy: AutoSpeculation, state: PolicyState, extra_s: float = 0.0) -> int:
    """Consecutive breaching evaluations before speculation is switched off.

    ``disableAfterBreaches`` when a switch is a restart (Recreate: confirming waits out
    overloads too short to pay back the downtime). It is stated for one pod's restart: a
    multi-node group's restart is ``extra_s`` seconds longer (``group_restart_extra_s``), and
    an overload must outlast that too, so the evaluations it spans are added. Half of that,
    rounded up, when the old mode keeps serving through the switch: then a switch costs no
    downtime, only the new engine's GPU time, and a switch that lands after the overload is
    undone at once (``OverloadEnded``). Not while a switch of the last hour was undone within
    the dwell (a round trip: the overload behind it was shorter than a switch, so the next one
    may be too).
    """
    needed = policy.disable_after_breaches
    if extra_s > 0:
        needed += math.ceil(extra_s / policy.evaluation_interval_seconds)
    if switch_keeps_serving(policy) and not _round_trip(state, policy):
        return math.ceil(needed / 2)
    return needed


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
