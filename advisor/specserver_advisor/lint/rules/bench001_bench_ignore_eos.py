"""BENCH001 bench-ignore-eos.

What it does:
    Flags ``sglang.bench_serving`` / ``sglang.benchmark.serving`` without
    ``--disable-ignore-eos`` when the lint run also found a speculative server.
Why it matters:
    By default the client sends ``ignore_eos``: every answer runs to the maximum length, a
    regime where drafts keep matching far longer than in real answers, which overstates the gain.
Example (fails):
    python -m sglang.bench_serving --backend sglang --dataset-name sharegpt
Use instead:
    ... --disable-ignore-eos
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from specserver_advisor.lint.model import Context, Diagnostic, Launch
from specserver_advisor.lint.rules._base import diag

CODE = "BENCH001"
NAME = "bench-ignore-eos"
SEVERITY = "warning"
SUMMARY = "Benchmarking a speculative server without --disable-ignore-eos."
FIX = "Add --disable-ignore-eos so answers have their real lengths."
APPLIES_TO = ("bench",)


def check(launch: Launch, ctx: Context) -> Iterable[Diagnostic]:
    if "disable_ignore_eos" in launch.parsed.values or not ctx.speculative_servers():
        return []
    return [
        diag(
            sys.modules[__name__],
            launch,
            launch.start,
            "the benchmark sends ignore_eos: answers run to max length",
        )
    ]
