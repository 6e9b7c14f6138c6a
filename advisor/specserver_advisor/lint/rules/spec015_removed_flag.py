"""SPEC015 removed-flag.

What it does:
    Flags arguments SGLang 0.5.23's parser rejects: flags it no longer has, ambiguous prefixes
    (e.g. ``--cuda-graph-max-bs``, now ``-decode``/``-prefill``), unknown flags and bad values,
    among them a ``--json-model-override-args`` that is not a bounded JSON object or leaves a
    config value of the wrong type.
    Decided from the option names alone: a name is checked even when its value is a variable
    the file never sets (``--cuda-graph-max-bs $CONC``), as argparse matches names before values.
Why it matters:
    argparse exits at startup; an ambiguous prefix that once worked now fails after an upgrade.
Example (fails):
    --cuda-graph-max-bs 8
Use instead:
    --cuda-graph-max-bs-decode 8
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from specserver_advisor.errors import shown
from specserver_advisor.lint.model import Context, Diagnostic, Launch
from specserver_advisor.lint.rules._base import diag, override_error
from specserver_advisor.sglang.overrides import FLAG, OPTION

CODE = "SPEC015"
NAME = "removed-flag"
SEVERITY = "error"
SUMMARY = "A flag 0.5.23 no longer has, an ambiguous prefix, or an unknown flag."
FIX = "Use the 0.5.23 flag name (see `sglang serve --help`)."
APPLIES_TO = ("server", "specserver")


def check(launch: Launch, ctx: Context) -> Iterable[Diagnostic]:
    rule = sys.modules[__name__]
    out = []
    for issue in launch.parsed.issues:
        pos = launch.positions[issue.index] if issue.index < len(launch.positions) else launch.start
        where = launch.config_keys.get(issue.index)  # an item SGLang wrote from --config
        message = f"{issue.message} ({where})" if where else issue.message
        out.append(diag(rule, launch, pos, message))
    for message in launch.config_refused:  # SGLang raises before parsing
        out.append(diag(rule, launch, launch.config_at or launch.start, message))
    refused = override_error(launch) if launch.kind == "server" else None
    if refused:  # a value of --json-model-override-args SGLang cannot apply (or no config has)
        at = launch.parsed.positions.get(FLAG)
        known = at is not None and at < len(launch.positions)
        flag_at = launch.positions[at] if known and at is not None else launch.start
        message = refused if refused.startswith(OPTION) else f"{OPTION}: {refused}"
        out.append(diag(rule, launch, flag_at, shown(message)))
    return out
