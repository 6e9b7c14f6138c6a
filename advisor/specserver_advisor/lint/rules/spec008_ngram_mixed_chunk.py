"""SPEC008 ngram-mixed-chunk.

What it does:
    Flags NGRAM with ``--enable-mixed-chunk``.
Why it matters:
    SGLang turns mixed chunked prefill off for NGRAM, so the flag does nothing; comparing such a
    run with a non-speculative run that keeps mixed chunk compares two different schedulers.
Example (fails):
    --speculative-algorithm NGRAM --enable-mixed-chunk
Use instead:
    Drop --enable-mixed-chunk for NGRAM (and from the baseline it is compared with).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from specserver_advisor.lint.model import Context, Diagnostic, Launch
from specserver_advisor.lint.rules._base import diag, values

CODE = "SPEC008"
NAME = "ngram-mixed-chunk"
SEVERITY = "warning"
SUMMARY = "NGRAM with --enable-mixed-chunk: SGLang turns it off."
FIX = "Remove --enable-mixed-chunk from NGRAM launches and from their baselines."
APPLIES_TO = ("server", "specserver")


def check(launch: Launch, ctx: Context) -> Iterable[Diagnostic]:
    v = values(launch)
    if str(v.get("speculative_algorithm", "")).upper() != "NGRAM" or not v.get(
        "enable_mixed_chunk"
    ):
        return []
    return [
        diag(
            sys.modules[__name__],
            launch,
            launch.position_of("enable_mixed_chunk"),
            "NGRAM disables mixed chunked prefill; --enable-mixed-chunk has no effect",
        )
    ]
