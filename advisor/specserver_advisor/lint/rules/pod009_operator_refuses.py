"""POD009 operator-refuses.

What it does:
    Flags a SpecServer the operator would refuse once it renders it (``ConfigValid=False``, and
    ``kubectl apply`` refused by its admission webhook): an engine pod the default pod policy
    refuses (a ``hostPath`` model volume, a toleration without a key, extraArgs that run code
    such as ``--trust-remote-code``: ``launch.podpolicy.refusal``), or expected request tokens
    that do not fit the context the engine will have (``launch.validation``). The same functions
    the operator and the webhook call.
Why it matters:
    ``lint`` should pass exactly what the operator admits: a SpecServer refused at apply time
    or stuck at ``ConfigValid=False`` never starts an engine.
Example (fails):
    engine: {extraArgs: ["--trust-remote-code"]} (a default install refuses it)
Use instead:
    drop the flag, or have the admin allow it (SPECSERVER_ALLOW_CODE_EXECUTION_FLAGS) and
    ``--ignore POD009`` in that cluster's lint settings
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from specserver_advisor.launch.podpolicy import PodPolicy, refusal
from specserver_advisor.launch.validation import spec_context_problems
from specserver_advisor.lint.model import Context, Diagnostic, Launch
from specserver_advisor.lint.rules._base import context_check, diag

CODE = "POD009"
NAME = "operator-refuses"
SEVERITY = "error"
SUMMARY = "A SpecServer the operator refuses under its default pod policy or the model's context."
FIX = "Change the field the message names (or, where the admin allows it, ignore POD009)."
APPLIES_TO = ("specserver",)


def check(launch: Launch, ctx: Context) -> Iterable[Diagnostic]:
    spec = launch.specserver
    if spec is None:
        return []
    out = []
    refused = refusal(spec, PodPolicy())
    if refused:
        out.append(diag(sys.modules[__name__], launch, launch.start, refused))
    found = context_check(launch)
    effective = found.effective if found is not None else None
    for problem in spec_context_problems(spec, effective if isinstance(effective, int) else None):
        out.append(diag(sys.modules[__name__], launch, launch.start, problem))
    return out
