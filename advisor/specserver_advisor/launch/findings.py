"""What the advisor finds in one planned launch: why it cannot start, and its resolved summary.

Used by ``launch.settle`` (the operator's ConfigValid and ``status.resolved``). The lint rules'
view of the rendered argv is one floor up, in ``launchlint`` (the launch model never runs the
linter). Pure.
"""

from __future__ import annotations

from typing import Any

from specserver_advisor import findings
from specserver_advisor.perf.plan import Plan
from specserver_advisor.sglang import draftcontext


def refusal(plan: Plan, speculative: bool) -> tuple[str, str] | None:
    """(rule code, message) when SGLang would not start this launch; None when it would."""
    if plan.resolution.errors:
        err = plan.resolution.errors[0]
        return (
            findings.startup_error_code(err),
            f"SGLang would fail at startup: {err.exception}: {err.message}",
        )
    if plan.resolution.reserved_tokens_error:
        return findings.TOPK_WITHOUT_DRAFT_TOKENS, reserved_tokens_message(plan)
    if plan.context.verdict.value == "startup_fails":
        return findings.DRAFT_CONTEXT_SHORTER, context_message(plan)
    pool = (
        plan.mem.kv_pool_tokens_with_draft if speculative else plan.mem.kv_pool_tokens_without_draft
    )
    if pool <= 0:
        return findings.NO_KV_MEMORY, plan.mem.error or "no KV memory"
    return None


def reserved_tokens_message(plan: Plan) -> str:
    """SPEC017: topk > 1 without a draft-token count fails in SGLang's tokenizer manager."""
    r = plan.resolution
    topk, steps = r.get("speculative_eagle_topk"), r.get("speculative_num_steps")
    return (
        f"SGLang would fail at startup: TypeError: {r.reserved_tokens_error} (its reserved "
        f"tokens per request, max(topk {topk} * steps {steps}, draft tokens), with no "
        "--speculative-num-draft-tokens). Set speculative.numDraftTokens "
        "(--speculative-num-draft-tokens)"
    )


def context_message(plan: Plan) -> str:
    """SPEC002 for the SpecServer's author: which length, which model, what to change."""
    ctx = plan.context
    if ctx.failing_model == "draft" and ctx.draft is not None:
        return (
            f"the draft supports {ctx.draft} tokens of context, fewer than the {ctx.effective} "
            "the target runs with: SGLang refuses to start. Set engine.contextLength to "
            f"{ctx.draft} or less, set {draftcontext.FIELD}: true (the operator gives the "
            "draft the target's own rope scaling and max_position_embeddings), or use a draft "
            "trained for the longer context (SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 in "
            f"engine.env starts it anyway, with wrong drafts past {ctx.draft} tokens)"
        )
    if ctx.failing_model == "target":
        return (
            f"engine.contextLength is longer than the {ctx.target} tokens the model supports: "
            f"SGLang refuses to start. Set engine.contextLength to {ctx.target} or less "
            "(SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 in engine.env overrides, at the risk "
            "of wrong output)"
        )
    return ctx.message


def summary(plan: Plan, speculative: bool) -> dict[str, Any]:
    """The resolved view the operator writes to ``status.resolved``."""
    r = plan.resolution
    # max_running_requests is always rendered explicitly; status explains it on its own.
    notes = [
        f"{name}: {v.reason}"
        for name, v in r.values.items()
        if v.source in ("auto", "forced", "derived") and v.reason and name != "max_running_requests"
    ]
    return {
        "algorithm": r.algorithm if speculative else None,
        "numSteps": r.get("speculative_num_steps") if speculative else None,
        "eagleTopk": r.get("speculative_eagle_topk") if speculative else None,
        "numDraftTokens": r.get("speculative_num_draft_tokens") if speculative else None,
        "contextLength": plan.context.effective,
        "kvPoolTokens": plan.mem.kv_pool_tokens_with_draft
        if speculative
        else plan.mem.kv_pool_tokens_without_draft,
        "notes": notes[:10],
    }
