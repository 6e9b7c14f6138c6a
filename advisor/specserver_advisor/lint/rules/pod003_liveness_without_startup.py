"""POD003 liveness-without-startup.

What it does:
    Flags a container with a ``livenessProbe`` and no ``startupProbe`` whose liveness probe
    gives up (``initialDelaySeconds`` + ``periodSeconds`` x ``failureThreshold``) in less than
    10 minutes.
Why it matters:
    Loading weights, capturing CUDA graphs and (for speculation) loading the draft takes
    minutes; the kubelet kills the container while the model loads and the pod never becomes
    ready.
Example (fails):
    livenessProbe: {httpGet: {path: /health, port: 30000}, periodSeconds: 10}
Use instead:
    startupProbe: {httpGet: {path: /health, port: 30000}, periodSeconds: 10, failureThreshold: 180}
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from specserver_advisor.lint.model import Context, Diagnostic, Launch
from specserver_advisor.lint.podspec import container_position
from specserver_advisor.lint.podspec import server_workload as workload_of
from specserver_advisor.lint.rules._base import diag

CODE = "POD003"
NAME = "liveness-without-startup"
SEVERITY = "warning"
SUMMARY = "A liveness probe without a startup probe kills the pod while the model loads."
FIX = "Add a startupProbe with failureThreshold x periodSeconds of 10 minutes or more."
APPLIES_TO = ("server",)
LOAD_BUDGET_S = 600


def _seconds(probe: dict[str, object], key: str, default: int) -> int:
    try:
        return int(str(probe.get(key, default)))
    except ValueError:
        return default


def check(launch: Launch, ctx: Context) -> Iterable[Diagnostic]:
    w = workload_of(launch)
    if w is None or w.kind == "compose" or not isinstance(w.container, dict):
        return []
    probe = w.container.get("livenessProbe")
    if not isinstance(probe, dict) or "startupProbe" in w.container:
        return []
    budget = _seconds(probe, "initialDelaySeconds", 0) + _seconds(
        probe, "periodSeconds", 10
    ) * _seconds(probe, "failureThreshold", 3)
    if budget >= LOAD_BUDGET_S:
        return []
    return [
        diag(
            sys.modules[__name__],
            launch,
            container_position(launch, "livenessProbe"),
            f"the liveness probe restarts the container after {budget} s and there is no "
            "startupProbe: loading the model takes longer",
        )
    ]
