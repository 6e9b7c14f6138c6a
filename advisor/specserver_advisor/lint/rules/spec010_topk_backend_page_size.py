"""SPEC010 topk-backend-page-size.

What it does:
    Flags topk > 1 with ``--page-size`` > 1 on an attention backend that rejects it, and
    ``trtllm_mha`` with topk > 1.
Why it matters:
    SGLang raises a ValueError at startup for both.
Example (fails):
    --speculative-eagle-topk 4 --page-size 16 --attention-backend flashmla
Use instead:
    --page-size 1, or --attention-backend fa3 / flashinfer / triton.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from specserver_advisor.lint.model import Context, Diagnostic, Launch
from specserver_advisor.lint.rules._base import diag, resolution, speculative

CODE = "SPEC010"
NAME = "topk-backend-page-size"
SEVERITY = "error"
SUMMARY = "topk > 1 with a page size or backend SGLang rejects."
FIX = "Use page size 1 or a backend that supports tree drafts (fa3, flashinfer, triton)."
APPLIES_TO = ("server", "specserver")


def check(launch: Launch, ctx: Context) -> Iterable[Diagnostic]:
    if not speculative(launch):
        return []
    out = []
    for err in resolution(launch).errors:
        if "page_size" in err.message or "trtllm_mha" in err.message:
            field = (
                "attention_backend" if "attention_backend" in launch.parsed.values else "page_size"
            )
            out.append(diag(sys.modules[__name__], launch, launch.position_of(field), err.message))
    return out
