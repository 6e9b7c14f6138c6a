"""SPEC007 draft-path-mismatch.

What it does:
    Flags a missing draft path where SGLang needs one (NEXTN/EAGLE/EAGLE3 on a target without
    MTP layers, STANDALONE, DFLASH) and a draft path given where SGLang ignores it (MTP targets).
Why it matters:
    Without a draft path SGLang loads the target checkpoint as the draft and fails at weight
    loading (DFLASH refuses at startup); for MTP targets the given path is ignored with a
    warning, so the draft that was meant is not the one that runs.
Example (fails):
    --speculative-algorithm EAGLE3 (no --speculative-draft-model-path) on Qwen3-8B
Use instead:
    --speculative-draft-model-path Tengyunw/qwen3_8b_eagle3
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from specserver_advisor.lint.model import Context, Diagnostic, Launch
from specserver_advisor.lint.rules._base import diag, draft_path_ignored, speculative, values
from specserver_advisor.sglang import configvalues
from specserver_advisor.sglang.drafts import missing_draft

CODE = "SPEC007"
NAME = "draft-path-mismatch"
SEVERITY = "error"
SUMMARY = "Draft path missing where required, or given where SGLang ignores it."
FIX = "Give --speculative-draft-model-path for separate drafts; omit it for MTP targets."
APPLIES_TO = ("server", "specserver")


def check(launch: Launch, ctx: Context) -> Iterable[Diagnostic]:
    if not speculative(launch):
        return []
    v = values(launch)
    algo = str(v.get("speculative_algorithm")).upper()
    target = launch.configs.get("target") or {}
    arch = configvalues.architecture(target)
    has_draft = "speculative_draft_model_path" in v
    rule = sys.modules[__name__]
    missing = missing_draft(algo, launch.configs.get("target"), has_draft)
    if missing:
        return [diag(rule, launch, launch.position_of("speculative_algorithm"), missing)]
    if has_draft and draft_path_ignored(target):
        return [
            diag(
                rule,
                launch,
                launch.position_of("speculative_draft_model_path"),
                f"{arch} carries its MTP layers: SGLang ignores the draft path",
            )
        ]
    return []
