"""BENCH003 bench-concurrency-over-cap.

What it does:
    Flags a benchmark ``--max-concurrency`` above the max-running-requests of the server the
    lint run found (the explicit value, or 48 for an unset speculative server): servers in the
    same file if there are any, else all, on the benchmark's ``--port``; when several could be
    the one measured, only a concurrency above all their caps is reported.
Why it matters:
    Requests above the cap wait in SGLang's queue: the benchmark measures a queue, and its TTFT
    says nothing about the engine.
Example (fails):
    --max-concurrency 64 against a speculative server without --max-running-requests
Use instead:
    --max-concurrency no higher than the server's cap.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from specserver_advisor.lint.model import Context, Diagnostic, Launch
from specserver_advisor.lint.rules._base import diag, resolution

CODE = "BENCH003"
NAME = "bench-concurrency-over-cap"
SEVERITY = "warning"
SUMMARY = "--max-concurrency above the server's max-running-requests: it measures a queue."
FIX = "Keep --max-concurrency at or below the server's --max-running-requests."
DEFAULT_PORT = 30000
APPLIES_TO = ("bench",)


def check(launch: Launch, ctx: Context) -> Iterable[Diagnostic]:
    try:
        conc = int(launch.parsed.values.get("max_concurrency", 0))
    except (TypeError, ValueError):
        return []
    servers = [s for s in ctx.launches if s.kind == "server"]
    same_file = [s for s in servers if s.path == launch.path]
    port = str(launch.parsed.values.get("port") or DEFAULT_PORT)
    candidates = [
        s
        for s in (same_file or servers)
        if str(s.parsed.values.get("port") or DEFAULT_PORT) == port
    ]
    caps = []
    for server in candidates:
        cap = resolution(server).get("max_running_requests")
        if isinstance(cap, int) and cap > 0:
            caps.append(cap)
    # Several servers could be the one measured: only a concurrency above all of them is sure.
    if not caps or conc <= max(caps):
        return []
    return [
        diag(
            sys.modules[__name__],
            launch,
            launch.position_of("max_concurrency"),
            f"--max-concurrency {conc} exceeds the server's max-running-requests {max(caps)}",
        )
    ]
