"""``spec.speculative.draftContextFromTarget``: the draft gets the target's own context, safely.

A draft config trained at a shorter context than its target (an EAGLE-3 head of 2,048
positions for a 131,072-position llama3-rope Llama-3.1) makes SGLang refuse to start, and a
draft without the target's rope scaling loses its acceptance on long prompts. The field fix is
to give the draft the target's ``rope_scaling`` and ``max_position_embeddings``. SGLang 0.5.23
has one way to change a draft's config from the command line: ``--json-model-override-args``,
which ``ModelConfig.from_server_args`` passes to the draft as well as the target and
``get_config`` applies before the context is derived (``rope_scaling`` merged into the current
one, other keys set). The values are the target's own, so for the target the override is a
no-op (checked against SGLang's own code by the oracle test) and for the draft it is the fix.

The operator computes the values here from the target's config (``override``), refuses a spec
the fix cannot apply to (``refusal``), renders them (``override_json``, through
``launch_args.specserver_args``); the one resolution applies the override to target and draft as
SGLang does (``sglang.overrides``), so the launch is planned and linted on the configs SGLang
reads. Pure: used by ``launch`` (operator, webhook, lint and ``plan --from`` alike).
"""

from __future__ import annotations

import json
from typing import Any

from specserver_advisor.sglang import drafts
from specserver_advisor.sglang.context import text_config

#: The field, as a SpecServer author writes it (messages name it).
FIELD = "spec.speculative.draftContextFromTarget"
#: What the fix sets on the draft: the keys SGLang derives the context and positions from.
ROPE_KEYS = ("rope_scaling", "rope_parameters")
#: The SGLang flag the values are rendered as.
FLAG = "--json-model-override-args"


def override(target: dict[str, Any]) -> dict[str, Any]:
    """The target's own ``max_position_embeddings`` and rope scaling (under the key its config
    uses), exactly as its config holds them."""
    out: dict[str, Any] = {}
    if "max_position_embeddings" in target:
        out["max_position_embeddings"] = target["max_position_embeddings"]
    for key in ROPE_KEYS:
        if isinstance(target.get(key), dict):
            out[key] = target[key]
            break
    return out


def override_json(target: dict[str, Any]) -> str:
    """``--json-model-override-args``'s value: compact JSON, keys sorted (a stable render)."""
    return json.dumps(override(target), sort_keys=True, separators=(",", ":"))


def refusal(
    algorithm: str, has_draft: bool, mtp_target: bool, target: dict[str, Any] | None
) -> str | None:
    """Why the field cannot apply to this spec (a sentence naming it), or None.

    ``target``: the target's config (None: not read yet; only the spec is checked).
    """
    if algorithm not in drafts.NEEDS_DRAFT or not has_draft:
        why = "has no draft model" if algorithm not in drafts.NEEDS_DRAFT else "needs spec.draft"
        return f"{FIELD} gives a separate draft model the target's context; {algorithm} {why}"
    if mtp_target:
        return f"{FIELD}: the target's MTP layers are the draft; they already share its config"
    if target is None:
        return None
    if text_config(target) is not target:
        return (
            f"{FIELD}: the target config is multimodal (its context is in a text sub-config); "
            "SGLang would set the override on the top-level config of both models"
        )
    if not isinstance(target.get("max_position_embeddings"), int) or isinstance(
        target.get("max_position_embeddings"), bool
    ):
        return f"{FIELD}: the target config has no integer max_position_embeddings for the draft"
    return None


__all__ = [
    "FIELD",
    "FLAG",
    "override",
    "override_json",
    "refusal",
]
