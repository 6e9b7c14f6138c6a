"""What the advisor finds in one rendered launch: why it cannot start, and the lint rules' view.

Used by ``launch.build_engine_config`` (the operator's ConfigValid and its warning events). The
warnings are the rule registry's own findings on the exact argv the operator renders (the same
rules ``lint`` runs), not messages matched by substring. Pure.
"""

from __future__ import annotations

from typing import Any

from specserver_advisor import draftcontext, findings
from specserver_advisor.plan import Plan


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


def rule_findings(
    argv: list[str],
    env: dict[str, str],
    target: dict[str, Any],
    draft: dict[str, Any] | None,
    gpu_type: str,
) -> list[tuple[str, str]]:
    """(code, message) of every warning or error the lint rules find in this server launch."""
    from specserver_advisor.lint.model import Context, Position
    from specserver_advisor.lint.rules import RULES
    from specserver_advisor.lint.sources import make_launch

    launch = make_launch(
        "<specserver>", "server", argv, [Position()] * len(argv), Position(), env, True
    )
    launch.configs.update({"target": target, "draft": draft})
    launch.gpu_type = gpu_type
    ctx = Context([launch])
    out = []
    for module in RULES.values():
        if "server" not in module.APPLIES_TO:
            continue
        for d in module.check(launch, ctx):
            if d.severity in ("warning", "error"):
                out.append((d.code, d.message))
    return out
