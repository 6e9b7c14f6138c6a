"""SPEC004 draft-tokens-rewritten.

What it does:
    Flags ``--speculative-eagle-topk 1`` with ``--speculative-num-draft-tokens`` other than
    ``--speculative-num-steps + 1``.
Why it matters:
    SGLang silently rewrites the draft tokens to steps + 1, so the configured value (and any
    benchmark that sweeps it) means nothing.
Example (fails):
    --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 8
Use instead:
    --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from specserver_advisor.lint.model import Context, Diagnostic, Launch
from specserver_advisor.lint.rules._base import diag, speculative, values

CODE = "SPEC004"
NAME = "draft-tokens-rewritten"
SEVERITY = "warning"
SUMMARY = "topk 1 and num-draft-tokens != num-steps + 1: SGLang silently rewrites it."
FIX = "Set --speculative-num-draft-tokens to --speculative-num-steps + 1 when topk is 1."
APPLIES_TO = ("server", "specserver")


def check(launch: Launch, ctx: Context) -> Iterable[Diagnostic]:
    v = values(launch)
    steps, topk, ndt = (
        v.get("speculative_num_steps"),
        v.get("speculative_eagle_topk"),
        v.get("speculative_num_draft_tokens"),
    )
    if not speculative(launch) or topk != 1 or steps is None or ndt is None or ndt == steps + 1:
        return []
    return [
        diag(
            sys.modules[__name__],
            launch,
            launch.position_of("speculative_num_draft_tokens"),
            f"--speculative-num-draft-tokens {ndt} with topk 1 is rewritten to "
            f"num_steps + 1 = {steps + 1}",
        )
    ]
