"""POD008 gpu-count-from-default.

What it does:
    Reports a container GPU count decided by the default of a ``${VAR:-default}`` reference
    (compose ``device_ids``/``count``/``gpus``, a Kubernetes ``nvidia.com/gpu`` written for
    envsubst): the count the other pod rules judged is the default's (``${GPUS:-0,1}`` is two
    devices), and setting VAR changes it.
Why it matters:
    The launch's ``--tp-size`` must match the GPUs the container gets; with the count in a
    variable, the file alone does not decide it: a deploy that sets the variable to fewer
    devices crash-loops at CUDA device setup.
Example (fails):
    device_ids: ["${GPU_IDS:-0,1}"] with --tp-size 2
Use instead:
    device_ids: ["0", "1"] (or keep the variable and set it where the deploy is defined)
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from specserver_advisor.lint.model import Context, Diagnostic, Launch
from specserver_advisor.lint.podspec import container_position, gpu_count, gpus_needed
from specserver_advisor.lint.podspec import server_workload as workload_of
from specserver_advisor.lint.rules._base import diag

CODE = "POD008"
NAME = "gpu-count-from-default"
SEVERITY = "info"
SUMMARY = "The container's GPU count is the default of a ${VAR:-default} reference."
FIX = "Write the GPU count literally, or set the variable where the deployment is defined."
APPLIES_TO = ("server",)


def check(launch: Launch, ctx: Context) -> Iterable[Diagnostic]:
    w = workload_of(launch)
    if w is None:
        return []
    count, names = gpu_count(w)
    if not names or count is None or count < 0:
        return []
    needed = gpus_needed(launch)
    uses = f"; the launch uses {needed}" if needed is not None else ""
    variables = ", ".join(f"${{{n}}}" for n in dict.fromkeys(names))
    return [
        diag(
            sys.modules[__name__],
            launch,
            container_position(launch, _key(w.container) if w.kind == "compose" else "resources"),
            f"the container's GPU count ({count}) is the default of {variables}{uses}: "
            "a deploy that sets it gives another count",
        )
    ]


def _key(service: object) -> str:
    return "deploy" if isinstance(service, dict) and "deploy" in service else "gpus"
