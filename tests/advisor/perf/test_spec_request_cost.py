"""The speculative step's per-request cost by mechanism (issue 42 item 4): a GPU part priced by
the card's memory bandwidth, a host part the same on every card, host work per node of an
EAGLE tree, and the draft loop's kernels at the card's floor in a captured step."""

from __future__ import annotations

from dataclasses import replace

import pytest

from specserver_advisor.gpus import lookup_gpu
from specserver_advisor.loaders.corpus import load_corpus, model_config
from specserver_advisor.perf import model, validation
from specserver_advisor.perf.calibration import field_plan
from specserver_advisor.perf.constants import DEFAULT_CALIBRATION as CAL
from specserver_advisor.perf.model import SpecShape


def _l4_chain() -> model.Scenario:
    return field_plan("l4", [1]).scenario


def test_a_request_costs_less_on_a_card_with_more_bandwidth_and_the_host_part_stays() -> None:
    l4 = _l4_chain()
    h100 = replace(l4, gpu=lookup_gpu("H100"))
    on_l4, on_h100 = model.spec_request_s(l4, CAL), model.spec_request_s(h100, CAL)
    # The EAGLE-3 paper's 1.38x at batch 64 on an H100 leaves <= ~0.07 ms a request.
    assert on_h100 <= 0.00007 < 0.0004 <= on_l4
    gpu_l4 = on_l4 - CAL.spec_host_s_per_request
    gpu_h100 = on_h100 - CAL.spec_host_s_per_request
    assert gpu_l4 / gpu_h100 == pytest.approx(3350 / 300)
    # No host part: only the GPU's, never below one kernel floor.
    bare = replace(CAL, spec_host_s_per_request=0.0, spec_s_per_request=0.0)
    assert model.spec_request_s(h100, bare) == pytest.approx(CAL.kernel_floor_s)


def test_a_tree_pays_host_work_for_each_node_beyond_a_chains_one() -> None:
    scn = _l4_chain()
    chain = model.spec_request_s(scn, CAL, 1.0)
    tree = model.spec_request_s(scn, CAL, 4.0)
    gpu = chain - CAL.spec_host_s_per_request
    assert tree - chain == pytest.approx(3 * gpu + 3 * CAL.spec_tree_node_s)


def test_a_captured_draft_loop_pays_its_selection_kernels_at_the_floor() -> None:
    h100 = replace(_l4_chain(), gpu=lookup_gpu("H100"))
    spec = SpecShape("EAGLE3", 3, 1, 4)
    assert model.draft_loop_floor_s(h100, spec, CAL) == pytest.approx(
        (3 * 5 + 2 * 4 + 6) * CAL.kernel_floor_s
    )
    assert model.draft_loop_floor_s(h100, SpecShape("NGRAM", 3, 1, 4), CAL) == 0.0


def test_the_eagle3_papers_gain_at_batch_64_on_an_h100_is_predicted_a_gain() -> None:
    figs = validation.build(load_corpus(), model_config)
    (paper,) = [f for f in figs if f.source == "eagle3-paper"]
    assert paper.concurrency == 64 and paper.value > 1
    assert validation.predict_figure(paper, CAL) > 1.0
