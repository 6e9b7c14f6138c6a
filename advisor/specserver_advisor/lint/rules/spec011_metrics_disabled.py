"""SPEC011 metrics-disabled.

What it does:
    Flags a speculative server launched without ``--enable-metrics`` (not a process that
    serves no SGLang HTTP API: an LWS worker, a Dynamo worker).
Why it matters:
    Without ``/metrics`` the accept length, TTFT and queue are invisible: nobody (and no
    operator) can tell whether speculation pays.
Example (fails):
    sglang serve Qwen/Qwen3-8B --speculative-algorithm EAGLE3 ...
Use instead:
    ... --enable-metrics
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from specserver_advisor.lint.model import Context, Diagnostic, Launch
from specserver_advisor.lint.rules._base import diag, speculative

CODE = "SPEC011"
NAME = "metrics-disabled"
SEVERITY = "warning"
SUMMARY = "Speculation without --enable-metrics: acceptance is invisible."
FIX = "Add --enable-metrics."
APPLIES_TO = ("server",)


def check(launch: Launch, ctx: Context) -> Iterable[Diagnostic]:
    if not speculative(launch) or launch.parsed.values.get("enable_metrics"):
        return []
    if not launch.serves_http:  # no SGLang HTTP server here: its /metrics is not served
        return []
    return [
        diag(
            sys.modules[__name__],
            launch,
            launch.position_of("speculative_algorithm"),
            "speculative server without --enable-metrics",
        )
    ]
