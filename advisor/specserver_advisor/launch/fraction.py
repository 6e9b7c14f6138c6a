"""The operator's --mem-fraction-static when the spec leaves it to SGLang, and SPEC016's words.

SGLang's heuristic leaves an 8B BF16 target on an L4 no KV cache; the launch model then renders
the least fraction whose pool holds the planned requests (``memfraction.choose_fraction``), and
explains an explicit ``engine.memFractionStatic`` that leaves none in the author's terms. Pure.
"""

from __future__ import annotations

from specserver_advisor.models import SpecServerSpec
from specserver_advisor.perf.plan import Plan
from specserver_advisor.sglang.memfraction import (
    CEILING,
    FractionChoice,
    choose_fraction,
    fraction_for_tokens,
)


def given_fraction_message(spec: SpecServerSpec, plan: Plan, speculative: bool) -> str:
    """SPEC016 for an explicit engine.memFractionStatic, in the author's terms."""
    mem = plan.mem
    with_draft = speculative and mem.draft_weight_gib > 0
    weights = mem.target_weight_gib + (mem.draft_weight_gib if with_draft else 0.0)
    least = fraction_for_tokens(mem, 1, with_draft)
    fix = (
        f"set it to at least {least:.3f}"
        if least <= CEILING
        else "it cannot fit on this GPU at any safe value: add GPUs or use a quantized checkpoint"
    )
    return (
        f"engine.memFractionStatic {spec.engine.mem_fraction_static} leaves no KV cache after "
        f"{weights:.1f} GiB of weights{' with the draft' if with_draft else ''}: {fix}, or "
        "remove it and the operator computes one"
    )


def computed_fraction(
    spec: SpecServerSpec, plan: Plan, speculative: bool, gpu_name: str
) -> FractionChoice | None:
    """A fraction to render when the spec leaves it to SGLang and its heuristic leaves no KV."""
    pool = (
        plan.mem.kv_pool_tokens_with_draft if speculative else plan.mem.kv_pool_tokens_without_draft
    )
    if spec.engine.mem_fraction_static or pool > 0:
        return None
    r = plan.resolution
    request = spec.engine.expected_input_tokens + spec.engine.expected_output_tokens
    request += r.reserved_tokens + (2 * r.draft_slots if speculative else 0)
    planned = spec.engine.max_running_requests or plan.mem.settings.cuda_graph_max_bs
    return choose_fraction(
        plan.mem,
        request_tokens=request,
        planned_requests=planned,
        with_draft=speculative and plan.mem.draft_weight_gib > 0,
        gpus=spec.resources.gpus,
        gpu_name=gpu_name,
    )
