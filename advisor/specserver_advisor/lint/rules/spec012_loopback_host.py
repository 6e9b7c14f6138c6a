"""SPEC012 loopback-host.

What it does:
    Flags an SGLang server in a container (Kubernetes, docker-compose, ``docker run/exec``)
    without ``--host 0.0.0.0``; not a process that serves no API (an LWS or Dynamo worker: its
    health-only server on a loopback host is MN006's, when it is probed).
Why it matters:
    SGLang binds 127.0.0.1 by default: probes, Services and Prometheus cannot reach it.
Example (fails):
    args: [--model-path, Qwen/Qwen3-8B, --port, "30000"]
Use instead:
    args: [--model-path, Qwen/Qwen3-8B, --host, 0.0.0.0, --port, "30000"]
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from specserver_advisor.lint.model import Context, Diagnostic, Launch
from specserver_advisor.lint.rules._base import diag

CODE = "SPEC012"
NAME = "loopback-host"
SEVERITY = "error"
SUMMARY = "A container launch without --host 0.0.0.0: SGLang binds 127.0.0.1."
FIX = "Add --host 0.0.0.0 to container launches."
APPLIES_TO = ("server",)


def check(launch: Launch, ctx: Context) -> Iterable[Diagnostic]:
    host = launch.parsed.values.get("host")
    if not launch.serves_http:  # an LWS or Dynamo worker: no API traffic reaches it
        return []
    if not launch.in_container or host in ("0.0.0.0", "::", "[::]"):
        return []
    if "host" in launch.unresolved_fields:
        return []
    where = launch.position_of("host") if host else launch.start
    return [
        diag(
            sys.modules[__name__],
            launch,
            where,
            f"the server binds {host or '127.0.0.1 (default)'}: unreachable from outside "
            "the container",
        )
    ]
