"""KV bytes, weights, the mem-fraction heuristic, pool sizes and max-running-requests."""

from __future__ import annotations

import pytest

from specserver_advisor.gpus import lookup_gpu
from specserver_advisor.perf import calibration
from specserver_advisor.sglang import memory
from specserver_advisor.sglang.configvalues import ConfigShapeError
from specserver_advisor.sglang.modelshape import shape_from_config
from stack import load_config

QWEN = shape_from_config(load_config("qwen3-8b"))
QWEN_DRAFT = shape_from_config(load_config("qwen3-8b-eagle3"))
DSV3 = shape_from_config(load_config("deepseek-v3"))
MOE = shape_from_config(load_config("qwen3-30b-a3b"))


def test_kv_cell_bytes_gqa_dtype_and_tensor_parallel() -> None:
    assert memory.kv_cell_bytes(QWEN, 2) == 36 * 8 * 128 * 2 * 2
    assert memory.kv_cell_bytes(QWEN, 1) == 36 * 8 * 128 * 2
    assert memory.kv_cell_bytes(QWEN, 2, tp_size=2) == 36 * 4 * 128 * 2 * 2
    # More ranks than KV heads: one head per rank.
    assert memory.kv_cell_bytes(QWEN, 2, tp_size=16) == 36 * 1 * 128 * 2 * 2


def test_mla_cell_has_no_head_factor() -> None:
    assert DSV3.is_mla
    # FP8 weights, no kv_cache_quant_algo: KV "auto" is the bf16 compute dtype (SGLang's
    # configure_kv_cache_dtype; compared with it in tests/oracle/test_kv_arithmetic.py).
    assert memory.kv_dtype_bytes("auto", DSV3) == 2
    assert memory.kv_cell_bytes(DSV3, 2) == (512 + 64) * 61 * 2
    assert memory.kv_cell_bytes(DSV3, 2, tp_size=8) == (512 + 64) * 61 * 2


def test_weights_from_shapes_match_published_sizes() -> None:
    assert QWEN.total_params() == pytest.approx(8.19e9, rel=0.02)
    assert MOE.total_params() == pytest.approx(30.5e9, rel=0.03)
    assert MOE.active_params_per_token() == pytest.approx(3.3e9, rel=0.15)
    # The EAGLE-3 head loaded 1.90 GiB on the L4 (field log).
    assert memory.draft_weight_bytes_separate(QWEN_DRAFT) / 2**30 == pytest.approx(1.90, rel=0.05)


# The mem-fraction-static heuristic, chunked prefill and decode graph tiers are compared with
# SGLang's own handle_gpu_memory_settings on every GPU in tests/oracle/test_differential.py.


def l4_plan(mfs: float | None) -> memory.MemoryPlan:
    return memory.plan_memory(
        lookup_gpu("L4"),
        QWEN,
        QWEN.weight_bytes(),
        QWEN_DRAFT,
        memory.draft_weight_bytes_separate(QWEN_DRAFT),
        "EAGLE3",
        mem_fraction_static=mfs,
    )


def test_l4_qwen3_8b_pools_match_the_field_within_ten_percent() -> None:
    plan = l4_plan(0.85)  # what the field servers' startup log implies
    assert plan.kv_pool_tokens_without_draft == pytest.approx(24094, rel=0.10)
    assert 8827 * 0.9 <= plan.kv_pool_tokens_with_draft <= 9951 * 1.1
    assert plan.cell_bytes_with_draft == 147456 + 147456 // 36
    assert plan.error is None


def test_weights_that_leave_no_kv_give_sglangs_error() -> None:
    plan = l4_plan(None)  # the 0.701 heuristic leaves nothing on a 24 GB card
    assert plan.kv_pool_tokens_with_draft == 0
    assert plan.error is not None
    assert plan.error.startswith(
        "Loaded weights leave no GPU memory for the KV cache under "
        "--mem-fraction-static=0.701. Raise --mem-fraction-static above"
    )


def test_weights_larger_than_the_card_say_no_fraction_can_fit_them() -> None:
    shape = shape_from_config(calibration.field_config("deepseek-v3"))
    # DeepSeek-V3's FP8 weights on 8 x 80 GB: SGLang would ask for a fraction above 1.
    plan = memory.plan_memory(lookup_gpu("H800"), shape, 690 * 10**9, None, 0, None, tp_size=8)
    assert plan.error is not None and plan.kv_pool_tokens_with_draft == 0
    asked = float(plan.error.split("above ")[1].split(". ")[0])
    assert asked > 1
    assert "No fraction can" in plan.error and "--tp-size" in plan.error
    # Where a fraction below 1 would do, the advice is SGLang's alone.
    assert "No fraction can" not in (l4_plan(None).error or "")


def test_sglang_max_running_requests() -> None:
    assert memory.sglang_max_running_requests(9000, 40960, 48) == 48
    assert memory.sglang_max_running_requests(60, 40960, 48) == 30
    assert memory.sglang_max_running_requests(100_000, 4096, None) == 4096
    assert memory.sglang_max_running_requests(100_000, 131072, None) == 2048
    assert memory.sglang_max_running_requests(0, 4096, None) == 0


def test_requests_that_fit_count_reserved_and_draft_slots() -> None:
    assert memory.requests_that_fit(8827, 512, 128) == 13
    assert memory.requests_that_fit(8827, 512, 128, reserved_tokens=4, draft_slots=4) == 13
    assert memory.requests_that_fit(9951, 512, 128) == 15


def test_broken_config_names_the_missing_field() -> None:
    with pytest.raises(ConfigShapeError, match="hidden_size"):
        shape_from_config({"num_attention_heads": 8})
