"""SPEC006 lossy-accept-threshold.

What it does:
    Flags ``--speculative-accept-threshold-single`` or ``-acc`` below 1.0.
Why it matters:
    Below 1.0 SGLang accepts draft tokens the target would not have chosen: greedy output no
    longer matches the target model, so quality silently changes with load and drafts.
Example (fails):
    --speculative-accept-threshold-single 0.7
Use instead:
    Leave both thresholds at 1.0 (the default).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from specserver_advisor.lint.model import Context, Diagnostic, Launch
from specserver_advisor.lint.rules._base import diag, speculative, values

CODE = "SPEC006"
NAME = "lossy-accept-threshold"
SEVERITY = "warning"
SUMMARY = "An accept threshold below 1.0: greedy output no longer matches the target."
FIX = "Keep --speculative-accept-threshold-single and -acc at 1.0."
APPLIES_TO = ("server", "specserver")


def check(launch: Launch, ctx: Context) -> Iterable[Diagnostic]:
    if not speculative(launch):
        return []
    out = []
    for field in ("speculative_accept_threshold_single", "speculative_accept_threshold_acc"):
        value = values(launch).get(field)
        if value is not None and float(value) < 1.0:
            out.append(
                diag(
                    sys.modules[__name__],
                    launch,
                    launch.position_of(field),
                    f"--{field.replace('_', '-')} {value} < 1.0 is lossy",
                )
            )
    return out
