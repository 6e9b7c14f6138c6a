"""SPEC014 draft-rope-scaling-missing.

What it does:
    Flags a target config with rope scaling whose draft config has none.
Why it matters:
    The draft runs at the target's absolute positions; without the same rope scaling its
    acceptance falls as prompts grow (a 70B FP8 target's EAGLE-3 head lost all its gain between
    1k and 10k-token prompts until the rope scaling was copied over).
Example (fails):
    Llama-3.1 (llama3 rope scaling) with an EAGLE-3 config without rope_scaling.
Use instead:
    Copy the target's rope_scaling (and max_position_embeddings) into the draft config; on a
    SpecServer, set spec.speculative.draftContextFromTarget: true (the operator renders the
    target's own values as --json-model-override-args, which SGLang applies to the draft).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from specserver_advisor.lint.model import Context, Diagnostic, Launch
from specserver_advisor.lint.rules._base import diag, missing_config, model_configs, speculative
from specserver_advisor.sglang.context import rope_scaling_missing

CODE = "SPEC014"
NAME = "draft-rope-scaling-missing"
SEVERITY = "warning"
SUMMARY = "The target uses rope scaling and the draft config does not."
FIX = (
    "Copy the target's rope_scaling and max_position_embeddings into the draft config "
    "(a SpecServer: set spec.speculative.draftContextFromTarget: true)."
)
APPLIES_TO = ("server", "specserver")


def check(launch: Launch, ctx: Context) -> Iterable[Diagnostic]:
    if not speculative(launch):
        return []
    target, draft = model_configs(launch)  # with --json-model-override-args applied
    if target is None:
        return missing_config(sys.modules[__name__], launch)
    if draft is None:  # INFO001 when a draft path was given and its config not found
        return missing_config(sys.modules[__name__], launch)
    message = rope_scaling_missing(target, draft)
    if not message:
        return []
    return [
        diag(
            sys.modules[__name__],
            launch,
            launch.position_of("speculative_draft_model_path"),
            message,
        )
    ]
