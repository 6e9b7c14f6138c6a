"""MN006 worker-probe-on-http-port.

What it does:
    In a LeaderWorkerSet of more than one pod: flags a readiness, liveness or startup probe
    of a worker template (or of a lone ``workerTemplate``, which LWS runs on the workers
    too) that is an ``httpGet``, or a ``tcpSocket`` on the HTTP server's port (the leader's
    ``--port``, SGLang's default 30000, or a port named ``http``).
Why it matters:
    SGLang serves HTTP only on node rank 0: on a worker nothing listens there. A readiness
    probe never passes, so the group is never Ready; a liveness or startup probe fails, the
    kubelet restarts the worker, and with ``RecreateGroupOnPodRestart`` the whole group.
Example (fails):
    workerTemplate: ... readinessProbe: {httpGet: {path: /health, port: 30000}}
Use instead:
    probe the leader only (leaderTemplate); no HTTP probe on the workers
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

from specserver_advisor.lint.lwsgroup import http_ports
from specserver_advisor.lint.model import Context, Diagnostic, Launch
from specserver_advisor.lint.podspec import container_position
from specserver_advisor.lint.rules._base import diag

CODE = "MN006"
NAME = "worker-probe-on-http-port"
SEVERITY = "error"
SUMMARY = "A LeaderWorkerSet worker probed on HTTP: it never passes, the group never runs."
FIX = "Probe the leader only; give the workers no HTTP or HTTP-port probe."
APPLIES_TO = ("server",)
PROBES = ("readinessProbe", "livenessProbe", "startupProbe")
EFFECT = {
    "readinessProbe": "never passes: the group never becomes Ready",
    "livenessProbe": "fails: the kubelet restarts the worker (and the group with it)",
    "startupProbe": "fails: the kubelet restarts the worker (and the group with it)",
}


def _on_http(probe: dict[Any, Any], served: set[int]) -> str | None:
    """What the probe checks when it is on the HTTP server (else None)."""
    get = probe.get("httpGet")
    if isinstance(get, dict):
        return f"httpGet {get.get('path', '/')} on port {get.get('port', '?')}"
    tcp = probe.get("tcpSocket")
    port = tcp.get("port") if isinstance(tcp, dict) else None
    if port in served or port == "http":
        return f"tcpSocket on port {port}"
    return None


def check(launch: Launch, ctx: Context) -> Iterable[Diagnostic]:
    group = launch.group
    w = launch.workload
    if group is None or group.role == "leader" or (group.size or 0) < 2 or w is None:
        return []
    if not isinstance(w.container, dict):
        return []
    served = http_ports(launch, ctx)
    out = []
    for key in PROBES:
        probe = w.container.get(key)
        what = _on_http(probe, served) if isinstance(probe, dict) else None
        if what is None:
            continue
        out.append(
            diag(
                sys.modules[__name__],
                launch,
                container_position(launch, key),
                f"the {group.role} template's {key} ({what}) runs on the workers, which "
                f"serve no HTTP: it {EFFECT[key]}",
            )
        )
    return out
