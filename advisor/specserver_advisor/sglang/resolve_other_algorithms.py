"""The non-EAGLE steps of ``resolve_launch``: NGRAM, DFLASH, DSPARK, FROZEN_KV_MTP and UNO.

SGLang 0.5.23's per-algorithm handlers in ``speculative_hook`` (their checks with SGLang's own
messages, the values they force or derive), recorded on the resolver. Pure.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from specserver_advisor import configvalues
from specserver_advisor.sglang.speculative_tables import (
    DEFAULT_DSPARK_GAMMA,
    DFLASH_FALLBACK_BLOCK,
)

if TYPE_CHECKING:
    from specserver_advisor.sglang.resolve import Resolver


def ngram(r: Resolver, algo: str) -> None:
    """NGRAM: topk from the BFS breadth, 12 draft tokens by default, no mixed chunk."""
    if r.device not in ("cuda", "cpu", "xpu"):
        r.fail("Ngram speculative decoding only supports CUDA, CPU, or XPU devices.")
    msg = "The mixed chunked prefill are disabled because of using ngram speculative decoding."
    r.set("enable_mixed_chunk", False, "forced", msg)
    if r.user("enable_mixed_chunk"):
        r.warn(msg)
    breadth = r.cur("speculative_ngram_max_bfs_breadth")
    r.set(
        "speculative_eagle_topk",
        breadth,
        "forced",
        "NGRAM sets topk to --speculative-ngram-max-bfs-breadth",
    )
    ndt = r.user("speculative_num_draft_tokens")
    if ndt is None:
        ndt = 12
        r.set(
            "speculative_num_draft_tokens",
            12,
            "default",
            "speculative_num_draft_tokens is set to 12 by default for ngram",
        )
    if r.user("speculative_num_steps") is None:
        r.set("speculative_num_steps", ndt // breadth, "derived", "num_draft_tokens // topk")
    page = r.cur("page_size") or 1
    backend = r.cur("attention_backend")
    if breadth > 1 and page > 1 and backend not in (None, "flashinfer"):
        r.fail(
            f"speculative_eagle_topk({breadth}) > 1 with page_size({page}) > 1 is "
            "unstable and produces incorrect results for paged attention backends. "
            "This combination is only supported for the 'flashinfer' backend.",
            "page_size",
            "attention_backend",
        )
    if r.attn_dp:
        r.fail(
            "Currently ngram speculative decoding does not support dp attention.",
            "attn_dp_size",
        )


def dflash(r: Resolver, algo: str) -> None:
    """DFLASH: a draft path, one step, draft tokens from the block size."""
    if r.cur("pp_size") != 1:
        r.fail("Currently DFLASH speculative decoding only supports pp_size == 1.")
    if r.cur("speculative_draft_model_path") is None:
        r.fail(
            "DFLASH speculative decoding requires setting --speculative-draft-model-path.",
            "speculative_draft_model_path",
        )
    _force_single_step(r, "DFLASH")
    block = r.user("speculative_dflash_block_size")
    ndt = r.user("speculative_num_draft_tokens")
    if block is not None and ndt is not None and block != ndt:
        r.fail(
            "--speculative-dflash-block-size must equal --speculative-num-draft-tokens "
            "when both are set.",
            "speculative_dflash_block_size",
        )
    inferred = configvalues.integer(r.draft or {}, "block_size", 1)
    value, why = next(
        (
            (v, w)
            for v, w in (
                (block, "--speculative-dflash-block-size"),
                (ndt, "user"),
                (inferred, "draft config block_size"),
            )
            if v is not None
        ),
        (DFLASH_FALLBACK_BLOCK, "fallback 16"),
    )
    r.set("speculative_num_draft_tokens", int(value), "derived", why)


def dspark(r: Resolver, algo: str) -> None:
    """DSPARK: the target checkpoint's head, one step, gamma + 1 draft tokens."""
    if r.cur("speculative_draft_model_path") is None:
        r.set(
            "speculative_draft_model_path",
            r.user("model_path"),
            "derived",
            "DSPARK uses the target checkpoint's bundled head or its dspark/ subfolder; "
            "without either SGLang raises 'DSpark dense speculative decoding requires "
            "setting --speculative-draft-model-path.'",
        )
    _force_single_step(r, "DSPARK")
    gamma = (
        r.user("speculative_dspark_block_size")
        or configvalues.integer(r.draft or {}, "block_size", 1)
        or DEFAULT_DSPARK_GAMMA
    )
    r.set("speculative_num_draft_tokens", int(gamma) + 1, "derived", "gamma + 1")


def frozen_kv_mtp(r: Resolver, algo: str) -> None:
    """FROZEN_KV_MTP (Gemma4 assistant drafts): no mixed chunked prefill."""
    msg = "Mixed chunked prefill is disabled because of using Frozen-KV MTP speculative decoding."
    if r.cur("enable_mixed_chunk"):
        r.warn(msg)
    r.set("enable_mixed_chunk", False, "forced", msg)


def uno(r: Resolver, algo: str) -> None:
    """UNO: CUDA, no draft path, a LoRA path, TP=PP=1."""
    if r.device != "cuda":
        r.fail("UNO only supports CUDA.")
    if r.user("speculative_draft_model_path") is not None:
        r.fail(
            "UNO reuses the target model and does not accept --speculative-draft-model-path.",
            "speculative_draft_model_path",
        )
    if r.cur("uno_lora_path") is None:
        r.fail("UNO requires --uno-lora-path.", "uno_lora_path")
    ndt = r.cur("speculative_num_draft_tokens")
    if ndt is None or ndt < 1:
        r.fail("UNO requires --speculative-num-draft-tokens >= 1.", "speculative_num_draft_tokens")
    if r.cur("tp_size") != 1 or r.cur("pp_size") != 1:
        r.fail("UNO requires TP=PP=1.", "tp_size")
    r.set("enable_mixed_chunk", False, "forced", "UNO disables mixed chunked prefill")


def _force_single_step(r: Resolver, algo: str) -> None:
    for name in ("speculative_num_steps", "speculative_eagle_topk"):
        if r.user(name) not in (None, 1):
            r.warn(f"{algo} forces {name}=1 (was {r.user(name)}).")
        r.set(name, 1, "forced", f"{algo} uses one step and topk 1")


#: The handler for each non-EAGLE algorithm (EAGLE, EAGLE3 and STANDALONE go to ``eagle``).
ALGORITHM_HANDLERS: dict[str, Callable[[Resolver, str], None]] = {
    "NGRAM": ngram,
    "DFLASH": dflash,
    "DSPARK": dspark,
    "UNO": uno,
    "FROZEN_KV_MTP": frozen_kv_mtp,
}
