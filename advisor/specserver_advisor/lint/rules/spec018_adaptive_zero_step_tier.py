"""SPEC018 adaptive-zero-step-tier.

What it does:
    Flags ``--speculative-adaptive`` (EAGLE/EAGLE3, topk 1, as SGLang runs it) with a
    ``--max-running-requests`` that lets the running batch reach SGLang 0.5.23's zero-step tier:
    its default tiers run only 0 draft steps from a batch of 64 (61 and up once padded to the
    CUDA graph of 64), and may run 0 from 8 and 32.
Why it matters:
    There, SGLang switches speculation off inside the engine while the draft stays loaded (its
    weights and KV are not given back): the engine reports accept length ~1.0 and
    sglang:spec_num_steps 0, and a controller outside (specserver's Auto, an autoscaler, a
    dashboard) reads a speculating engine that is not speculating. Under SGLang's silent
    48 cap the tier was unreachable; an explicit cap above it makes it reachable.
Example (fails):
    --speculative-algorithm EAGLE3 --speculative-adaptive --max-running-requests 96
Use instead:
    Keep the cap below the zero-step tier where speculation should always run, or (a SpecServer
    in mode Auto) let the operator unload the draft at that load: it reads the steps gauge,
    sets the EngineZeroSteps condition and does not score those readings as speculation.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from specserver_advisor.lint.model import Context, Diagnostic, Launch
from specserver_advisor.lint.rules._base import diag, memory_plan, resolution, speculative, values
from specserver_advisor.sglang import adaptivetiers

CODE = "SPEC018"
NAME = "adaptive-zero-step-tier"
SEVERITY = "warning"
SUMMARY = "--speculative-adaptive with a cap that reaches SGLang's zero-step tier."
FIX = (
    "Cap --max-running-requests below the zero-step tier, or let Auto unload the draft there "
    "(it does not score zero-step readings)."
)
APPLIES_TO = ("server", "specserver")


def check(launch: Launch, ctx: Context) -> Iterable[Diagnostic]:
    if not speculative(launch) or not values(launch).get("speculative_adaptive"):
        return []
    if not resolution(launch).get("speculative_adaptive"):
        return []  # SGLang turns it off for this launch (warns and runs fixed steps)
    cap = values(launch).get("max_running_requests")
    if not isinstance(cap, int) or isinstance(cap, bool) or cap < 1:
        return []
    plan = memory_plan(launch)
    graph = plan.scenario.cuda_graph_max_bs if plan is not None else cap
    if adaptivetiers.always_zero_batch(cap, graph) is None:
        return []
    message = adaptivetiers.overlap_message(cap, graph)
    if message is None:
        return []
    return [
        diag(sys.modules[__name__], launch, launch.position_of("speculative_adaptive"), message)
    ]
