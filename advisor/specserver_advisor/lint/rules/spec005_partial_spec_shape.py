"""SPEC005 partial-spec-shape.

What it does:
    Flags ``--speculative-eagle-topk`` or ``--speculative-num-draft-tokens`` given without
    ``--speculative-num-steps`` for the EAGLE family.
Why it matters:
    SGLang then auto-chooses the shape and asserts the other two are unset: startup fails with
    an AssertionError.
Example (fails):
    --speculative-algorithm EAGLE3 --speculative-eagle-topk 4
Use instead:
    --speculative-num-steps 5 --speculative-eagle-topk 4 --speculative-num-draft-tokens 8
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from specserver_advisor.lint.model import Context, Diagnostic, Launch
from specserver_advisor.lint.rules._base import diag, is_set, resolution, speculative

CODE = "SPEC005"
NAME = "partial-spec-shape"
SEVERITY = "error"
SUMMARY = "topk or draft tokens set without num-steps: SGLang's startup assertion fails."
FIX = "Set --speculative-num-steps together with topk and draft tokens, or none of them."
APPLIES_TO = ("server", "specserver")


def check(launch: Launch, ctx: Context) -> Iterable[Diagnostic]:
    if not speculative(launch) or is_set(launch, "speculative_num_steps"):
        return []
    errors = [e for e in resolution(launch).errors if e.exception == "AssertionError"]
    if not errors:
        return []
    field = next(
        f
        for f in ("speculative_eagle_topk", "speculative_num_draft_tokens")
        if f in launch.parsed.values
    )
    return [
        diag(
            sys.modules[__name__],
            launch,
            launch.position_of(field),
            "topk/draft tokens without --speculative-num-steps: SGLang asserts at startup",
        )
    ]
