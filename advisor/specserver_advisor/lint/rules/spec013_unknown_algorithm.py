"""SPEC013 unknown-algorithm.

What it does:
    Flags a ``--speculative-algorithm`` SGLang 0.5.23 does not know.
Why it matters:
    SGLang raises ``ValueError: Unknown speculative algorithm name`` at startup.
Example (fails):
    --speculative-algorithm MEDUSA
Use instead:
    One of EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM, DFLASH, DSPARK, UNO.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from specserver_advisor.lint.model import Context, Diagnostic, Launch
from specserver_advisor.lint.rules._base import diag, resolution, speculative

CODE = "SPEC013"
NAME = "unknown-algorithm"
SEVERITY = "error"
SUMMARY = "An algorithm name SGLang 0.5.23 rejects."
FIX = "Use EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM, DFLASH, DSPARK or UNO."
APPLIES_TO = ("server", "specserver")


def check(launch: Launch, ctx: Context) -> Iterable[Diagnostic]:
    if not speculative(launch) or "speculative_algorithm" in launch.unresolved_fields:
        return []
    return [
        diag(sys.modules[__name__], launch, launch.position_of("speculative_algorithm"), e.message)
        for e in resolution(launch).errors
        if e.message.startswith("Unknown speculative algorithm")
    ]
