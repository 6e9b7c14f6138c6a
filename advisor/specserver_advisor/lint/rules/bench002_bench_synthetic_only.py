"""BENCH002 bench-synthetic-only.

What it does:
    Flags benchmarks that use only ``random`` or ``random-ids`` datasets.
Why it matters:
    Synthetic prompts overstated speculative throughput by 23% on average (SPEED-Bench) and
    random token ids leave MoE experts idle: the gain measured is not the gain served.
Example (fails):
    --dataset-name random-ids
Use instead:
    --dataset-name sharegpt (or your own traffic with --dataset-name custom).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from specserver_advisor.lint.model import Context, Diagnostic, Launch
from specserver_advisor.lint.rules._base import diag

CODE = "BENCH002"
NAME = "bench-synthetic-only"
SEVERITY = "warning"
SUMMARY = "Only random/random-ids datasets: synthetic prompts overstate the gain."
FIX = "Benchmark on real prompts (sharegpt, custom, speed-bench) as well."
APPLIES_TO = ("bench",)


def check(launch: Launch, ctx: Context) -> Iterable[Diagnostic]:
    dataset = launch.parsed.values.get("dataset_name", "sharegpt")
    if dataset not in ("random", "random-ids"):
        return []
    return [
        diag(
            sys.modules[__name__],
            launch,
            launch.position_of("dataset_name"),
            f"--dataset-name {dataset} is synthetic",
        )
    ]
