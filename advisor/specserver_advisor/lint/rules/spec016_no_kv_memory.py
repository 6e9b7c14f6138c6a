"""SPEC016 no-kv-memory.

What it does:
    With the model configs and the GPU type known (a SpecServer's ``resources.gpuType`` or
    ``lint --gpu``), sizes SGLang's memory the way 0.5.23 does: the mem-fraction-static
    heuristic, target and draft weights, then the KV pool.
Why it matters:
    When the weights leave no room, SGLang raises "Loaded weights leave no GPU memory for the KV
    cache" at startup. The heuristic reserves about 6.9 GB on a 24 GB card, so an 8B BF16 target
    with an EAGLE-3 draft does not start on an L4 unless --mem-fraction-static is raised.
    A SpecServer without ``engine.memFractionStatic`` is checked with the fraction the operator
    computes and renders for it, so lint and the operator's ConfigValid agree.
Example (fails):
    Qwen3-8B + EAGLE-3 on an L4 without --mem-fraction-static.
Use instead:
    --mem-fraction-static 0.85 (specserver-advisor plan prints the smallest value that works).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from specserver_advisor.lint.model import Context, Diagnostic, Launch
from specserver_advisor.lint.rules._base import diag, memory_plan, no_kv_message, values

CODE = "SPEC016"
NAME = "no-kv-memory"
SEVERITY = "error"
SUMMARY = "Weights leave no GPU memory for the KV cache: SGLang refuses to start."
FIX = "Raise --mem-fraction-static (or use a larger GPU, FP8 weights, or tensor parallelism)."
APPLIES_TO = ("server", "specserver")


def check(launch: Launch, ctx: Context) -> Iterable[Diagnostic]:
    plan = memory_plan(launch)
    if plan is None or not plan.mem.error:
        return []
    where = "mem_fraction_static" if "mem_fraction_static" in values(launch) else "model_path"
    return [
        diag(
            sys.modules[__name__],
            launch,
            launch.position_of(where),
            no_kv_message(launch) or f"on {plan.scenario.gpu.name}: {plan.mem.error}",
        )
    ]
