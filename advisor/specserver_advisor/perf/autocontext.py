"""Why the operator's Auto context has no finite crossover, in words (``plan`` prints it).

``launch.policy_context_for`` gives mode Auto a crossover per accept length: finite, ``inf``
(speculation pays at every load it plans) or 0 (it loses even at one request). Only a finite
one is a load to switch at; for the others ``no_crossover_reason`` says which mechanism of the
launch leaves none, so a reader (``plan --from``, the test over ``manifests/examples``) never
sees a bare ``inf``. Pure.
"""

from __future__ import annotations

import inspect
import math

from specserver_advisor.models import AutoSpeculation, SpecServerSpec
from specserver_advisor.perf.plan import policy_context
from specserver_advisor.policy.model import NEUTRAL_CONTEXT, PolicyContext, accept_floor

#: The highest load the context is planned at (``plan.policy_context``'s concurrencies).
PLANNED_LOADS: tuple[int, ...] = (
    inspect.signature(policy_context).parameters["concurrencies"].default
)


def crossover_at_prior(ctx: PolicyContext) -> float:
    """The crossover Auto starts from: at the draft's prior accept length."""
    return ctx.crossover(ctx.prior_accept)


def no_crossover_reason(ctx: PolicyContext, spec: SpecServerSpec) -> str | None:
    """Why there is no finite crossover at the prior accept length; None when there is one."""
    cross = crossover_at_prior(ctx)
    if math.isfinite(cross) and cross > 0:
        return None
    if ctx == NEUTRAL_CONTEXT:
        return "the launch cannot be planned with speculation, so Auto has no load to switch at"
    if cross == 0:
        return (
            f"speculation loses even at one request at the accept length {ctx.prior_accept:g}"
            f" (it pays from {ctx.break_even_accept:g}); Auto switches it off for acceptance,"
            " not load"
        )
    top = max(PLANNED_LOADS)
    cap = spec.engine.max_running_requests
    if cap is not None and cap < top:
        return (
            f"spec.engine.maxRunningRequests {cap} caps both engines: above {cap} requests queue"
            " in either mode, and speculation still pays at that batch"
        )
    return f"speculation pays at every load planned (up to {top} concurrent requests)"


def floor_and_typical(ctx: PolicyContext, spec: SpecServerSpec) -> tuple[float, float]:
    """(the accept-length floor Auto switches off below, the draft's typical accept length)."""
    return accept_floor(spec.auto_speculation or AutoSpeculation(), ctx), ctx.prior_accept
