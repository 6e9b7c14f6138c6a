"""Model configs for a SpecServer read by the CLI (``replay --policy``, ``plan --from``).

The configs the spec gives inline come first (as the operator reads them), then the model
references through ``load_config`` (a directory, the HF cache, an HF endpoint when one is
given, the advisor's bundled configs). I/O: reads files and, only with an endpoint, fetches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from specserver_advisor.loaders.configs import load_config
from specserver_advisor.models import SpecServerSpec


@dataclass
class SpecServerConfigs:
    """Target and draft configs with their weight sizes and where they came from."""

    target: dict[str, Any]
    draft: dict[str, Any] | None
    target_weight_bytes: int | None
    draft_weight_bytes: int | None
    source: str


def configs_for_spec(
    spec: SpecServerSpec, env: dict[str, str], hf_endpoint: str | None = None
) -> SpecServerConfigs:
    """The configs the operator would plan this spec with.

    Raises:
        ConfigNotFoundError, ConfigUnreadableError: as ``load_config``.
    """
    inline = spec.model_source.inline if spec.model_source else None
    if inline is not None and inline.target is not None:
        return SpecServerConfigs(
            inline.target,
            inline.draft,
            inline.target_weight_bytes,
            inline.draft_weight_bytes,
            "spec.modelSource.inline",
        )
    target = load_config(spec.model.path, spec.model.revision, env, hf_endpoint)
    draft = (
        load_config(spec.draft.path, spec.draft.revision, env, hf_endpoint) if spec.draft else None
    )
    return SpecServerConfigs(
        target.config,
        draft.config if draft else None,
        target.weight_bytes,
        draft.weight_bytes if draft else None,
        target.source,
    )
