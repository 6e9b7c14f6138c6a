"""SPEC005 partial-spec-shape.

What it does:
    Flags ``--speculative-eagle-topk`` or ``--speculative-num-draft-tokens`` given without
    ``--speculative-num-steps`` for the EAGLE family, and ``--speculative-num-steps`` given
    without ``--speculative-eagle-topk``.
Why it matters:
    SGLang then auto-chooses the shape and asserts the other two are unset: startup fails with
    an AssertionError. With steps but no topk, SGLang 0.5.23 compares the unset topk with 1
    and start-up fails with ``TypeError: '>' not supported between 'NoneType' and 'int'``.
Example (fails):
    --speculative-algorithm EAGLE3 --speculative-eagle-topk 4
    (or --speculative-num-steps 3 alone)
Use instead:
    --speculative-num-steps 5 --speculative-eagle-topk 4 --speculative-num-draft-tokens 8
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from specserver_advisor.lint.model import Context, Diagnostic, Launch
from specserver_advisor.lint.rules._base import diag, is_set, resolution, speculative
from specserver_advisor.sglang.speculative_tables import NONE_TOPK_CRASH

CODE = "SPEC005"
NAME = "partial-spec-shape"
SEVERITY = "error"
SUMMARY = "A partial EAGLE shape (topk/draft tokens without num-steps, or steps without topk)."
FIX = "Set --speculative-num-steps together with topk and draft tokens, or none of them."
APPLIES_TO = ("server", "specserver")


def check(launch: Launch, ctx: Context) -> Iterable[Diagnostic]:
    if not speculative(launch):
        return []
    if is_set(launch, "speculative_num_steps"):
        return _steps_without_topk(launch)
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


def _steps_without_topk(launch: Launch) -> list[Diagnostic]:
    """Steps given, topk not: SGLang's resolution raises the TypeError the resolver records."""
    if is_set(launch, "speculative_eagle_topk"):
        return []
    if not any(e.message == NONE_TOPK_CRASH for e in resolution(launch).errors):
        return []
    return [
        diag(
            sys.modules[__name__],
            launch,
            launch.position_of("speculative_num_steps"),
            "--speculative-num-steps without --speculative-eagle-topk: SGLang 0.5.23 compares "
            f"the unset topk with 1 and start-up fails (TypeError: {NONE_TOPK_CRASH})",
        )
    ]
