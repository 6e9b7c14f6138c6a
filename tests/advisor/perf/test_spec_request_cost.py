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


def test_a_trees_extra_nodes_cost_gpu_work_that_scales_with_the_card() -> None:
    """Each node of an EAGLE tree beyond a chain's one costs its request GPU work at small
    sizes, scaled by the card's memory bandwidth: the field's wide tree on an A6000 pays what
    the card-independent 0.5 ms a node paid before; an H100 pays 0.11 ms, within what
    GPUStack's sweep of tree sizes on one H100 allows."""
    a6000 = replace(_l4_chain(), gpu=lookup_gpu("A6000"))
    h100 = replace(_l4_chain(), gpu=lookup_gpu("H100"))
    for scn in (a6000, h100):
        chain = model.spec_request_s(scn, CAL, 1.0)
        tree = model.spec_request_s(scn, CAL, 4.0)
        per_node = (tree - chain) / 3
        gpu_per_node = chain - CAL.spec_host_s_per_request
        rate = model.SPEC_REFERENCE_GBS / scn.gpu.bandwidth_gbs
        assert per_node == pytest.approx(gpu_per_node + CAL.spec_tree_node_s * rate)
    a6000_node = CAL.spec_tree_node_s * model.SPEC_REFERENCE_GBS / 768
    h100_node = CAL.spec_tree_node_s * model.SPEC_REFERENCE_GBS / 3350
    assert a6000_node == pytest.approx(0.0005, rel=0.01)
    assert h100_node < 0.00012


def test_a_captured_draft_loop_pays_its_selection_kernels_at_the_floor() -> None:
    h100 = replace(_l4_chain(), gpu=lookup_gpu("H100"))
    spec = SpecShape("EAGLE3", 3, 1, 4)
    assert model.draft_loop_floor_s(h100, spec, CAL) == pytest.approx(
        (3 * 5 + 2 * 4 + 6) * CAL.kernel_floor_s
    )
    assert model.draft_loop_floor_s(h100, SpecShape("NGRAM", 3, 1, 4), CAL) == 0.0


def test_the_eagle3_papers_launch_at_batch_64_on_an_h100_is_a_gain_under_spec_v2() -> None:
    """The EAGLE-3 paper's 1.38x at batch 64 on an H100: SGLang 0.5.23 runs that launch under
    the overlap scheduler (spec V2), and the model predicts it a gain there. The paper's
    release ran it synchronously, whose host work per stage and per draft step the model adds
    to every step; the corpus row keeps that release (docs/advisor.md: predicted 0.9x)."""
    figs = validation.build(load_corpus(), model_config)
    (paper,) = [f for f in figs if f.source == "eagle3-paper"]
    assert paper.concurrency == 64 and paper.value > 1
    assert not paper.scenario.spec_overlap
    v2 = replace(paper, scenario=replace(paper.scenario, spec_overlap=True))
    assert validation.predict_figure(v2, CAL) > 1.0
    assert validation.predict_figure(paper, CAL) < validation.predict_figure(v2, CAL)
