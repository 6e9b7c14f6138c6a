"""SPEC009 cap-exceeds-kv-pool.

What it does:
    With the model configs and the GPU type known (a SpecServer's ``resources.gpuType`` or
    ``lint --gpu``), compares ``--max-running-requests`` with the requests of 512 + 128 tokens
    the KV pool holds: with the draft loaded when speculating, the whole pool otherwise.
Why it matters:
    Above that, the pool and not the cap limits concurrency: requests wait for KV space and
    TTFT pays (the field's L4 run: 8 s TTFT with EAGLE-3 at 32 users vs 3 s without). The
    draft makes it likelier (its weights and KV shrink the pool), but a launch without
    speculation whose cap exceeds its pool queues the same way.
Example (fails):
    Qwen3-8B + EAGLE-3 on an L4 with --max-running-requests 48 (about 13 fit).
Use instead:
    --max-running-requests 13 (specserver-advisor plan computes it).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from specserver_advisor.lint.model import Context, Diagnostic, Launch
from specserver_advisor.lint.rules._base import diag, memory_plan, speculative, values

CODE = "SPEC009"
NAME = "cap-exceeds-kv-pool"
SEVERITY = "warning"
SUMMARY = "The cap exceeds what the KV pool holds (with the draft when speculating): TTFT pays."
FIX = "Lower --max-running-requests to what the pool holds (see specserver-advisor plan)."
APPLIES_TO = ("server", "specserver")


def check(launch: Launch, ctx: Context) -> Iterable[Diagnostic]:
    cap = values(launch).get("max_running_requests")
    if not isinstance(cap, int) or cap < 1:
        return []
    plan = memory_plan(launch)
    if plan is None or plan.mem.error:
        return []
    with_draft = speculative(launch)
    fits = plan.fits_on if with_draft else plan.fits_off
    pool = "with the draft" if with_draft else "without speculation"
    if fits >= cap:
        return []
    return [
        diag(
            sys.modules[__name__],
            launch,
            launch.position_of("max_running_requests"),
            f"--max-running-requests {cap} but the KV pool {pool} holds {fits} requests of "
            f"{plan.scenario.input_len}+{plan.scenario.output_len} tokens on "
            f"{plan.scenario.gpu.name}",
        )
    ]
