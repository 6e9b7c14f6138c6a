"""POD007 no-gpu-resource.

What it does:
    Flags a server container with no GPU resource at all (no ``nvidia.com/gpu`` or other
    ``*/gpu`` limit; in compose no GPU device reservation, ``gpus`` or ``runtime: nvidia``),
    unless the launch runs on ``--device cpu``.
Why it matters:
    Without a GPU resource the scheduler may place the pod on any node, and the container sees
    no GPU: SGLang fails at startup (or, on a GPU node, shares a GPU it does not own).
Example (fails):
    a Deployment running sglang.launch_server with resources: {limits: {memory: 64Gi}}
Use instead:
    resources: {limits: {nvidia.com/gpu: 1}}
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from specserver_advisor.lint.model import Context, Diagnostic, Launch
from specserver_advisor.lint.podspec import container_position, gpu_limit
from specserver_advisor.lint.podspec import server_workload as workload_of
from specserver_advisor.lint.rules._base import diag

CODE = "POD007"
NAME = "no-gpu-resource"
SEVERITY = "error"
SUMMARY = "A server container without any GPU resource: no GPU is scheduled or visible."
FIX = "Request GPUs: resources.limits nvidia.com/gpu (compose: deploy.resources devices)."
APPLIES_TO = ("server",)


def check(launch: Launch, ctx: Context) -> Iterable[Diagnostic]:
    w = workload_of(launch)
    if w is None or gpu_limit(w) is not None:
        return []
    key = "deploy" if w.kind == "compose" else "resources"
    return [
        diag(
            sys.modules[__name__],
            launch,
            container_position(launch, key),
            "the container requests no GPU",
        )
    ]
