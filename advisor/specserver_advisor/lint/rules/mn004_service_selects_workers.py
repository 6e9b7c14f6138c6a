"""MN004 service-selects-workers.

What it does:
    In a LeaderWorkerSet: flags a Service in the same file whose selector picks the group's
    worker pods (from the template's labels and the ``leaderworkerset.sigs.k8s.io/*`` labels
    LWS sets; ``worker-index: "0"`` is the leader). A worker's ``containerPort`` for its
    ``--port`` and a PodMonitor on the workers are not flagged: a worker listens there.
Why it matters:
    In SGLang 0.5.23 only node rank 0 runs the tokenizer and the API server. A node rank >= 1
    serves, on its own ``--host``/``--port``, only a health server
    (``launch_dummy_health_check_server`` in ``srt/utils/common.py``, started from
    ``srt/entrypoints/engine.py`` under ``if get_parallel().node_rank >= 1:``): ``/ping``,
    ``/health``, ``/health_generate`` (always 200) and ``/metrics`` with ``--enable-metrics``;
    ``/v1/*``, ``/generate``, ``/get_model_info`` answer 404. A Service selecting the workers
    is Ready on them (their health passes) and load-balances API requests onto pods that
    answer 404 to every one of them.
Example (fails):
    Service selector {leaderworkerset.sigs.k8s.io/name: sglang} (leader and workers)
Use instead:
    selector {leaderworkerset.sigs.k8s.io/name: sglang, role: leader} (a leader-only label)
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from specserver_advisor.lint.lwsgroup import selects_workers
from specserver_advisor.lint.model import Context, Diagnostic, Launch
from specserver_advisor.lint.rules._base import diag

CODE = "MN004"
NAME = "service-selects-workers"
SEVERITY = "warning"
SUMMARY = "A Service selects LeaderWorkerSet workers: they answer health checks, not the API."
FIX = "Select the leader only (a leader-only label or worker-index: '0')."
APPLIES_TO = ("server",)


def check(launch: Launch, ctx: Context) -> Iterable[Diagnostic]:
    group = launch.group
    if group is None or group.role == "leader" or (group.size or 0) < 2:
        return []
    return [
        diag(
            sys.modules[__name__],
            launch,
            sel.position,
            f"Service {sel.name} selects the worker pods of LeaderWorkerSet "
            f"{group.name or '?'}: it sends API requests to pods that answer only "
            "/health, /ping and /metrics (404 on /v1/* and /generate)",
        )
        for sel in group.selecting
        if sel.kind == "Service" and selects_workers(sel, group)
    ]
