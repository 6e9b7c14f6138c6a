"""A prefill forward runs without a CUDA graph: it takes at least its kernels' launches.

SGLang 0.5.23 captures graphs for decode (and the speculative verify and draft) only, so every
prefill forward launches its layers' kernels from Python. A big MoE's short prompt is bound by
those launches, not by its FLOPs; a small model's prompt on a slow card is bound by its FLOPs;
prompts that arrive together share their batches' launches; each chunk of a chunked prompt is
a forward of its own.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from specserver_advisor.loaders.corpus import load_corpus, model_config
from specserver_advisor.perf import calibration, validation
from specserver_advisor.perf.constants import DEFAULT_CALIBRATION as CAL
from specserver_advisor.perf.model import (
    MAX_PREFILL_TOKENS,
    Scenario,
    prefill_floor_s,
    prefill_tokens_time,
    wave_prefill_time,
)
from specserver_advisor.perf.parallelism import eager_forward_launch_s, layer_kernels


@pytest.fixture(scope="module")
def deepseek_r1() -> Scenario:
    """DeepSeek-R1 at TP 8 on 8 x H200 (InferenceX's launch in the public corpus)."""
    figs = validation.build(load_corpus(), model_config)
    fig = next(f for f in figs if f.label.startswith("DeepSeek-R1 8xH200 TPOT"))
    return fig.scenario


@pytest.fixture(scope="module")
def qwen3_8b_l4() -> Scenario:
    """The field's dense 8B on one L4."""
    return calibration.field_plan("l4", [1]).scenario


def test_a_forwards_launches_count_its_layers_kernels() -> None:
    """An MoE layer with MLA and FP8 GEMMs launches more kernels than a dense GQA layer."""
    figs = validation.build(load_corpus(), model_config)
    r1 = next(f for f in figs if f.label.startswith("DeepSeek-R1 8xH200")).scenario.target
    dense, moe = layer_kernels(r1)
    launches = eager_forward_launch_s(r1, CAL)
    assert launches > r1.num_layers * min(dense, moe) * CAL.eager_launch_s
    assert launches < r1.num_layers * max(dense, moe) * CAL.eager_launch_s * 1.1
    slower = replace(CAL, eager_launch_s=2 * CAL.eager_launch_s)
    assert eager_forward_launch_s(r1, slower) == pytest.approx(2 * launches)


def test_a_big_moes_short_prompt_is_launch_bound(deepseek_r1: Scenario) -> None:
    compute = prefill_tokens_time(deepseek_r1, 128, False, CAL, floor=False)
    alone = prefill_tokens_time(deepseek_r1, 128, False, CAL)
    assert alone == pytest.approx(prefill_floor_s(deepseek_r1, False, CAL))
    assert alone > 10 * compute
    # Launches are the host's: a faster card does not shorten them.
    faster = replace(deepseek_r1, clock_scale=2.0)
    assert prefill_tokens_time(faster, 128, False, CAL) == pytest.approx(alone)


def test_a_small_models_prompt_on_a_slow_card_is_compute_bound(qwen3_8b_l4: Scenario) -> None:
    """The field's prefills (the fit of ``prefill_efficiency``) are never launch-bound."""
    tokens = 512
    compute = prefill_tokens_time(qwen3_8b_l4, tokens, False, CAL, floor=False)
    assert prefill_floor_s(qwen3_8b_l4, False, CAL) < compute
    assert prefill_tokens_time(qwen3_8b_l4, tokens, False, CAL) == compute


def test_prompts_arriving_together_share_their_batches_launches(deepseek_r1: Scenario) -> None:
    short = replace(deepseek_r1, input_len=128, prompt_mix=None, chunked_prefill_size=None)
    one = prefill_tokens_time(short, 128, False, CAL)
    floor = prefill_floor_s(short, False, CAL)
    # Eight short prompts fit one prefill batch: one forward's launches, not eight.
    assert wave_prefill_time(short, 8, False, CAL) == pytest.approx(floor)
    assert wave_prefill_time(short, 8, False, CAL) < 8 * one / 4
    # Past --max-prefill-tokens the wave takes a second batch.
    many = MAX_PREFILL_TOKENS // 128 + 1
    assert wave_prefill_time(short, many, False, CAL) == pytest.approx(2 * floor)


def test_each_chunk_of_a_chunked_prompt_is_a_forward(deepseek_r1: Scenario) -> None:
    whole = replace(deepseek_r1, chunked_prefill_size=None)
    chunked = replace(deepseek_r1, chunked_prefill_size=1024)
    floor = prefill_floor_s(whole, False, CAL)
    compute = prefill_tokens_time(whole, 4096, False, CAL, floor=False)
    assert compute < 4 * floor
    assert prefill_tokens_time(chunked, 4096, False, CAL) == pytest.approx(4 * floor)
    assert prefill_tokens_time(whole, 4096, False, CAL) == pytest.approx(max(compute, floor))


def test_speculation_adds_the_drafts_extend_launches() -> None:
    """With a draft loaded, a prefill runs the target's forward and then the draft's extend."""
    figs = validation.build(load_corpus(), model_config)
    spec = next(f.scenario for f in figs if f.scenario.draft is not None)
    assert spec.draft is not None
    both = prefill_floor_s(spec, True, CAL)
    assert both == pytest.approx(
        eager_forward_launch_s(spec.target, CAL) + eager_forward_launch_s(spec.draft, CAL)
    )
    assert prefill_floor_s(spec, False, CAL) < both
