"""SGLang's zero-step adaptive tier against Auto's policy: who acted on a cycle (pure).

With ``--speculative-adaptive`` SGLang 0.5.23's default tiers (``adaptive.DEFAULT_TIERS``) run
0 draft steps at a running batch of 64 or more (the 64 tier has only that candidate) and may at
8 and 32 (their candidates include 0). A zero-step batch still verifies (one token per request,
SGLang's trivial verify), so the engine's accept length reads about 1.0 and its throughput is
that of a plain decode with the draft still loaded; ``sglang:spec_num_steps`` reads 0. The
silent 48 cap kept the 64 tier out of reach; the operator renders the cap explicitly, often
above 64, so the inner level (SGLang) switches speculation off by itself there.

The batch from which a launch's tiers can or must run zero steps is SGLang's knowledge
(``adaptivetiers.zero_step_batch``, ``always_zero_batch``, ``overlap_message``). Here: whether one
observation was taken while SGLang ran zero steps (``ran_zero_steps``: the steps gauge read 0
over the window at a batch the rendered tiers route to a zero-capable tier); the reasons Auto may
still act on such a cycle (``memory_reason``: the draft's memory is still taken, so a queue or a
TTFT breach is still the draft's). Used by ``policy.decide`` and the operator's autopilot (the
``EngineZeroSteps`` condition).
"""

from __future__ import annotations

from specserver_advisor.models import AutoSpeculation
from specserver_advisor.policy.model import (
    ON,
    Observation,
    PolicyContext,
    PolicyState,
    Readings,
    Reason,
    SpecMode,
    finite_or_none,
)

#: The decision reason of a cycle whose readings SGLang took at zero draft steps.
REASON = Reason.ENGINE_RAN_ZERO_STEPS
#: The status condition that says which level acted (operator/conditions.py).
CONDITION = "EngineZeroSteps"


def ran_zero_steps(obs: Observation, state_mode: SpecMode, ctx: PolicyContext) -> bool:
    """The observation was taken while SGLang's adaptive tier ran zero draft steps.

    Needs all of: the On engine adapts its steps (``ctx.engine_adapts_steps``), the policy and
    the observation are in mode on, the rendered tiers route the observed running batch to a
    zero-capable tier (``ctx.zero_step_batch``), and ``sglang:spec_num_steps`` read 0 over the
    window (a startup's 0, before SGLang's first decode report, comes with a small batch).
    """
    steps = finite_or_none(obs.spec_num_steps)
    running = finite_or_none(obs.running)
    return (
        ctx.engine_adapts_steps
        and state_mode == ON
        and obs.mode in (None, ON)
        and steps is not None
        and steps == 0
        and running is not None
        and running >= ctx.zero_step_batch
    )


def memory_reason(inputs: Readings, state: PolicyState, policy: AutoSpeculation) -> Reason | None:
    """What a zero-step cycle may still disable for: the draft's weights and KV stay allocated
    at zero steps, so requests queueing past the TTFT SLO (or a queue building) are still the
    draft's memory. Speculation's own readings (accept length, throughput, the crossover, a
    learned band) are not what ran, so nothing else is a reason here."""
    ttft, queued = inputs.ttft_p99_s, inputs.queued
    if ttft is not None and ttft > policy.ttft_p99_slo_seconds and queued and queued > 0:
        return Reason.TTFT_SLO_BREACHED
    if state.queue_growth >= policy.queue_growth_evaluations:
        return Reason.QUEUE_BUILDING
    return None
