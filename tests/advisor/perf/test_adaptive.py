"""SGLang 0.5.23's ``--speculative-adaptive`` as modelled: tiers, EMA, hysteresis, routing."""

from __future__ import annotations

import dataclasses

import pytest

from specserver_advisor.gpus import lookup_gpu
from specserver_advisor.perf import adaptive, calibration
from specserver_advisor.perf.adaptive import AdaptiveController, Slot
from specserver_advisor.perf.constants import DEFAULT_CALIBRATION
from specserver_advisor.perf.model import predict, prefill_floor_s, prefill_time, step_time
from specserver_advisor.sglang import adaptivetiers, cudagraphs
from specserver_advisor.sglang.adaptivetiers import DEFAULT_TIERS, Tier


def test_default_config_is_sglangs() -> None:
    assert [(t.min_batch, t.candidate_steps) for t in DEFAULT_TIERS] == [
        (1, (1, 3, 5, 7)),
        (8, (0, 1, 3)),
        (32, (0, 1)),
        (64, (0,)),
    ]
    assert adaptive.candidate_union() == [0, 1, 3, 5, 7]
    assert adaptive.initial_steps() == 3  # the middle of the union
    assert adaptive.reserved_tokens_per_request() == 8
    with pytest.raises(ValueError, match="--speculative-num-steps=2 is not in the adaptive"):
        adaptive.initial_steps(requested=2)


def test_unsupported_launches_say_why() -> None:
    assert adaptive.unsupported_reason("EAGLE3", 1, False) is None
    assert "topk=1" in str(adaptive.unsupported_reason("EAGLE3", 4, False))
    assert "EAGLE/EAGLE3" in str(adaptive.unsupported_reason("NGRAM", None, False))
    assert "attention DP" in str(adaptive.unsupported_reason("EAGLE", 1, True))


def test_routing_pads_to_the_captured_graph_then_takes_the_lower_bound() -> None:
    assert adaptivetiers.tier_index(7) == 0
    assert adaptivetiers.tier_index(8) == 1
    assert adaptivetiers.tier_index(31) == 1
    assert adaptivetiers.tier_index(100) == 3
    # SGLang's speculative capture sizes (tests/oracle/test_adaptive_tiers.py holds them).
    graphs = cudagraphs.graph_batch_sizes(48, speculative=True)
    assert graphs == [*range(1, 9), *range(10, 33, 2), 40, 44, 48]
    assert adaptivetiers.tier_index(7, graph_sizes=graphs) == 0  # 7 has a graph of its own
    assert adaptivetiers.tier_index(31, graph_sizes=graphs) == 2  # 31 pads to 32
    to_96 = cudagraphs.graph_batch_sizes(96, speculative=True)
    assert adaptivetiers.tier_index(62, graph_sizes=to_96) == 3  # 62 pads to 64


def test_slot_starts_at_launch_steps_or_the_middle_candidate() -> None:
    assert Slot.start(DEFAULT_TIERS[1], 3).steps == 3
    assert Slot.start(DEFAULT_TIERS[2], 3).steps == 1  # 3 is no candidate: middle of [0, 1]
    assert Slot.start(DEFAULT_TIERS[3], 3).steps == 0


def test_no_change_during_warmup_then_every_update_interval() -> None:
    slot = Slot.start(DEFAULT_TIERS[1], 3)
    changes = [slot.update(0.0) for _ in range(20)]
    assert not any(changes[:14])  # 10 warm-up batches, then the first update at batch 15
    assert changes[14] and slot.steps < 3


def test_low_acceptance_walks_down_to_zero_then_probes_up() -> None:
    slot = Slot.start(DEFAULT_TIERS[1], 3)
    seen = []
    for _ in range(60):
        slot.update(0.05 if slot.steps else 0.0)
        seen.append(slot.steps)
    assert 0 in seen
    first_zero = seen.index(0)
    assert any(s > 0 for s in seen[first_zero:])  # a zero-step tier probes the next candidate


def test_high_acceptance_climbs_in_the_small_batch_tier() -> None:
    def settled(q: float) -> dict[int, float]:
        return adaptive.settle(1, lambda s: adaptive.chain_correct_drafts(q, s))

    assert settled(0.99) == {7: 1.0}
    # 4.3 drafts accepted of 5: not above 5 - 0.5, so it does not rise to 7.
    assert settled(0.95) == {5: 1.0}


def test_hysteresis_keeps_a_tier_from_dropping() -> None:
    sticky = Tier(8, (1, 3), down_hysteresis=-1.0)
    plain = Tier(8, (1, 3), down_hysteresis=0.0)
    a, b = Slot.start(sticky, 3), Slot.start(plain, 3)
    for _ in range(40):
        a.update(0.4)  # at or below 0.5 + hysteresis drops to 1 step
        b.update(0.4)
    assert (a.steps, b.steps) == (3, 1)


def test_controller_routes_verify_results_per_tier() -> None:
    ctl = AdaptiveController()
    for _ in range(30):
        ctl.on_verify(40, [0, 0, 1, 0])
    assert ctl.steps_for_batch(40) in (0, 1)
    assert ctl.steps_for_batch(2) == 3  # the small-batch tier saw nothing
    assert ctl.on_verify(2, []) is None


def test_zero_steps_still_pays_the_loaded_draft_but_no_verify() -> None:
    plan = calibration.field_plan("l4", [1])
    scn = plan.scenario
    plain = step_time(scn, 8, False, calibration.DEFAULT_CALIBRATION)
    zero = step_time(scn, 8, True, calibration.DEFAULT_CALIBRATION, steps=0)
    three = step_time(scn, 8, True, calibration.DEFAULT_CALIBRATION, steps=3)
    assert plain < zero < three


def test_adaptive_does_not_give_the_pool_back_on_the_l4() -> None:
    """Pool-bound card: running stays under the draft cap, so adaptive queues like on."""
    plan = calibration.field_plan("l4", [1])
    on = predict(plan.scenario, 32, plan.cap_on, True)
    off = predict(plan.scenario, 32, plan.cap_off, False)
    ad = adaptive.predict_adaptive(plan.scenario, 32, plan.cap_on)
    assert ad.queued == on.queued > off.queued
    assert ad.ttft_ms > 2 * off.ttft_ms


def test_adaptive_drops_steps_at_large_batches_where_the_pool_allows() -> None:
    """On the GB10 (pool not the limit up to the cap) a batch of 48 runs the 32 tier."""
    plan = calibration.field_plan("gb10", [1])
    scn = dataclasses.replace(plan.scenario, accept_length=1.6)
    on = predict(scn, 48, plan.cap_on, True)
    ad = adaptive.predict_adaptive(scn, 48, plan.cap_on)
    assert ad.step_s < on.step_s


def test_a_fixed_length_wave_shares_its_prefill_launches_as_plain_and_on_do() -> None:
    """Short prompts on a fast card are bound by their forward's launches from Python; a wave
    of them arriving together is one prefill batch under adaptive speculation too."""
    plan = calibration.field_plan("l4", [1])
    h100 = dataclasses.replace(
        plan.scenario, gpu=lookup_gpu("H100"), input_len=32, prompt_mix=None, staggered=False
    )
    cal = DEFAULT_CALIBRATION
    alone = prefill_time(h100, True, cal)
    assert alone == pytest.approx(prefill_floor_s(h100, True, cal))
    users = 16
    ad = adaptive.predict_adaptive(h100, users, users)
    on = predict(h100, users, users, True)
    # Lone prefills would make the middle of the wave wait for ~8 of them.
    assert ad.ttft_ms / 1000 < 2 * alone + ad.step_s
    assert ad.ttft_ms == pytest.approx(on.ttft_ms - (on.step_s - ad.step_s) * 1000, rel=0.05)
