"""SGLang's zero-step adaptive tier against Auto: the tiers' reach, and the policy's cycles.

An adaptive On engine whose running batch reaches a zero-step tier reports
``sglang:spec_num_steps`` 0 and an accept length of ~1.0 (trivial verifies); the policy must not
score those readings as speculation's, nor switch on them as if speculation ran; only the
draft's memory (a queue past the TTFT SLO) is still a reason to unload it.
"""

from __future__ import annotations

import math

from specserver_advisor.models import AutoSpeculation
from specserver_advisor.policy import zerosteps
from specserver_advisor.policy.decide import decide
from specserver_advisor.policy.model import ON, Observation, PolicyContext, PolicyState
from specserver_advisor.sglang import adaptivetiers
from specserver_advisor.sglang.adaptivetiers import DEFAULT_TIERS, tier_index
from specserver_advisor.sglang.cudagraphs import graph_batch_sizes

POLICY = AutoSpeculation(min_dwell_seconds=0, disable_after_breaches=1)


def context(zero_from: float = 8.0, crossover: float = 24.0) -> PolicyContext:
    return PolicyContext(
        [(1.2, crossover), (4.0, crossover)], 1.3, 2.5, True, zero_step_batch=zero_from
    )


def obs(ts: float, running: float, steps: float | None, **kw: float) -> Observation:
    base = {"accept_length": 1.0, "ttft_p99_s": 0.2, "queued": 0.0, "output_tok_s": 4000.0}
    base.update(kw)
    return Observation(ts=ts, mode=ON, running=running, age_s=1.0, spec_num_steps=steps, **base)


def run(cycles: list[Observation], ctx: PolicyContext) -> tuple[list[str], PolicyState]:
    state, reasons = PolicyState(mode=ON), []
    for o in cycles:
        d, state = decide(o, state, POLICY, ctx)
        reasons.append(f"{d.action}:{d.reason}")
    return reasons, state


def test_the_tiers_reach_zero_steps_only_under_a_cap_above_them() -> None:
    # Padded to SGLang's speculative capture sizes (…, 56, 60, 64, 72): 61 routes to the 64
    # tier (only 0 steps), 57 to 60 and so to the 32 tier.
    assert adaptivetiers.always_zero_batch(96, 96) == 61
    graphs = graph_batch_sizes(96, speculative=True)
    assert DEFAULT_TIERS[tier_index(61, DEFAULT_TIERS, graphs)].candidate_steps == (0,)
    assert DEFAULT_TIERS[tier_index(57, DEFAULT_TIERS, graphs)].candidate_steps == (0, 1)
    # SGLang's silent 48 cap: the all-zero tier is out of reach; the 8 tier may still run 0.
    assert adaptivetiers.always_zero_batch(48, 48) is None
    assert adaptivetiers.zero_step_batch(48, 48) == 8
    assert adaptivetiers.zero_step_batch(4, 4) is None
    assert adaptivetiers.overlap_message(4, 4) is None


def test_zero_step_readings_are_not_scored_nor_switched_on() -> None:
    """Load 80 is far above the crossover of 24: with speculation running Auto unloads the
    draft (LoadAboveCrossover); at zero steps SGLang already stopped drafting, so it keeps,
    says why, learns no score for "on" and keeps the accept length it last saw drafting."""
    drafting, _ = run([obs(1, 80, 1, accept_length=1.9)], context())
    assert drafting == ["disable:LoadAboveCrossover"]
    cycles = [obs(1, 8, 3, accept_length=2.6)] + [obs(t, 80, 0) for t in range(2, 12)]
    reasons, state = run(cycles, context())
    assert reasons[1:] == [f"keep:{zerosteps.REASON}"] * 10
    assert state.mode == ON and state.last_accept == 2.6
    assert set(state.bands) == {"8@2.6"}  # only the drafting cycle was scored


def test_the_decision_shows_the_reading_it_set_aside() -> None:
    d, _ = decide(obs(5, 80, 0), PolicyState(mode=ON), POLICY, context())
    assert d.reason == zerosteps.REASON
    assert d.inputs.spec_num_steps == 0 and d.inputs.accept_length is None
    assert d.thresholds["zero_step_batch"] == 8.0


def test_a_queue_past_the_slo_still_unloads_the_draft() -> None:
    """At zero steps the draft's weights and KV are still allocated: a queue is its memory."""
    reasons, _ = run([obs(1, 80, 0, ttft_p99_s=9.0, queued=30)], context())
    assert reasons[0] == "disable:TTFTSLOBreached"


def test_a_zero_before_the_first_decode_report_or_a_fixed_engine_is_a_reading() -> None:
    """SGLang's steps gauge starts at 0: at a batch no zero-capable tier serves it is not the
    zero-step tier; an engine that does not adapt has none."""
    d, _ = decide(obs(5, 2, 0, accept_length=2.4), PolicyState(mode=ON), POLICY, context())
    assert d.reason != zerosteps.REASON and d.inputs.accept_length == 2.4
    fixed = PolicyContext([(1.2, 24.0), (4.0, 24.0)], 1.3, 2.5, False)
    d, _ = decide(obs(5, 80, 0), PolicyState(mode=ON), POLICY, fixed)
    assert d.reason != zerosteps.REASON
    unreachable = context(zero_from=math.inf)
    d, _ = decide(obs(5, 80, 0), PolicyState(mode=ON), POLICY, unreachable)
    assert d.reason != zerosteps.REASON
