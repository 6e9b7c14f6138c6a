"""BENCH004 bench-lifetime-accept-length.

What it does:
    Flags a benchmark of a speculative server without ``--flush-cache``.
Why it matters:
    The "Accept length" bench_serving prints is the server's lifetime average from
    ``/server_info``; without a flush it mixes every earlier run into this one.
Example (fails):
    python -m sglang.bench_serving --backend sglang --dataset-name sharegpt
Use instead:
    ... --flush-cache
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from specserver_advisor.lint.model import Context, Diagnostic, Launch
from specserver_advisor.lint.rules._base import diag

CODE = "BENCH004"
NAME = "bench-lifetime-accept-length"
SEVERITY = "info"
SUMMARY = "Accept length read without --flush-cache is the server's lifetime average."
FIX = "Add --flush-cache so the reported accept length is this run's."
APPLIES_TO = ("bench",)


def check(launch: Launch, ctx: Context) -> Iterable[Diagnostic]:
    if "flush_cache" in launch.parsed.values or not ctx.speculative_servers():
        return []
    return [
        diag(
            sys.modules[__name__],
            launch,
            launch.start,
            "without --flush-cache the printed accept length is a lifetime average",
        )
    ]
