"""The performance model reproduces the field's mechanisms and the advisor issue's figures."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from specserver_advisor.gpus import lookup_gpu
from specserver_advisor.perf import calibration
from specserver_advisor.perf.model import break_even_accept_length, crossover, predict
from specserver_advisor.perf.plan import Plan

CONC = [1, 2, 4, 8, 16, 32, 64]


@pytest.fixture(scope="module")
def l4() -> Plan:
    return calibration.field_plan("l4", CONC)


@pytest.fixture(scope="module")
def gb10() -> Plan:
    return calibration.field_plan("gb10", CONC)


def gain(plan: Plan, c: int, key: str = "output_tok_s") -> float:
    point = next(p for p in plan.curves if p["concurrency"] == c)
    return float(point["on"][key] / point["off"][key])


def test_l4_throughput_ratios_within_fifteen_percent(l4: Plan) -> None:
    assert gain(l4, 1) == pytest.approx(2.37, rel=0.15)
    assert gain(l4, 32) == pytest.approx(1.00, rel=0.15)


def test_dense_gain_shrinks_with_batch_and_tpot_stays_better(l4: Plan) -> None:
    gains = [gain(l4, c) for c in CONC]
    assert gains[0] > gains[3] > gains[5]
    for c in CONC:
        assert 1 / gain(l4, c, "tpot_ms") > 1.5  # per-token speed better at every load


def test_pool_bound_card_pays_in_ttft(l4: Plan) -> None:
    point = next(p for p in l4.curves if p["concurrency"] == 32)
    assert point["on"]["queued"] > 0 and point["off"]["queued"] == 0
    assert point["on"]["ttft_ms"] > 2.5 * point["off"]["ttft_ms"]


def test_moe_gain_holds_or_grows_with_batch(gb10: Plan) -> None:
    tpot_gain = {c: 1 / gain(gb10, c, "tpot_ms") for c in (1, 32, 64)}
    assert tpot_gain[32] >= tpot_gain[1]
    assert min(tpot_gain.values()) >= 1.4
    assert gb10.crossover_concurrency is None  # speculation pays everywhere in range


def test_crossover_exists_for_the_dense_l4(l4: Plan) -> None:
    assert l4.crossover_concurrency is not None
    assert 8 < l4.crossover_concurrency < 40


def test_higher_acceptance_means_more_throughput(l4: Plan) -> None:
    scn = l4.scenario
    low = predict(replace(scn, accept_length=1.5), 8, l4.cap_on, True)
    high = predict(replace(scn, accept_length=3.0), 8, l4.cap_on, True)
    assert high.output_tok_s > low.output_tok_s
    assert high.tpot_ms < low.tpot_ms


def test_break_even_acceptance_rises_with_load(l4: Plan) -> None:
    c1 = break_even_accept_length(l4.scenario, 1, l4.cap_on, l4.cap_off)
    c16 = break_even_accept_length(l4.scenario, 16, l4.cap_on, l4.cap_off)
    assert 1.0 < c1 < c16 < 4.0


def test_compute_bound_card_gains_less_at_batch_than_memory_bound_one(l4: Plan) -> None:
    # An H100 has 11x the L4's bandwidth but 8x its compute: a verify pass stays cheap longer.
    from specserver_advisor.gpus import lookup_gpu

    h100 = replace(l4.scenario, gpu=lookup_gpu("H100"))
    g_l4 = (
        predict(l4.scenario, 8, 64, True).output_tok_s
        / predict(l4.scenario, 8, 64, False).output_tok_s
    )
    g_h100 = predict(h100, 8, 64, True).output_tok_s / predict(h100, 8, 64, False).output_tok_s
    assert g_h100 > 1.0 and g_l4 > 1.0


def test_crossover_is_none_when_one_mode_wins_everywhere(gb10: Plan) -> None:
    assert crossover(gb10.scenario, gb10.cap_on, gb10.cap_off, [1, 8, 32]) is None


def test_calibration_report_lists_every_target() -> None:
    text = calibration.report()
    for target in calibration.TARGETS:
        assert target.label in text
    assert "fit loss" in text


def test_batches_above_the_captured_graphs_pay_launches_every_forward(l4: Plan) -> None:
    """Above the captured batch a forward takes at least its launches from Python: hidden
    behind an 8B's decode on the L4's 300 GB/s, binding on an H100's 3,350."""
    from specserver_advisor.perf.constants import DEFAULT_CALIBRATION as CAL
    from specserver_advisor.perf.model import eager_launches, step_time

    small = replace(l4.scenario, cuda_graph_max_bs=8)
    for spec in (False, True):
        inside = step_time(small, 8, spec, CAL) / step_time(l4.scenario, 8, spec, CAL)
        above = step_time(small, 9, spec, CAL) - step_time(l4.scenario, 9, spec, CAL)
        assert inside == 1.0
        assert above >= 0
    launches = eager_launches(small, small.target, 9, CAL)
    assert 0 < launches < step_time(l4.scenario, 9, False, CAL)
    fast = replace(l4.scenario, gpu=lookup_gpu("H100"))
    fast_small = replace(fast, cuda_graph_max_bs=8)
    assert step_time(fast, 9, False, CAL) < launches
    assert step_time(fast_small, 9, False, CAL) >= launches
    # Speculation runs more forwards (draft steps, extend, verify): it pays more launches.
    spec_extra = step_time(small, 9, True, CAL) - step_time(l4.scenario, 9, True, CAL)
    plain_extra = step_time(small, 9, False, CAL) - step_time(l4.scenario, 9, False, CAL)
    assert spec_extra > plain_extra


def test_a_wide_tree_costs_more_per_step_than_a_chain(l4: Plan) -> None:
    from specserver_advisor.perf.constants import DEFAULT_CALIBRATION as CAL
    from specserver_advisor.perf.model import SpecShape, step_time

    chain = replace(l4.scenario, spec=SpecShape("EAGLE3", 3, 1, 4))
    tree = replace(l4.scenario, spec=SpecShape("EAGLE3", 3, 4, 8))
    for batch in (1, 20):
        assert step_time(tree, batch, True, CAL) > step_time(chain, batch, True, CAL)
    # The gap grows with the batch: verify positions and tree host work are per request.
    gap = [step_time(tree, b, True, CAL) - step_time(chain, b, True, CAL) for b in (1, 20)]
    assert gap[1] > 5 * gap[0]


def test_leave_one_out_refits_without_each_figure() -> None:
    rows = calibration.leave_one_out(rounds=1)
    fitted = [t for t in calibration.TARGETS if t.fitted]
    assert [t.label for t, _, _ in rows] == [t.label for t in fitted]
    in_sample = {t.label: v for t, v in calibration.evaluate()}
    assert all(v == in_sample[t.label] for t, v, _ in rows)
    assert all(math.isfinite(h) and h > 0 for _, _, h in rows)
    # Holding a figure out can only make its own fit worse or equal (same start, same search).
    worse = [
        abs(math.log(h / t.field_value)) >= abs(math.log(v / t.field_value)) - 0.02
        for t, v, h in rows
    ]
    assert sum(worse) >= len(rows) - 2
