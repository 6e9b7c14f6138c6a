"""The non-EAGLE steps of ``resolve_launch``: NGRAM, DFLASH, DSPARK, FROZEN_KV_MTP and UNO.

SGLang 0.5.23's per-algorithm handlers in ``speculative_hook`` (their checks with SGLang's own
messages, the values they force or derive), recorded on the resolver. Pure.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from specserver_advisor.sglang import configvalues
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
    """UNO (``_handle_uno``): the target reuses itself, a LoRA path, a verify width Q, linear
    (topk 1: one step) or tree mode (topk > 1: F = steps + 1), TP=PP=1, FA3 only. No reset of
    ``max_running_requests``."""
    if r.device != "cuda":
        r.fail("UNO only supports CUDA.")
        return
    checks = (
        (
            r.user("speculative_draft_model_path") is not None,
            "speculative_draft_model_path",
            "UNO reuses the target model and does not accept --speculative-draft-model-path.",
        ),
        (r.cur("uno_lora_path") is None, "uno_lora_path", "UNO requires --uno-lora-path."),
        (
            bool(r.cur("enable_deterministic_inference")),
            "enable_deterministic_inference",
            "UNO does not support --enable-deterministic-inference because its sampling path "
            "does not use per-request seeds.",
        ),
        (
            bool(r.cur("enable_strict_thinking")),
            "enable_strict_thinking",
            "UNO does not support --enable-strict-thinking because it requires grammar decoding.",
        ),
    )
    for bad, name, message in checks:
        if bad:
            r.fail(message, name)
            return
    q = r.cur("speculative_num_draft_tokens")
    if q is None or int(q) < 1:
        r.fail(
            "UNO requires --speculative-num-draft-tokens to be a positive integer denoting "
            "the linear width or tree verify width Q.",
            "speculative_num_draft_tokens",
        )
        return
    r.set("speculative_num_draft_tokens", int(q), "user", "UNO's verify width Q")
    topk = r.user("speculative_eagle_topk")
    k = 1 if topk is None else int(topk)
    if k < 1:
        r.fail(
            f"UNO requires --speculative-eagle-topk to be at least 1, got {k}.",
            "speculative_eagle_topk",
        )
        return
    if k > 1:
        problem = _uno_tree_problem(r, int(q), k)
        if problem:
            r.fail(problem, "speculative_num_draft_tokens", "speculative_eagle_topk")
            return
        r.set("speculative_num_steps", int(r.user("speculative_num_steps")), "user")
        r.set("speculative_eagle_topk", k, "user", "UNO tree mode")
    else:
        for name in ("speculative_num_steps", "speculative_eagle_topk"):
            if r.user(name) not in (None, 1):
                r.warn(f"UNO uses {name}=1; overriding {r.user(name)}.")
            r.set(name, 1, "forced", "UNO linear mode: one step, topk 1")
    if (r.cur("tp_size"), r.cur("pp_size")) != (1, 1):
        r.fail("UNO requires TP=PP=1.", "tp_size")
        return
    if r.attn_dp or int(r.cur("attn_cp_size") or 1) != 1:
        r.fail("UNO does not support DP attention or context parallelism.", "attn_dp_size")
        return
    if r.cur("enable_lora") or r.cur("lora_paths"):
        r.fail("UNO does not support public Multi-LoRA serving.", "lora_paths")
        return
    if r.cur("speculative_use_rejection_sampling"):
        r.fail(
            "UNO manages its own stochastic verification and does not use "
            "--speculative-use-rejection-sampling.",
            "speculative_use_rejection_sampling",
        )
        return
    if r.cur("enable_mixed_chunk"):
        msg = "Mixed chunked prefill is disabled for UNO speculative decoding."
        r.set("enable_mixed_chunk", False, "forced", msg)
        r.warn(msg)
    backend = r.cur("attention_backend")
    prefill = r.cur("prefill_attention_backend") or backend
    decode = r.cur("decode_attention_backend") or backend
    if (prefill, decode) != ("fa3", "fa3"):
        r.fail(
            "UNO requires FA3 for both prefill and decode attention; "
            f"got prefill={prefill!r}, decode={decode!r}.",
            "attention_backend",
        )


def _uno_tree_problem(r: Resolver, q: int, k: int) -> str | None:
    """UNO tree mode's checks on Q (verify width), K (topk) and the steps, SGLang's text."""
    steps = r.user("speculative_num_steps")
    if steps is None:
        return (
            "UNO tree mode requires --speculative-num-steps so its draft width F can be "
            "derived as speculative_num_steps + 1."
        )
    steps = int(steps)
    if steps < 1:
        return f"UNO tree mode requires --speculative-num-steps to be positive, got {steps}."
    f = steps + 1
    if q < f:
        return f"UNO tree mode requires Q >= F; got Q={q}, F={f}."
    if q > 128:
        return f"UNO tree mode currently supports at most Q=128 verify nodes, got Q={q}."
    if q * k > 2048:
        return f"UNO tree mode currently supports Q*K <= 2048; got Q*K={q}*{k}={q * k}."
    capacity, nodes = 1, 1
    for _ in range(steps):
        nodes *= k
        capacity += nodes
        if capacity >= q:
            break
    if q > capacity:
        return (
            "UNO tree mode cannot build the requested Q from F and K: "
            f"Q={q} exceeds capacity={capacity} for F={f}, K={k}."
        )
    parent = k * max(steps - 1, 0) + 1
    if q - 1 > parent:
        return (
            "UNO tree mode cannot represent the requested Q in EAGLE's parent-list ABI: "
            f"Q-1={q - 1} exceeds K*(F-2)+1={parent} for F={f}, K={k}."
        )
    if r.cur("enable_pdmux"):
        return "UNO tree mode does not yet support PDMux."
    if r.cur("enable_two_batch_overlap"):
        return "UNO tree mode does not yet support two-batch overlap."
    if (
        r.cur("speculative_accept_threshold_single") != 1.0
        or r.cur("speculative_accept_threshold_acc") != 1.0
    ):
        return (
            "UNO tree mode reuses EAGLE target-only sampling and requires both speculative "
            "accept thresholds to be 1.0."
        )
    return None


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
