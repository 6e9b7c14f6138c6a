"""``--json-model-override-args`` applied to the target and the draft, as SGLang 0.5.23 does.

``ModelConfig.from_server_args`` passes ``model_override_args=json_model_override_args`` for the
draft as well as the target, and ``get_config`` (``utils/hf_transformers/config.py``) applies it
to the loaded config object before anything is derived from it (architecture, context length,
rope scaling, the shape memory is sized from). The update is key by key: a dict onto a
sub-config updates that sub-config, a dict onto ``rope_scaling``/``rope_parameters`` is merged
into the current rope dict, anything else replaces the key. ``effective_configs`` is that step
for a launch; the resolver (``resolve.resolve_launch``), ``serverargs.predict_server``,
``plan.make_plan`` and the lint rules' per-launch analysis call it, so every reading of a launch
sees the configs SGLang sees. Applying it twice gives the same configs. Pure.

The config-file overrides (``--decrypted-config-file``, ``--decrypted-draft-config-file``) replace
the file a config is read from; ``config_file_names`` says which, the loaders read it.

One asymmetry is SGLang's own: the draft architecture the algorithm alias reads
(``_resolve_speculative_algorithm_alias``: Gemma4 assistant drafts) is read without the
overrides; the resolver keeps the draft as given for that.
"""

from __future__ import annotations

import copy
import math
from typing import Any

from specserver_advisor import bounded
from specserver_advisor.sglang.configcheck import check_model_config
from specserver_advisor.sglang.configvalues import ConfigShapeError
from specserver_advisor.sglang.context import ROPE_TYPES_WITH_ORIGINAL, TEXT_SUBCONFIG_KEYS

FLAG = "json_model_override_args"
OPTION = "--json-model-override-args"
#: Bounds of the flag's JSON (a model config's overrides are a few keys, a few levels deep).
MAX_OVERRIDE_BYTES = 256 * 1024
MAX_OVERRIDE_DEPTH = 32
ROPE_KEYS = ("rope_scaling", "rope_parameters")


class OverrideArgsError(ValueError):
    """``--json-model-override-args`` is not what ``get_config`` can apply.

    ``exception`` is the exception SGLang raises (``json.loads`` or ``.items()`` on the value).
    """

    def __init__(self, exception: str, message: str) -> None:
        super().__init__(message)
        self.exception = exception
        self.message = message


def override_args(values: dict[str, Any]) -> dict[str, Any]:
    """The parsed ``--json-model-override-args`` of a launch (``{}`` when unset).

    Raises:
        OverrideArgsError: not JSON (SGLang's ``JSONDecodeError``), or JSON that is not an
            object (``get_config`` calls ``.items()`` on it: ``AttributeError``).
    """
    raw = values.get(FLAG)
    if raw is None or raw == "":
        return {}
    try:  # the one reading, bounded: size, depth, numbers (a huge int, NaN) refused by name
        parsed = bounded.json_value(
            str(raw), OPTION, max_bytes=MAX_OVERRIDE_BYTES, max_depth=MAX_OVERRIDE_DEPTH
        )
        _finite(parsed)
    except bounded.InputLimitError as exc:
        if exc.decoder_message:  # not JSON: SGLang's own json.loads error, as it words it
            raise OverrideArgsError("JSONDecodeError", exc.decoder_message) from None
        raise OverrideArgsError("ValueError", str(exc)) from None
    if isinstance(parsed, dict):
        return parsed
    if not parsed:  # falsy JSON (null, [], 0, ""): ``if model_override_args:`` skips it
        return {}
    kind = {list: "list", str: "str", int: "int", float: "float", bool: "bool"}[type(parsed)]
    raise OverrideArgsError("AttributeError", f"'{kind}' object has no attribute 'items'")


def _finite(value: Any) -> None:
    """InputLimitError for a NaN or infinite number anywhere in ``value`` (Python's JSON reads
    ``NaN`` and ``1e999``; no config field means one)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, float) and not math.isfinite(item):
            raise bounded.InputLimitError(OPTION, f"{item} is not a finite number")


def config_file_names(values: dict[str, Any]) -> tuple[str | None, str | None]:
    """The files SGLang reads instead of the target's and the draft's ``config.json``
    (``--decrypted-config-file``, ``--decrypted-draft-config-file``), None where config.json.

    The target's is stripped and ignored when blank (``ModelConfig``); the draft's is used as
    given whenever it is non-empty (``resolve_boundary_reduction`` reads it unstripped while
    resolving, so a padded or blank name fails there). The overrides of
    ``--json-model-override-args`` apply on top of either file. The loaders read them
    (``loaders.configs.load_config(config_file=...)``): lint and ``plan``.
    """
    target = values.get("decrypted_config_file")
    draft = values.get("decrypted_draft_config_file")
    return (
        str(target).strip() if target and str(target).strip() else None,
        str(draft) if draft else None,
    )


def _current_rope(config: dict[str, Any]) -> dict[str, Any]:
    """What transformers 5.19's config object answers for ``rope_scaling``: the rope dict as
    it standardises it (yarn, longrope and llama3 always carry
    ``original_max_position_embeddings``, the config's positions when the file has none)."""
    rope = next((v for k in ROPE_KEYS if isinstance(v := config.get(k), dict)), {})
    kind = rope.get("rope_type") or rope.get("type")
    if kind in ROPE_TYPES_WITH_ORIGINAL and "original_max_position_embeddings" not in rope:
        return {**rope, "original_max_position_embeddings": config.get("max_position_embeddings")}
    return dict(rope)


def apply_model_overrides(config: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """``get_config``'s override loop on a ``config.json`` dict (a new dict; the input is kept)."""
    if not overrides:
        return config
    out = copy.deepcopy(config)
    for key, value in overrides.items():
        current = out.get(key)
        if isinstance(value, dict) and key in TEXT_SUBCONFIG_KEYS and isinstance(current, dict):
            current.update(copy.deepcopy(value))  # a sub-config object: ``current.update``
        elif key in ROPE_KEYS and isinstance(value, dict):
            merged = {**_current_rope(out), **value}
            # v5's setter replaces rope_parameters wholesale; both names read the merged dict.
            out["rope_scaling"] = merged
            out["rope_parameters"] = dict(merged)
        else:
            out[key] = copy.deepcopy(value)
    return out


def effective_configs(
    values: dict[str, Any],
    target: dict[str, Any] | None,
    draft: dict[str, Any] | None,
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The target and draft configs SGLang derives everything from, for a launch's flags.

    Raises:
        OverrideArgsError: the flag's value cannot be applied (see ``override_args``), or
            leaves a config with a value of the wrong type or range (``configcheck``).
    """
    overrides = override_args(values)
    if not overrides:
        return target, draft
    out: list[dict[str, Any] | None] = []
    for config, name in ((target, "target"), (draft, "draft")):
        if config is None:
            out.append(None)
            continue
        applied = apply_model_overrides(config, overrides)
        try:  # a value of the wrong type or range is the flag's, named, not a traceback later
            check_model_config(applied, f"{OPTION} on the {name} config")
        except ConfigShapeError as exc:
            raise OverrideArgsError("ValueError", str(exc)) from None
        out.append(applied)
    return out[0], out[1]
