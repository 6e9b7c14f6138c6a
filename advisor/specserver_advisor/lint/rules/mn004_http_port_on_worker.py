"""MN004 http-port-on-worker.

What it does:
    In a LeaderWorkerSet: flags a worker template that declares the HTTP server's port as a
    ``containerPort`` (the leader's ``--port``, SGLang's default 30000, or a port named
    ``http``/``metrics``), and a Service or PodMonitor in the same file whose selector picks
    the group's worker pods (from the template's labels and the
    ``leaderworkerset.sigs.k8s.io/*`` labels LWS sets; ``worker-index: "0"`` is the leader).
Why it matters:
    SGLang serves HTTP and ``/metrics`` only on node rank 0, the leader. A Service selecting
    the workers sends requests to pods where nothing listens; a PodMonitor scraping them
    reports the targets down; a declared port invites both.
Example (fails):
    Service selector {leaderworkerset.sigs.k8s.io/name: sglang} (leader and workers)
Use instead:
    selector {leaderworkerset.sigs.k8s.io/name: sglang, role: leader} (a leader-only label)
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

from specserver_advisor.lint.lwsgroup import http_ports, selects_workers
from specserver_advisor.lint.model import Context, Diagnostic, Launch
from specserver_advisor.lint.podspec import container_position
from specserver_advisor.lint.rules._base import diag

CODE = "MN004"
NAME = "http-port-on-worker"
SEVERITY = "warning"
SUMMARY = "A LeaderWorkerSet worker offered as an HTTP or metrics endpoint: it serves none."
FIX = "Expose, select and scrape the leader only (a leader-only label or worker-index: '0')."
APPLIES_TO = ("server",)
NAMES = ("http", "metrics")


def _ports(container: Any) -> list[dict[Any, Any]]:
    ports = container.get("ports") if isinstance(container, dict) else None
    return [p for p in ports if isinstance(p, dict)] if isinstance(ports, list) else []


def check(launch: Launch, ctx: Context) -> Iterable[Diagnostic]:
    group = launch.group
    if group is None or group.role == "leader" or (group.size or 0) < 2:
        return []
    rule = sys.modules[__name__]
    out = []
    if group.role == "worker" and launch.workload is not None:
        served = http_ports(launch, ctx)
        for port in _ports(launch.workload.container):
            if port.get("containerPort") in served or port.get("name") in NAMES:
                out.append(
                    diag(
                        rule,
                        launch,
                        container_position(launch, "ports"),
                        f"the worker template declares containerPort {port.get('containerPort')}"
                        " of the HTTP server, which runs on the leader only",
                    )
                )
                break
    for sel in group.selecting:
        if selects_workers(sel, group):
            what = "sends requests to" if sel.kind == "Service" else "scrapes"
            out.append(
                diag(
                    rule,
                    launch,
                    sel.position,
                    f"{sel.kind} {sel.name} selects the worker pods of LeaderWorkerSet "
                    f"{group.name or '?'} and {what} pods that serve no HTTP",
                )
            )
    return out
