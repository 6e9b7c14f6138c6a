"""POD001 tp-exceeds-gpu-limit.

What it does:
    Compares the GPUs the launch uses per pod (``--tp-size`` x ``--pp-size``, x ``--dp-size``
    without DP attention, / ``--nnodes``) with the container's GPU limit (``nvidia.com/gpu``
    and the like; compose ``deploy.resources.reservations.devices`` or ``gpus``).
Why it matters:
    SGLang starts one worker per GPU it is told to use; with fewer GPUs visible the workers
    fail at CUDA device setup after the image pull and scheduling, and the pod crash-loops.
Example (fails):
    --tp-size 4 with resources.limits nvidia.com/gpu: 2
Use instead:
    nvidia.com/gpu: 4 (or --tp-size 2)
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from specserver_advisor.lint.model import Context, Diagnostic, Launch
from specserver_advisor.lint.podspec import container_position, gpu_limit, gpus_needed
from specserver_advisor.lint.podspec import server_workload as workload_of
from specserver_advisor.lint.rules._base import diag

CODE = "POD001"
NAME = "tp-exceeds-gpu-limit"
SEVERITY = "error"
SUMMARY = "The launch uses more GPUs per pod than the container's GPU limit gives it."
FIX = "Raise the GPU limit to tp x pp (x dp) per node, or lower --tp-size."
APPLIES_TO = ("server",)


def check(launch: Launch, ctx: Context) -> Iterable[Diagnostic]:
    w = workload_of(launch)
    if w is None:
        return []
    limit = gpu_limit(w)
    needed = gpus_needed(launch)
    if limit is None or limit < 0 or needed is None or needed <= limit:
        return []
    pos = launch.position_of("tp_size") if launch.parsed.is_set("tp_size") else None
    return [
        diag(
            sys.modules[__name__],
            launch,
            pos or container_position(launch, "resources"),
            f"the launch uses {needed} GPUs per pod but the container is given {limit}",
        )
    ]
