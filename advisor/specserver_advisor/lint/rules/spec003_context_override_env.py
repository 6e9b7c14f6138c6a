"""SPEC003 context-override-env.

What it does:
    Flags ``SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN`` set true on a speculative launch.
Why it matters:
    The variable removes SGLang's draft/target context check; the draft then runs past the
    positions it was trained on and acceptance degrades on long prompts until speculation is
    slower than none.
Example (fails):
    env SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 with an EAGLE-3 draft of 2,048 positions.
Use instead:
    Fix the draft config (positions and rope scaling) and drop the variable.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from specserver_advisor.lint.model import Context, Diagnostic, Launch
from specserver_advisor.lint.rules._base import diag, env_is_true, speculative
from specserver_advisor.sglang.context import OVERRIDE_ENV

CODE = "SPEC003"
NAME = "context-override-env"
SEVERITY = "warning"
SUMMARY = "The context-override env var removes the check; acceptance degrades past the draft."
FIX = "Fix the draft's context in its config and remove the environment variable."
APPLIES_TO = ("server", "specserver")


def check(launch: Launch, ctx: Context) -> Iterable[Diagnostic]:
    if not speculative(launch) or not env_is_true(launch, OVERRIDE_ENV):
        return []
    pos = launch.env_positions.get(OVERRIDE_ENV, launch.start)
    return [
        diag(
            sys.modules[__name__],
            launch,
            pos,
            f"{OVERRIDE_ENV} is set: SGLang skips the draft/target context check and the "
            "draft loses acceptance on prompts longer than its own context",
        )
    ]
