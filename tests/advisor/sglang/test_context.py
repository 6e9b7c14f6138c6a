"""Context derivation and the draft/target check, against SGLang 0.5.23's rules."""

from __future__ import annotations

import pytest

from specserver_advisor.sglang.context import (
    ContextVerdict,
    check_context,
    derive_context_length,
)
from stack import load_config

OVERRIDE = {"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1"}


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("qwen3-8b", 40960),
        ("llama-3.1-8b", 131072),
        ("deepseek-v3", 163840),
        ("qwen3-30b-a3b", 262144),
        ("eagle3-2048-positions", 2048),
        ("qwen3-8b-eagle3", 40960),
    ],
)
def test_published_configs_derive_their_context(name: str, expected: int) -> None:
    assert derive_context_length(load_config(name)).length == expected


def test_key_priority_fallback_and_ignored_n_positions() -> None:
    assert (
        derive_context_length({"max_sequence_length": 8192, "max_position_embeddings": 4096}).length
        == 8192
    )
    assert derive_context_length({"seq_length": 3000, "model_max_length": 9000}).length == 3000
    assert derive_context_length({"n_positions": 32768}).length == 2048
    assert derive_context_length({}).length == 2048


def test_rope_factor_rules() -> None:
    linear = {"max_position_embeddings": 4096, "rope_scaling": {"type": "linear", "factor": 4}}
    assert derive_context_length(linear).length == 16384
    yarn = {
        "max_position_embeddings": 32768,
        "rope_scaling": {"type": "yarn", "factor": 4, "original_max_position_embeddings": 8192},
    }
    assert derive_context_length(yarn).length == 32768
    # transformers 5.19 reads the old ``type`` key as ``rope_type`` and gives llama3 its
    # original_max_position_embeddings, so SGLang applies no factor (checked by tests/oracle).
    llama3_type_key = {
        "max_position_embeddings": 8192,
        "rope_scaling": {"type": "llama3", "factor": 8},
    }
    assert derive_context_length(llama3_type_key).length == 8192
    # The 2048 fallback is not multiplied.
    assert derive_context_length({"rope_scaling": {"factor": 4}}).length == 2048


def test_multimodal_configs_use_their_text_config() -> None:
    vlm = {
        "architectures": ["Qwen2_5_VLForConditionalGeneration"],
        "text_config": {"max_position_embeddings": 128000},
        "max_position_embeddings": 1024,
    }
    assert derive_context_length(vlm).length == 128000
    omni = {"thinker_config": {"text_config": {"max_position_embeddings": 32768}}}
    assert derive_context_length(omni).length == 32768


def test_short_draft_fails_startup_with_sglangs_message() -> None:
    check = check_context(
        load_config("llama-3.1-8b"), load_config("eagle3-2048-positions"), context_length=40960
    )
    assert check.verdict is ContextVerdict.STARTUP_FAILS
    assert check.failing_model == "draft"
    assert (
        "Target model's context_length (40960) is greater than the derived context_length "
        "(2048)" in check.message
    )
    assert check.message.endswith("set the env var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1")


def test_override_env_starts_but_warns_about_acceptance() -> None:
    check = check_context(
        load_config("qwen3-30b-a3b"), load_config("qwen3-30b-a3b-eagle3"), env=OVERRIDE
    )
    assert check.verdict is ContextVerdict.OVERRIDDEN
    assert check.effective == 262144
    assert "degrade on prompts longer than 2048" in check.message
    assert any(
        "Overriding the draft model's max_position_embeddings to 262144" in w
        for w in check.warnings
    )


def test_context_length_flag_longer_than_target_fails_as_user_specified() -> None:
    check = check_context(
        load_config("qwen3-8b"), load_config("qwen3-8b-eagle3"), context_length=65536
    )
    assert check.verdict is ContextVerdict.STARTUP_FAILS and check.failing_model == "target"
    assert "User-specified context_length (65536)" in check.message


def test_compatible_pair_and_usable_prompt_after_reserved_tokens() -> None:
    check = check_context(
        load_config("qwen3-8b"),
        load_config("qwen3-8b-eagle3"),
        context_length=32768,
        reserved_tokens=4,
    )
    assert check.verdict is ContextVerdict.COMPATIBLE
    assert check.effective == 32768
    # The scheduler refuses input >= context - 1 - 5 (max_req_input_len); the tokenizer refuses
    # input + reserved >= context. With 4 reserved tokens the scheduler's bound is the tighter.
    assert check.usable_prompt_tokens == 32768 - 1 - 5 - 1
    adaptive = check_context(load_config("qwen3-8b"), None, context_length=32768, reserved_tokens=8)
    assert adaptive.usable_prompt_tokens == 32768 - 1 - 8


def test_draft_without_the_targets_rope_scaling_is_reported() -> None:
    draft = dict(load_config("eagle3-2048-positions"), max_position_embeddings=131072)
    check = check_context(load_config("llama-3.1-8b"), draft)
    assert check.verdict is ContextVerdict.COMPATIBLE
    assert any("llama3 rope scaling" in w and "draft config has none" in w for w in check.warnings)
