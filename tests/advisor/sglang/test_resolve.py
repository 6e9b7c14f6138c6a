"""Launch resolution: what SGLang 0.5.23 really runs with, and what it refuses."""

from __future__ import annotations

from typing import Any

from specserver_advisor.sglang.flags import parse_server_argv
from specserver_advisor.sglang.resolve import Resolution, resolve_launch
from specserver_advisor.sglang.speculative_tables import RESET_MESSAGE
from stack import load_config


def resolve(
    *argv: str, target: str = "qwen3-8b", draft: dict[str, Any] | None = None, device: str = "cuda"
) -> Resolution:
    parsed = parse_server_argv(["--model-path", "m", *argv])
    assert not parsed.issues, parsed.issues
    return resolve_launch(parsed.values, load_config(target), draft, device)


def shape(r: Resolution) -> tuple[int, int, int]:
    return (
        r.get("speculative_num_steps"),
        r.get("speculative_eagle_topk"),
        r.get("speculative_num_draft_tokens"),
    )


def test_no_algorithm_means_no_speculation() -> None:
    r = resolve()
    assert r.algorithm is None and r.get("max_running_requests") is None and not r.errors


def test_auto_choose_by_architecture() -> None:
    llama = resolve("--speculative-algorithm", "EAGLE3", target="llama-3.1-8b")
    assert shape(llama) == (5, 4, 8)
    assert llama.values["speculative_num_steps"].source == "auto"
    assert llama.reserved_tokens == 20
    qwen = resolve("--speculative-algorithm", "EAGLE3")
    assert shape(qwen) == (3, 1, 4) and qwen.reserved_tokens == 4
    standalone = resolve("--speculative-algorithm", "STANDALONE", target="llama-3.1-8b")
    assert shape(standalone) == (3, 1, 4)


def test_lowercase_and_nextn_alias() -> None:
    r = resolve("--speculative-algorithm", "nextn", target="deepseek-v3")
    assert r.algorithm == "EAGLE"
    assert r.values["speculative_algorithm"].source == "forced"
    assert r.get("speculative_draft_model_path") == "m"
    assert r.values["speculative_draft_model_path"].source == "derived"
    assert resolve("--speculative-algorithm", "eagle3").algorithm == "EAGLE3"


def test_mtp_target_with_a_draft_path_warns() -> None:
    r = resolve(
        "--speculative-algorithm",
        "NEXTN",
        "--speculative-draft-model-path",
        "x",
        target="deepseek-v3",
    )
    assert "DeepSeek MTP does not require setting speculative_draft_model_path." in r.warnings


def test_max_running_requests_reset_to_48_only_when_unset() -> None:
    r = resolve("--speculative-algorithm", "EAGLE3")
    assert r.get("max_running_requests") == 48
    assert r.values["max_running_requests"].source == "forced"
    assert RESET_MESSAGE in r.warnings
    kept = resolve("--speculative-algorithm", "EAGLE3", "--max-running-requests", "16")
    assert kept.get("max_running_requests") == 16 and RESET_MESSAGE not in kept.warnings


def test_uno_does_not_reset_and_needs_its_lora() -> None:
    r = resolve("--speculative-algorithm", "UNO", "--speculative-num-draft-tokens", "4")
    assert r.get("max_running_requests") is None
    assert [e.message for e in r.errors] == ["UNO requires --uno-lora-path."]


def test_topk_one_rewrites_draft_tokens() -> None:
    r = resolve(
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-num-steps",
        "3",
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        "8",
    )
    assert shape(r) == (3, 1, 4)
    assert r.values["speculative_num_draft_tokens"].source == "forced"
    assert any("adjusted to speculative_num_steps + 1" in w for w in r.warnings)


def test_partial_shape_is_an_assertion_error() -> None:
    r = resolve("--speculative-algorithm", "EAGLE3", "--speculative-eagle-topk", "2")
    assert [e.exception for e in r.errors] == ["AssertionError"]


def test_unknown_algorithm() -> None:
    r = resolve("--speculative-algorithm", "MEDUSA")
    assert r.errors[0].message == "Unknown speculative algorithm name: MEDUSA"


def test_ngram_defaults_and_mixed_chunk() -> None:
    r = resolve("--speculative-algorithm", "NGRAM", "--enable-mixed-chunk")
    assert shape(r) == (1, 10, 12)
    assert r.get("enable_mixed_chunk") is False
    assert r.reserved_tokens == 0
    assert any("mixed chunked prefill are disabled" in w for w in r.warnings)


def test_standalone_turns_mixed_chunk_off_but_eagle3_keeps_it() -> None:
    r = resolve("--speculative-algorithm", "STANDALONE", "--enable-mixed-chunk")
    assert r.get("enable_mixed_chunk") is False
    assert (
        resolve("--speculative-algorithm", "EAGLE3", "--enable-mixed-chunk").get(
            "enable_mixed_chunk"
        )
        is True
    )


def test_backend_and_page_size_constraints() -> None:
    tree = (  # EAGLE with a draft tree: topk 4
        "--speculative-algorithm",
        "EAGLE",
        "--speculative-num-steps",
        "5",
        "--speculative-eagle-topk",
        "4",
        "--speculative-num-draft-tokens",
        "8",
    )
    r = resolve(*tree, "--attention-backend", "trtllm_mha")
    assert "trtllm_mha backend only supports topk = 1" in r.errors[0].message
    paged = resolve(*tree, "--page-size", "16", "--attention-backend", "flashmla")
    assert "page_size > 1 is only supported on" in paged.errors[0].message
    ok = resolve(*tree, "--page-size", "16", "--attention-backend", "fa3")
    assert not ok.errors


def test_gemma4_assistant_promotion() -> None:
    draft = {"architectures": ["Gemma4AssistantForCausalLM"]}
    assert resolve("--speculative-algorithm", "NEXTN", draft=draft).algorithm == "FROZEN_KV_MTP"
    eagle3 = resolve("--speculative-algorithm", "EAGLE3", draft=draft)
    assert "EAGLE3 is not supported" in eagle3.errors[0].message


def test_dflash_requires_a_draft_and_takes_block_size_from_it() -> None:
    missing = resolve("--speculative-algorithm", "DFLASH")
    assert "DFLASH speculative decoding requires setting --speculative-draft-model-path." in [
        e.message for e in missing.errors
    ]
    r = resolve(
        "--speculative-algorithm",
        "DFLASH",
        "--speculative-draft-model-path",
        "d",
        draft={"architectures": ["DFlashDraftModel"], "block_size": 10},
    )
    assert shape(r) == (1, 1, 10) and r.get("max_running_requests") == 48


def test_overlap_off_on_cpu_and_draft_revision_default() -> None:
    r = resolve(
        "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "d", device="cpu"
    )
    assert r.get("disable_overlap_schedule") is True
    assert r.get("speculative_draft_model_revision") == "main"


def test_argv_parser_handles_prefixes_removed_flags_and_values() -> None:
    parsed = parse_server_argv(
        [
            "--model",
            "m",
            "--speculative-algo",
            "EAGLE3",
            "--cuda-graph-max-bs",
            "8",
            "--mem-fraction-static=x",
        ]
    )
    assert parsed.values["speculative_algorithm"] == "EAGLE3"
    kinds = {i.token: i.kind for i in parsed.issues}
    # 0.5.23 has -decode and -prefill: the old name is an ambiguous prefix (argparse's text).
    assert kinds["--cuda-graph-max-bs"] == "ambiguous"
    assert "8" not in kinds
    assert kinds["--mem-fraction-static"] == "value"
    serve = parse_server_argv(["Qwen/Qwen3-8B", "--port", "8000"], positional_model=True)
    assert serve.values == {"model_path": "Qwen/Qwen3-8B", "port": 8000}


def test_adaptive_reserves_its_largest_candidate() -> None:
    """``compute_num_reserved_tokens`` takes ``max_speculative_num_draft_tokens``, which adaptive
    mode sizes for its largest candidate (7 steps + 1); the oracle compares this field."""
    fixed = resolve("--speculative-algorithm", "EAGLE3")
    adaptive = resolve("--speculative-algorithm", "EAGLE3", "--speculative-adaptive")
    assert (fixed.reserved_tokens, adaptive.reserved_tokens) == (4, 8)


def test_topk_without_draft_tokens_fails_when_the_tokenizer_reserves_tokens() -> None:
    """SGLang leaves the draft-token count None for topk > 1 without it, and its tokenizer
    manager's ``max(topk * steps, None)`` raises at startup (oracle: test_reserved_tokens.py)."""
    eagle = ("--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3")
    r = resolve(*eagle, "--speculative-eagle-topk", "2")
    assert not r.errors and r.get("speculative_num_draft_tokens") is None
    assert r.reserved_tokens_error == "'>' not supported between instances of 'NoneType' and 'int'"
    given = resolve(*eagle, "--speculative-eagle-topk", "2", "--speculative-num-draft-tokens", "6")
    assert given.reserved_tokens_error is None
    assert resolve(*eagle, "--speculative-eagle-topk", "1").reserved_tokens_error is None
    assert resolve("--speculative-algorithm", "NGRAM").reserved_tokens_error is None
