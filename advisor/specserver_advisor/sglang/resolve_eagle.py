"""The EAGLE-family step of ``resolve_launch``: EAGLE, EAGLE3, STANDALONE (and NEXTN, its alias).

SGLang 0.5.23's eagle handler in ``speculative_hook``: the MTP draft path, the auto-chosen
shape, the topk/backend/page-size checks, rejection sampling, and adaptive mode
(``_maybe_disable_adaptive`` + ``_init_adaptive_speculative_params``), each value recorded on
the resolver with its source and reason. Pure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from specserver_advisor.sglang.speculative_tables import (
    ADAPTIVE_CANDIDATE_STEPS,
    ADAPTIVE_DEFAULT_STEPS,
    MIXED_CHUNK_SUPPORTED,
    MTP_TARGETS,
    NONE_TOPK_CRASH,
    PAGE_TREE_BACKENDS,
    auto_choose,
)

if TYPE_CHECKING:
    from specserver_advisor.sglang.resolve import Resolver


def eagle(r: Resolver, algo: str) -> None:
    """EAGLE / EAGLE3 / STANDALONE: MTP draft path, auto shape, topk and backend checks."""
    if algo == "STANDALONE" and r.attn_dp:
        r.fail(
            "Currently standalone speculative decoding does not support dp attention.",
            "attn_dp_size",
        )
        return
    if r.device == "cpu":
        r.set(
            "disable_overlap_schedule",
            True,
            "forced",
            "Overlap schedule is not implemented for speculative decoding on CPU.",
        )
    if r.cur("enable_mixed_chunk") and algo not in MIXED_CHUNK_SUPPORTED:
        msg = f"Mixed chunked prefill is disabled: {algo} speculative decoding does not support it."
        r.set("enable_mixed_chunk", False, "forced", msg)
        r.warn(msg)
    _mtp_draft_path(r)
    steps, topk, ndt = (
        r.user("speculative_num_steps"),
        r.user("speculative_eagle_topk"),
        r.user("speculative_num_draft_tokens"),
    )
    if r.cur("speculative_adaptive"):
        pass  # shape set by _adaptive
    elif steps is None:
        if topk is not None or ndt is not None:
            r.fail(
                "assert speculative_eagle_topk is None and speculative_num_draft_tokens "
                "is None (set --speculative-num-steps together with --speculative-eagle-"
                "topk / --speculative-num-draft-tokens)",
                "speculative_eagle_topk",
                "speculative_num_draft_tokens",
                exc="AssertionError",
            )
            return
        shape, why = auto_choose(algo, r.arch)
        for name, value in zip(
            ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens"),
            shape,
            strict=True,
        ):
            r.set(name, value, "auto", why)
    topk = r.cur("speculative_eagle_topk")
    backend = r.cur("attention_backend")
    if topk is None and (
        backend == "trtllm_mha" or not r.cur("speculative_use_rejection_sampling")
    ):
        # --speculative-num-steps without --speculative-eagle-topk: SGLang 0.5.23 compares
        # the unset topk with 1 and crashes (speculative_hook.py, the page-tree check).
        r.fail(
            NONE_TOPK_CRASH,
            "speculative_num_steps",
            "speculative_eagle_topk",
            exc="TypeError",
        )
        return
    if topk is not None and topk > 1 and backend == "trtllm_mha":
        r.fail(
            "trtllm_mha backend only supports topk = 1 for speculative decoding.",
            "attention_backend",
            "speculative_eagle_topk",
        )
        return
    if r.hip and hip_rejection_sampling_default(
        use_rejection_sampling=bool(r.cur("speculative_use_rejection_sampling")),
        algorithm=algo,
        token_map=r.cur("speculative_token_map"),
        eagle_topk=topk,
        accept_threshold_single=r.cur("speculative_accept_threshold_single"),
        accept_threshold_acc=r.cur("speculative_accept_threshold_acc"),
        enable_deterministic_inference=bool(r.cur("enable_deterministic_inference")),
    ):
        r.set(
            "speculative_use_rejection_sampling",
            True,
            "derived",
            "ROCm has no CUDA sampling-verify kernels: EAGLE's verify goes through the Triton "
            "chain sampler (rejection sampling) instead of greedy",
        )
    _rejection_sampling(r, algo)
    if r.out.errors:
        return
    steps = r.cur("speculative_num_steps")
    if topk == 1 and r.cur("speculative_num_draft_tokens") != steps + 1:
        msg = (
            "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when "
            "speculative_eagle_topk == 1"
        )
        if r.user("speculative_num_draft_tokens") is not None:
            r.warn(msg)
        r.set("speculative_num_draft_tokens", steps + 1, "forced", msg)
    page = r.cur("page_size") or 1
    if (
        topk is not None
        and topk > 1
        and page > 1
        and backend is not None
        and backend not in PAGE_TREE_BACKENDS
    ):
        r.fail(
            f"speculative_eagle_topk > 1 with page_size > 1 is only supported on "
            f"{PAGE_TREE_BACKENDS}; got attention_backend={backend!r}. Use page_size "
            "== 1 or one of those backends.",
            "speculative_eagle_topk",
            "page_size",
        )


def adaptive(r: Resolver, algo: str) -> None:
    """``_maybe_disable_adaptive`` + ``_init_adaptive_speculative_params`` (before the
    algorithm's handler): off outside EAGLE/EAGLE3 with topk 1 and no attention DP."""
    topk = r.user("speculative_eagle_topk")
    reason = None
    if algo not in ("EAGLE", "EAGLE3"):
        reason = f"speculative_algorithm={algo} (only EAGLE/EAGLE3 are supported)"
    elif topk is not None and topk != 1:
        reason = f"speculative_eagle_topk={topk} (only topk=1 is supported)"
    elif r.attn_dp:
        reason = (
            "attention DP is not supported (adaptive tier decisions are not synchronized "
            "across DP ranks)"
        )
    elif r.cur("enable_multi_layer_eagle"):
        reason = "enable_multi_layer_eagle=True is not supported"
    elif r.cur("enable_two_batch_overlap"):
        reason = "enable_two_batch_overlap=True is not supported"
    elif r.cur("enable_pdmux"):
        reason = "enable_pdmux=True is not supported"
    if reason is not None:
        msg = f"speculative_adaptive disabled: {reason}. Falling back to static speculative params."
        r.set("speculative_adaptive", False, "forced", msg)
        r.warn(msg)
        return
    if topk is None:
        r.set("speculative_eagle_topk", 1, "default", "adaptive mode defaults topk to 1")
    steps = r.user("speculative_num_steps")
    if steps is None:
        steps = ADAPTIVE_DEFAULT_STEPS
        r.set(
            "speculative_num_steps",
            steps,
            "default",
            "middle of the adaptive candidate steps",
        )
    if steps not in ADAPTIVE_CANDIDATE_STEPS:
        r.fail(
            f"--speculative-num-steps={steps} is not in the adaptive config candidate_steps "
            f"{list(ADAPTIVE_CANDIDATE_STEPS)}. Pass one of those values.",
            "speculative_num_steps",
        )
        return
    r.set(
        "speculative_num_draft_tokens",
        steps + 1,
        "forced",
        "adaptive mode uses num_steps + 1 draft tokens",
    )


def _mtp_draft_path(r: Resolver) -> None:
    if r.arch not in MTP_TARGETS:
        return
    if r.user("speculative_draft_model_path") is None:
        r.set(
            "speculative_draft_model_path",
            r.user("model_path"),
            "derived",
            f"{r.arch} carries its MTP layers; the draft is the target checkpoint",
        )
        r.set(
            "speculative_draft_model_revision",
            r.user("revision"),
            "derived",
            "draft revision follows --revision for MTP targets",
        )
    elif r.arch not in ("MistralLarge3ForCausalLM", "PixtralForConditionalGeneration"):
        r.warn("DeepSeek MTP does not require setting speculative_draft_model_path.")


def hip_rejection_sampling_default(
    *,
    use_rejection_sampling: bool,
    algorithm: str | None,
    token_map: Any,
    eagle_topk: Any,
    accept_threshold_single: Any,
    accept_threshold_acc: Any,
    enable_deterministic_inference: bool,
) -> bool:
    """``_should_auto_enable_hip_rejection_sampling`` (SGLang 0.5.23, on ROCm): EAGLE (NEXTN)
    chains without a hot-vocab token map get rejection sampling by default, since HIP's verify
    would otherwise be greedy and ignore temperature; EAGLE3 does not (its reduced draft vocab).
    ``SGLANG_SIMULATE_ACC_LEN`` (a benchmarking switch) is not read."""
    return (
        not use_rejection_sampling
        and algorithm == "EAGLE"
        and token_map is None
        and eagle_topk == 1
        and accept_threshold_single == 1.0
        and accept_threshold_acc == 1.0
        and not enable_deterministic_inference
    )


def _rejection_sampling(r: Resolver, algo: str) -> None:
    """The eagle-family handler's rejection-sampling checks (SGLang's own text)."""
    if not r.cur("speculative_use_rejection_sampling"):
        return
    if algo not in ("EAGLE", "EAGLE3"):
        r.fail(
            "--speculative-use-rejection-sampling is only supported for EAGLE / EAGLE3 / "
            f"NEXTN, not speculative_algorithm={algo}.",
            "speculative_use_rejection_sampling",
            exc="NotImplementedError",
        )
    elif r.cur("speculative_eagle_topk") != 1:
        r.fail(
            "--speculative-use-rejection-sampling requires --speculative-eagle-topk=1.",
            "speculative_use_rejection_sampling",
        )
    elif (
        r.cur("speculative_accept_threshold_single") != 1.0
        or r.cur("speculative_accept_threshold_acc") != 1.0
    ):
        r.fail(
            "--speculative-use-rejection-sampling is incompatible with "
            "--speculative-accept-threshold-single / --speculative-accept-threshold-acc; "
            "rejection sampling ignores the accept thresholds.",
            "speculative_use_rejection_sampling",
        )
