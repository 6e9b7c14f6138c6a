"""SPEC002 draft-context-shorter.

What it does:
    Derives the draft's and the target's context lengths exactly as SGLang does and flags a
    draft shorter than the target's effective context (or ``--context-length``).
Why it matters:
    Every draft runs at the target's absolute positions; SGLang refuses to start with
    "Target model's context_length (...) is greater than the derived context_length (...)".
Example (fails):
    A Llama-3.1 target (131,072 positions) with an EAGLE-3 head whose config says 2,048.
Use instead:
    Give the draft config the target's max_position_embeddings and rope_scaling, or lower
    --context-length to the draft's length.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from specserver_advisor.lint.model import Context, Diagnostic, Launch
from specserver_advisor.lint.rules._base import context_check, diag, missing_config, speculative

CODE = "SPEC002"
NAME = "draft-context-shorter"
SEVERITY = "error"
SUMMARY = "The draft's derived context is shorter than the target's: startup fails."
FIX = (
    "Align the draft config's context (and rope scaling) with the target, or lower it "
    "(a SpecServer: spec.speculative.draftContextFromTarget: true)."
)
APPLIES_TO = ("server", "specserver")


def check(launch: Launch, ctx: Context) -> Iterable[Diagnostic]:
    if not speculative(launch):
        return []
    check_ = context_check(launch)
    if check_ is None:
        return missing_config(sys.modules[__name__], launch)
    if check_.verdict.value == "startup_fails":
        where = (
            "context_length" if check_.failing_model == "target" else "speculative_draft_model_path"
        )
        return [diag(sys.modules[__name__], launch, launch.position_of(where), check_.message)]
    return missing_config(sys.modules[__name__], launch)  # the draft's config, if not found
