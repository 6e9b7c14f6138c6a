"""SPEC017 topk-without-draft-tokens.

What it does:
    Flags an EAGLE-family launch whose resolved ``--speculative-num-draft-tokens`` stays unset:
    ``--speculative-eagle-topk`` above 1 with ``--speculative-num-steps`` and no draft-token
    count (SGLang fills it in only for topk 1 and for the shape it chooses itself).
Why it matters:
    SGLang 0.5.23's tokenizer manager computes the tokens reserved per request as
    ``max(topk * steps, num_draft_tokens)`` (``compute_num_reserved_tokens``); with the count
    unset that is ``max(int, None)``, which raises TypeError: the server does not start.
Example (fails):
    --speculative-algorithm EAGLE3 --speculative-num-steps 5 --speculative-eagle-topk 4
Use instead:
    --speculative-num-steps 5 --speculative-eagle-topk 4 --speculative-num-draft-tokens 8
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from specserver_advisor.lint.model import Context, Diagnostic, Launch
from specserver_advisor.lint.rules._base import diag, resolution, speculative

CODE = "SPEC017"
NAME = "topk-without-draft-tokens"
SEVERITY = "error"
SUMMARY = "topk > 1 without num-draft-tokens: SGLang's reserved-token arithmetic raises TypeError."
FIX = "Set --speculative-num-draft-tokens with topk > 1 (e.g. steps 5, topk 4, draft tokens 8)."
APPLIES_TO = ("server", "specserver")


def check(launch: Launch, ctx: Context) -> Iterable[Diagnostic]:
    if not speculative(launch):
        return []
    res = resolution(launch)
    if not res.reserved_tokens_error:
        return []
    topk, steps = res.get("speculative_eagle_topk"), res.get("speculative_num_steps")
    field = next(
        (
            f
            for f in ("speculative_eagle_topk", "speculative_num_steps", "speculative_algorithm")
            if f in launch.parsed.values
        ),
        "speculative_algorithm",
    )
    return [
        diag(
            sys.modules[__name__],
            launch,
            launch.position_of(field),
            f"--speculative-eagle-topk {topk} with --speculative-num-steps {steps} and no "
            "--speculative-num-draft-tokens: SGLang leaves the draft-token count unset and "
            f"its reserved tokens per request, max({topk} * {steps}, None), raise TypeError "
            "at startup",
        )
    ]
