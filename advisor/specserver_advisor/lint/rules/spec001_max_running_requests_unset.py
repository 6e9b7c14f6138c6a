"""SPEC001 max-running-requests-unset.

What it does:
    Flags a speculative launch without ``--max-running-requests``.
Why it matters:
    SGLang 0.5.23 silently sets the cap for every speculative algorithm except UNO: the
    speculative handlers reset it to 48, unless a model hook that runs first set its own
    (DeepSeek-V4: 256). The server then neither uses the KV pool it has nor stops at the
    concurrency where speculation still wins.
Example (fails):
    python -m sglang.launch_server --model-path Qwen/Qwen3-8B --speculative-algorithm EAGLE3 ...
Use instead:
    ... --speculative-algorithm EAGLE3 --max-running-requests 16
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from specserver_advisor.lint.model import Context, Diagnostic, Launch
from specserver_advisor.lint.rules._base import diag, is_set, resolution, speculative
from specserver_advisor.sglang.speculative_tables import RESET_MESSAGE

CODE = "SPEC001"
NAME = "max-running-requests-unset"
SEVERITY = "warning"
SUMMARY = (
    "Speculation on and --max-running-requests unset: SGLang silently caps it (48, or the "
    "model hook's value)."
)
FIX = "Set --max-running-requests explicitly (specserver-advisor plan recommends a value)."
APPLIES_TO = ("server",)


def check(launch: Launch, ctx: Context) -> Iterable[Diagnostic]:
    if not speculative(launch) or is_set(launch, "max_running_requests"):
        return []
    r = resolution(launch)
    cap = r.values.get("max_running_requests")
    if cap is None or cap.source != "forced":
        return []
    reset = cap.reason == RESET_MESSAGE  # the speculative handler's, not a model hook's
    return [
        diag(
            sys.modules[__name__],
            launch,
            launch.position_of("speculative_algorithm"),
            f"{r.algorithm} with --max-running-requests unset: SGLang "
            + (f"resets it to {cap.value}" if reset else f"sets it to {cap.value} ({cap.reason})"),
        )
    ]
