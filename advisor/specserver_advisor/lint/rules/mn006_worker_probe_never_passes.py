"""MN006 worker-probe-never-passes.

What it does:
    In a LeaderWorkerSet of more than one pod: flags a readiness, liveness or startup probe
    of a worker template (or of a lone ``workerTemplate``, which LWS runs on the workers
    too) that a worker can never pass: an ``httpGet`` on a path the worker does not answer,
    with ``scheme: HTTPS``, or an ``httpGet``/``tcpSocket`` on a port where the worker does
    not listen (not its own ``--port``, SGLang's default 30000; a named port is resolved
    through the container's ``ports``), or any such probe on a worker whose ``--host`` is
    loopback (SGLang's default 127.0.0.1; the kubelet probes the pod IP). A probe that sets
    its own ``host``, or whose port or path a variable supplies, is not judged.
Why it matters:
    In SGLang 0.5.23 a node rank >= 1 runs no tokenizer and serves no API: once its
    schedulers are ready (``srt/entrypoints/engine.py``, ``if get_parallel().node_rank >=
    1:``) it starts ``launch_dummy_health_check_server`` (``srt/utils/common.py``) on its own
    ``--host``/``--port``, plain HTTP, answering ``/ping``, ``/health`` and
    ``/health_generate`` (always 200), ``/metrics`` only with ``--enable-metrics``, and
    FastAPI's ``/docs``, ``/redoc``, ``/openapi.json``; every other path (``/v1/*``,
    ``/generate``, ``/get_model_info``, ``/``) is 404. (With ``SGLANG_RUST_SERVER`` on, a Rust
    listener owns those endpoints instead; not modelled.) A readiness probe that cannot pass
    keeps the group from ever becoming Ready; a liveness or startup probe that cannot pass
    makes the kubelet restart the worker, and with ``RecreateGroupOnPodRestart`` the whole
    group. ``httpGet /health`` on the worker's ``--port`` (with ``--host 0.0.0.0``) is the
    right worker probe: it passes once the worker's schedulers are ready.
Example (fails):
    workerTemplate: ... readinessProbe: {httpGet: {path: /v1/models, port: 30000}}
Use instead:
    workerTemplate: ... --host 0.0.0.0 ... readinessProbe: {httpGet: {path: /health, port: 30000}}
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

from specserver_advisor.lint.lwsgroup import DEFAULT_HOST, listen_port
from specserver_advisor.lint.model import Context, Diagnostic, Launch
from specserver_advisor.lint.podspec import container_position
from specserver_advisor.lint.rules._base import diag

CODE = "MN006"
NAME = "worker-probe-never-passes"
SEVERITY = "error"
SUMMARY = "A LeaderWorkerSet worker probe that can never pass: the group never runs."
FIX = (
    "Probe a worker with httpGet /health (or /ping) on its own --port, with --host 0.0.0.0 "
    "on the worker; API paths belong to the leader's probes."
)
APPLIES_TO = ("server",)
PROBES = ("readinessProbe", "livenessProbe", "startupProbe")
EFFECT = {
    "readinessProbe": "the group never becomes Ready",
    "livenessProbe": "the kubelet restarts the worker (and the group with it)",
    "startupProbe": "the kubelet restarts the worker (and the group with it)",
}
#: The routes of SGLang 0.5.23's ``launch_dummy_health_check_server`` (held to its source by
#: ``tests/oracle/test_worker_health_server.py``) ...
HEALTH_PATHS = ("/ping", "/health", "/health_generate")
#: ... the Prometheus mount it adds with ``--enable-metrics`` (any path under it) ...
METRICS_PATH = "/metrics"
#: ... and what every ``FastAPI()`` built without ``docs_url``/``openapi_url`` serves.
FASTAPI_PATHS = ("/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json")
WILDCARD_HOSTS = ("0.0.0.0", "::", "[::]")


def answers(path: str, enable_metrics: bool) -> bool:
    """Whether a worker's health server answers ``path`` with a 2xx/3xx (the kubelet follows
    FastAPI's trailing-slash redirect; the query string does not route)."""
    route = path.split("?", 1)[0]
    route = route.rstrip("/") or "/"
    if enable_metrics and route.startswith(METRICS_PATH):
        return True
    return route in HEALTH_PATHS or route in FASTAPI_PATHS


def probe_port(value: Any, container: dict[Any, Any]) -> int | str | None:
    """The number a probe's ``port`` reaches (a name resolved through the container's
    ``ports``); the name itself when no port has it; None when not judged."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if not isinstance(value, str) or "$" in value:
        return None
    ports = container.get("ports")
    for port in ports if isinstance(ports, list) else []:
        if isinstance(port, dict) and port.get("name") == value:
            number = port.get("containerPort")
            return number if isinstance(number, int) and not isinstance(number, bool) else None
    return value


def why_never(probe: dict[Any, Any], container: dict[Any, Any], launch: Launch) -> str | None:
    """Why ``probe`` can never pass on a worker running ``launch`` (None: it can, or unknown)."""
    get, tcp = probe.get("httpGet"), probe.get("tcpSocket")
    http = isinstance(get, dict)
    action: dict[Any, Any] | None = get if http else tcp if isinstance(tcp, dict) else None
    if action is None or action.get("host"):
        return None
    port = probe_port(action.get("port"), container)
    listens = listen_port(launch)
    what = (
        f"httpGet {action.get('path', '/')} on port {action.get('port')}"
        if http
        else f"tcpSocket on port {action.get('port')}"
    )
    host = launch.parsed.values.get("host", DEFAULT_HOST)
    if "host" not in launch.unresolved_fields and _loopback(host):
        bound = host if launch.parsed.is_set("host") else f"{host} (SGLang's default --host)"
        return f"{what}: the worker binds {bound}, the kubelet probes the pod IP"
    if isinstance(port, str):
        return f"{what}: the container declares no port named {port}"
    if port is None or listens is None:
        return None
    if port != listens:
        return f"{what}: the worker listens on its --port {listens} only"
    if not http:
        return None
    if str(action.get("scheme", "HTTP")).upper() == "HTTPS":
        return f"{what}: the worker's health server speaks plain HTTP"
    path = action.get("path", "/")
    if not isinstance(path, str) or "$" in path:
        return None
    metrics = bool(launch.parsed.values.get("enable_metrics"))
    if "enable_metrics" in launch.unresolved_fields or answers(path, metrics):
        return None
    served = ", ".join(HEALTH_PATHS) + (f", {METRICS_PATH}" if metrics else "")
    return f"{what}: a worker serves no API, only {served} (404 on {path})"


def _loopback(host: Any) -> bool:
    if not isinstance(host, str) or host in WILDCARD_HOSTS:
        return False
    return host == "localhost" or host.startswith("127.") or host in ("::1", "[::1]")


def check(launch: Launch, ctx: Context) -> Iterable[Diagnostic]:
    group = launch.group
    w = launch.workload
    if group is None or group.role == "leader" or (group.size or 0) < 2 or w is None:
        return []
    if not isinstance(w.container, dict):
        return []
    out = []
    for key in PROBES:
        probe = w.container.get(key)
        why = why_never(probe, w.container, launch) if isinstance(probe, dict) else None
        if why is None:
            continue
        out.append(
            diag(
                sys.modules[__name__],
                launch,
                container_position(launch, key),
                f"the {group.role} template's {key} can never pass on the workers ({why}): "
                f"{EFFECT[key]}",
            )
        )
    return out
