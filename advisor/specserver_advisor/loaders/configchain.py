"""One chain of model-config sources for a SpecServer: the first source that has them wins.

Every reader of a SpecServer's model configs walks the same order: the configs given in the
spec (``spec.modelSource.inline``) first, then the sources its caller is allowed to use, given
as functions (the operator: the SpecServer's ConfigMap through its client, the endpoint the
cluster admin allowed, the bundled catalog; the CLI and ``lint``: the model references through
the loaders; the admission webhook: the bundled catalog only). This module decides, never
reads: the sources do the I/O and keep their own security properties (docs/security.md: the
operator never reads a tenant's ``hfTokenSecretRef``, endpoints only from the admin's
allow-list). Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from specserver_advisor.models import SpecServerSpec
from specserver_advisor.sglang.configcheck import LoadedConfig


class ConfigSourceError(LookupError):
    """A source has the configs but cannot read them, or no source has them (the message
    says which and why; the operator's ConfigValid=Unknown)."""


@dataclass
class ModelConfigs:
    """Target and draft configs with their weight sizes and where they came from."""

    target: dict[str, Any]
    draft: dict[str, Any] | None
    target_weight_bytes: int | None
    draft_weight_bytes: int | None
    source: str


@dataclass(frozen=True)
class Lookup:
    """What one source answered: the configs, or None with an optional note on why not."""

    configs: ModelConfigs | None
    note: str | None = None
    #: The model reference this source did not have (target first), when it looked one up.
    missing: str | None = None


#: One source: asked with the spec; raises ConfigSourceError when it has them but they are bad.
Source = Callable[[SpecServerSpec], Lookup]
#: Looks up one model reference (path, revision); None when this source does not have it.
RefLoader = Callable[[str, str | None], LoadedConfig | None]


def inline(spec: SpecServerSpec) -> Lookup:
    """Configs given in the spec, when the target's is there."""
    given = spec.model_source.inline if spec.model_source else None
    if given is None or given.target_config is None:
        return Lookup(None)
    target, draft = given.configs()  # the model checked both texts; parsed again here
    if target is None:
        return Lookup(None)
    return Lookup(
        ModelConfigs(
            target,
            draft,
            given.target_weight_bytes,
            given.draft_weight_bytes,
            "inline",
        )
    )


def references(load: RefLoader, source: str | None = None) -> Source:
    """A source that looks up the target and draft references with ``load`` (both, or none).

    ``source`` names where they came from (default: where the target's loader found it).
    """

    def lookup(spec: SpecServerSpec) -> Lookup:
        target = load(spec.model.path, spec.model.revision)
        if target is None:
            return Lookup(None, missing=spec.model.path)
        draft = load(spec.draft.path, spec.draft.revision) if spec.draft else None
        if spec.draft and draft is None:
            return Lookup(None, missing=spec.draft.path)
        return Lookup(
            ModelConfigs(
                target.config,
                draft.config if draft else None,
                target.weight_bytes,
                draft.weight_bytes if draft else None,
                source or target.source,
            )
        )

    return lookup


def first_configs(spec: SpecServerSpec, sources: Sequence[Source], hint: str) -> ModelConfigs:
    """The configs of the first source that has them.

    Raises:
        ConfigSourceError: none has them; names the missing model, ``hint`` (what the reader
            can do) and the sources' notes. A source's own errors propagate unchanged.
    """
    notes: list[str] = []
    missing: str | None = None
    for source in sources:
        found = source(spec)
        if found.configs is not None:
            return found.configs
        if found.note:
            notes.append(found.note)
        missing = missing or found.missing
    missing = missing or spec.model.path
    raise ConfigSourceError(f"no config for {missing}: {hint}" + "".join(f"; {n}" for n in notes))
