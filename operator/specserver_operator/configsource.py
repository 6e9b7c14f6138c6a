"""Where the operator reads model configs from, in order (pure decisions; I/O in client.py).

1. ``spec.modelSource.inline`` (configs given in the SpecServer);
2. the ConfigMap ``spec.modelSource.configMapName`` (keys ``target-config.json``,
   ``draft-config.json``, optional ``target-index.json`` / ``draft-index.json``);
3. an HF-compatible endpoint: ``spec.modelSource.hfEndpoint`` or the operator's
   ``SPECSERVER_HF_ENDPOINT``, with the token of ``hfTokenSecretRef``;
4. the advisor's bundled configs of well-known models.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from specserver_advisor.models import SpecServerSpec

KEYS = {"target": "target-config.json", "draft": "draft-config.json"}
INDEX_KEYS = {"target": "target-index.json", "draft": "draft-index.json"}


class ConfigSourceError(LookupError):
    """A config could not be read; the message says which and why (ConfigValid=Unknown)."""


@dataclass
class ModelConfigs:
    """Target and draft configs with their weight sizes and where they came from."""

    target: dict[str, Any]
    draft: dict[str, Any] | None
    target_weight_bytes: int | None
    draft_weight_bytes: int | None
    source: str


def from_inline(spec: SpecServerSpec) -> ModelConfigs | None:
    """Configs given in the spec, when the target's is there."""
    inline = spec.model_source.inline if spec.model_source else None
    if inline is None or inline.target is None:
        return None
    return ModelConfigs(
        inline.target, inline.draft, inline.target_weight_bytes, inline.draft_weight_bytes, "inline"
    )


def from_configmap(name: str, data: dict[str, str], want_draft: bool) -> ModelConfigs:
    """Parse a ConfigMap's data into configs (raises ConfigSourceError naming the key)."""
    parsed: dict[str, Any] = {}
    wanted = [(f"config:{r}", k) for r, k in KEYS.items()]
    wanted += [(f"index:{r}", k) for r, k in INDEX_KEYS.items()]
    for role, key in wanted:
        if key not in data:
            continue
        try:
            value = json.loads(data[key])
        except json.JSONDecodeError as exc:
            raise ConfigSourceError(
                f"ConfigMap {name} key {key}: not valid JSON: {exc.msg}"
            ) from exc
        if not isinstance(value, dict):
            raise ConfigSourceError(f"ConfigMap {name} key {key}: expected a JSON object")
        parsed[role] = value
    if "config:target" not in parsed:
        raise ConfigSourceError(f"ConfigMap {name} has no key {KEYS['target']}")
    if want_draft and "config:draft" not in parsed:
        raise ConfigSourceError(f"ConfigMap {name} has no key {KEYS['draft']}")

    def size(role: str) -> int | None:
        meta = (parsed.get(f"index:{role}") or {}).get("metadata") or {}
        total = meta.get("total_size")
        return int(total) if isinstance(total, int | float) and total > 0 else None

    return ModelConfigs(
        parsed["config:target"],
        parsed.get("config:draft"),
        size("target"),
        size("draft"),
        f"ConfigMap {name}",
    )
