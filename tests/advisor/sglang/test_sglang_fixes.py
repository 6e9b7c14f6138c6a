"""Disagreements with SGLang 0.5.23 found by reading its wheel and by the oracle (tests/oracle),
each pinned here with the value SGLang resolved; every test fails on the advisor before the fix.
"""

from __future__ import annotations

import pytest

from sglangflags import HAND_REGISTERED_AND_DEPRECATED
from specserver_advisor.gpus import lookup_gpu
from specserver_advisor.sglang import context, memory
from specserver_advisor.sglang.flags import parse_server_argv
from specserver_advisor.sglang.modelshape import shape_from_config
from specserver_advisor.sglang.resolve import resolve_launch
from specserver_advisor.sglang.serverargs import predict_server
from stack import load_config

QWEN = load_config("qwen3-8b")
DRAFT = load_config("qwen3-8b-eagle3")
L4, H100 = lookup_gpu("L4"), lookup_gpu("H100")
EAGLE3 = [
    "--model-path",
    "m",
    "--speculative-algorithm",
    "EAGLE3",
    "--speculative-draft-model-path",
    "d",
]


def predict(argv: list[str], gpu=L4, target=QWEN, draft=DRAFT, env=None):  # type: ignore[no-untyped-def]
    return predict_server(argv, gpu, target, draft, env)


def test_hand_registered_and_deprecated_flags_are_accepted() -> None:
    for flag in HAND_REGISTERED_AND_DEPRECATED:
        assert parse_server_argv(["--model-path", "m", *flag]).error is None, flag
    # --disable-cuda-graph is its own flag, not a prefix of --disable-cuda-graph-padding.
    parsed = parse_server_argv(["--model-path", "m", "--disable-cuda-graph"])
    assert "disable_cuda_graph_padding" not in parsed.values


def test_argparse_ambiguity_lists_every_match() -> None:
    assert parse_server_argv(["--model-path", "m", "--cuda-graph-max-bs", "8"]).error == (
        "sglang serve: error: ambiguous option: --cuda-graph-max-bs could match "
        "--cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill"
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--speculative-algorithm", "NGRAM", "--attn-dp-size", "2", "--tp-size", "2"],
            "Currently ngram speculative decoding does not support dp attention.",
        ),
        (
            [
                "--speculative-algorithm",
                "STANDALONE",
                "--speculative-draft-model-path",
                "d",
                "--attn-dp-size",
                "2",
                "--tp-size",
                "2",
            ],
            "Currently standalone speculative decoding does not support dp attention.",
        ),
    ],
)
def test_dp_attention_is_attn_dp_size(extra: list[str], message: str) -> None:
    out = predict(["--model-path", "m", *extra], H100)
    assert (out.outcome, out.message) == ("ValueError", message)


def test_fp8_checkpoint_keeps_model_dtype_kv_unless_kv_quant_says_fp8() -> None:
    dsv3 = shape_from_config(load_config("deepseek-v3"))
    assert memory.kv_dtype_bytes("auto", dsv3) == 2
    kvq = dict(QWEN, quantization_config={"quant_method": "fp8", "kv_cache_quant_algo": "FP8"})
    assert memory.kv_dtype_bytes("auto", shape_from_config(kvq)) == 1


def test_draft_kv_dtype_does_not_grow_an_eagle_pool() -> None:
    target, draft = shape_from_config(QWEN), shape_from_config(DRAFT)

    def cell(algorithm: str, draft_dtype: str | None) -> int:
        return memory.plan_memory(
            L4,
            target,
            target.weight_bytes(),
            draft,
            10**9,
            algorithm,
            draft_kv_cache_dtype=draft_dtype,
            mem_fraction_static=0.85,
        ).cell_bytes_with_draft

    assert cell("EAGLE3", "fp8_e4m3") == cell("EAGLE3", None)
    assert cell("DFLASH", "fp8_e4m3") < cell("DFLASH", None)


def test_rope_context_comes_from_transformers_config_object() -> None:
    yarn = dict(
        QWEN,
        rope_scaling={
            "rope_type": "yarn",
            "factor": 4.0,
            "original_max_position_embeddings": 32768,
        },
    )
    assert context.derive_context_length(yarn).length == 40960
    no_orig = dict(QWEN, rope_scaling={"rope_type": "yarn", "factor": 4.0})
    assert context.derive_context_length(no_orig).length == 40960
    linear = dict(QWEN, rope_scaling={"rope_type": "linear", "factor": 2.0})
    assert context.derive_context_length(linear).length == 81920


@pytest.mark.parametrize(
    ("value", "allowed"),
    [("on", False), ("t", False), ("1", True), ("True", True), ("y", True), (" 1", False)],
)
def test_env_booleans_are_sglangs_envbool(value: str, allowed: bool) -> None:
    short = load_config("eagle3-2048-positions")
    check = context.check_context(QWEN, short, env={context.OVERRIDE_ENV: value})
    assert (check.verdict != context.ContextVerdict.STARTUP_FAILS) is allowed


def test_mem_fraction_decode_graph_capped_by_explicit_cap_only() -> None:
    capped = predict(
        [
            *EAGLE3,
            "--speculative-num-steps",
            "5",
            "--speculative-eagle-topk",
            "1",
            "--max-running-requests",
            "16",
        ]
    )
    assert capped.fields["mem_fraction_static"] == 0.704
    assert capped.fields["cuda_graph_max_bs_decode"] == 16
    # The speculative reset to 48 comes after the memory settings: H100 keeps 256.
    reset = predict(EAGLE3, H100)
    assert reset.fields["max_running_requests"] == 48
    assert reset.fields["cuda_graph_max_bs_decode"] == 256
    assert reset.fields["mem_fraction_static"] == 0.835


def test_prefill_graph_reserve_counts_when_the_prefill_graph_is_on() -> None:
    off = predict(["--model-path", "m"], H100)
    on = predict(["--model-path", "m", "--cuda-graph-backend-prefill", "breakable"], H100)
    sizes = len(memory.prefill_graph_batch_sizes(8192))
    assert on.fields["mem_fraction_static"] == round((81559 - (13440 + sizes * 8)) / 81559, 3)
    assert on.fields["mem_fraction_static"] < off.fields["mem_fraction_static"]


def test_ngram_with_pages_fails_on_hopper_where_fa3_is_resolved_first() -> None:
    argv = ["--model-path", "m", "--speculative-algorithm", "NGRAM", "--page-size", "16"]
    assert predict(argv, L4, draft=None).outcome == "accepted"
    hopper = predict(argv, H100, draft=None)
    assert hopper.outcome == "ValueError"
    assert hopper.message.startswith("speculative_eagle_topk(10) > 1 with page_size(16) > 1")


def test_adaptive_steps_candidates_reserve_and_fallback() -> None:
    bad = predict([*EAGLE3, "--speculative-adaptive", "--speculative-num-steps", "2"])
    assert bad.outcome == "ValueError"
    assert bad.message == (
        "--speculative-num-steps=2 is not in the adaptive config candidate_steps "
        "[0, 1, 3, 5, 7]. Pass one of those values."
    )
    good = resolve_launch(
        {"speculative_algorithm": "EAGLE3", "speculative_adaptive": True}, QWEN, DRAFT
    )
    assert (good.get("speculative_num_steps"), good.get("speculative_num_draft_tokens")) == (3, 4)
    assert good.reserved_tokens == 8
    ngram = resolve_launch({"speculative_algorithm": "NGRAM", "speculative_adaptive": True}, QWEN)
    assert ngram.get("speculative_adaptive") is False
    assert any(w.startswith("speculative_adaptive disabled") for w in ngram.warnings)


def test_steps_without_topk_crash_sglang() -> None:
    out = predict([*EAGLE3, "--speculative-num-steps", "3"])
    assert (out.outcome, out.message) == (
        "TypeError",
        "'>' not supported between instances of 'NoneType' and 'int'",
    )


def test_trtllm_mha_on_sm12x_refuses_fp8_kv() -> None:
    argv = ["--model-path", "m", "--attention-backend", "trtllm_mha", "--kv-cache-dtype"]
    gb10 = lookup_gpu("GB10")
    assert predict([*argv, "fp8_e4m3"], gb10, draft=None).message == (
        "TRTLLM FMHAv2 prefill on SM120 does not support fp8_e4m3 KV cache or skip-softmax."
    )
    assert predict([*argv, "bf16"], gb10, draft=None).outcome == "accepted"
