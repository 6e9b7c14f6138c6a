"""Whether a speculative launch needs a separate draft: the target's MTP layers, or a path.

NEXTN and EAGLE can run on a target's own MTP layers (SGLang loads them from the model path);
on a target without them, SGLang loads the target checkpoint as the draft and fails at weight
loading. EAGLE3, STANDALONE and DFLASH always need a draft of their own unless the target
carries MTP layers. Shared by lint rule SPEC007 and the operator's validation. Pure.
"""

from __future__ import annotations

from typing import Any

from specserver_advisor.sglang import configvalues
from specserver_advisor.sglang.speculative_tables import PATHLESS_MTP_ARCHS

NEEDS_DRAFT = frozenset({"NEXTN", "EAGLE", "EAGLE3", "STANDALONE", "DFLASH"})
#: Algorithms that may run on the target's own MTP layers.
MTP_ALGORITHMS = frozenset({"NEXTN", "EAGLE"})


def architecture(config: dict[str, Any] | None) -> str:
    """The target's architecture ("" when unknown)."""
    return configvalues.architecture(config)


def has_mtp_layers(config: dict[str, Any] | None) -> bool | None:
    """Whether the target checkpoint carries MTP layers SGLang can draft with (None: unknown)."""
    arch = architecture(config)
    if not arch or config is None:
        return None
    if arch not in PATHLESS_MTP_ARCHS:
        return False
    layers = config.get("num_nextn_predict_layers")
    if layers is None and isinstance(config.get("text_config"), dict):
        layers = config["text_config"].get("num_nextn_predict_layers")
    return layers is None or (isinstance(layers, int) and layers > 0)


def missing_draft(algorithm: str, target: dict[str, Any] | None, has_draft: bool) -> str | None:
    """Why the launch needs a draft path it does not give, or None."""
    algo = algorithm.upper()
    if has_draft or algo not in NEEDS_DRAFT:
        return None
    mtp = has_mtp_layers(target)
    if mtp:
        return None
    if mtp is None:
        return None if algo in MTP_ALGORITHMS else f"{algo} needs --speculative-draft-model-path"
    arch = architecture(target)
    return f"{algo} needs --speculative-draft-model-path ({arch} has no MTP layers)"
