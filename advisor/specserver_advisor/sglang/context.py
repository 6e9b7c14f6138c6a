"""Context-length derivation and the draft/target context check, as SGLang 0.5.23 does them.

Called by the resolver, the planner, lint rules SPEC002/SPEC003/SPEC014, the operator's
validation and the engine preflight. Pure functions over HF ``config.json`` dicts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from specserver_advisor.sglang import configvalues

#: ``CONTEXT_LENGTH_KEYS`` in priority order (``n_positions`` is not consulted).
CONTEXT_LENGTH_KEYS = (
    "max_sequence_length",
    "seq_length",
    "max_seq_len",
    "model_max_length",
    "max_position_embeddings",
)
FALLBACK_CONTEXT = 2048
TEXT_SUBCONFIG_KEYS = ("thinker_config", "llm_config", "language_config", "text_config")
OVERRIDE_ENV = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"
CI_ENV = "SGLANG_IS_IN_CI"
#: ``EnvBool.parse``: only these (lower-cased, not stripped) are true; anything else that is
#: not one of its false spellings warns and reads as the default (false).
_TRUE = {"1", "true", "yes", "y"}
#: Rope types for which transformers 5.19's config object always carries
#: ``original_max_position_embeddings`` in ``rope_parameters`` (so SGLang applies no factor).
ROPE_TYPES_WITH_ORIGINAL = ("yarn", "longrope", "llama3")


def env_true(env: dict[str, str], name: str) -> bool:
    """SGLang's ``EnvBool`` reading of an environment variable (``on``/``t`` are false)."""
    return str(env.get(name, "")).lower() in _TRUE


def text_config(config: dict[str, Any]) -> dict[str, Any]:
    """The text sub-config of a multimodal config (``get_hf_text_config``), else the config."""
    for key in TEXT_SUBCONFIG_KEYS:
        sub = config.get(key)
        if isinstance(sub, dict):
            # thinker_config nests its own text_config (Qwen-Omni).
            return text_config(sub) if key == "thinker_config" else sub
    return config


@dataclass(frozen=True)
class DerivedContext:
    """A model's derived context and how it was reached."""

    length: int
    key: str | None
    base: int
    rope_factor: float
    note: str


def derive_context_length(config: dict[str, Any]) -> DerivedContext:
    """``get_context_length`` applied to the text config."""
    cfg = text_config(config)
    key = next((k for k in CONTEXT_LENGTH_KEYS if cfg.get(k) is not None), None)
    base = (configvalues.integer(cfg, key, 1) if key else None) or FALLBACK_CONTEXT
    factor: float = 1
    note = f"{key}={base}" if key else f"no context key; SGLang falls back to {FALLBACK_CONTEXT}"
    rope_key = "rope_scaling" if configvalues.mapping(cfg, "rope_scaling") else "rope_parameters"
    rope = configvalues.mapping(cfg, rope_key)
    if rope:
        factor = configvalues.number(rope, "factor", rope_key) or 1
        kind = rope.get("rope_type") or rope.get("type")
        if "original_max_position_embeddings" in rope or kind in ROPE_TYPES_WITH_ORIGINAL:
            factor = 1
        elif factor != 1:
            note += f" x rope_scaling factor {factor:g}"
    length = int(factor * base) if key else FALLBACK_CONTEXT
    return DerivedContext(length, key, base, factor, note)


class ContextVerdict(StrEnum):
    """Outcome of the draft/target context check."""

    COMPATIBLE = "compatible"
    STARTUP_FAILS = "startup_fails"
    OVERRIDDEN = "starts_with_override"


@dataclass
class ContextCheck:
    """The context picture of one launch."""

    target: int
    draft: int | None
    effective: int
    verdict: ContextVerdict
    message: str
    usable_prompt_tokens: int
    reserved_tokens: int
    failing_model: str | None = None  # "target" or "draft"
    warnings: list[str] = field(default_factory=list)


def _overflow_message(reason: str, requested: int, derived: int) -> str:
    return (
        f"Warning: {reason} context_length ({requested}) is greater than the derived "
        f"context_length ({derived}). This may lead to incorrect model outputs or CUDA errors. "
        "Note that the derived context_length may differ from max_position_embeddings in the "
        "model's config."
    )


def _startup_error(reason: str, requested: int, derived: int) -> str:
    return (
        _overflow_message(reason, requested, derived)
        + f" To allow overriding this maximum, set the env var {OVERRIDE_ENV}=1"
    )


def rope_scaling_missing(target: dict[str, Any], draft: dict[str, Any]) -> str | None:
    """A message when the target uses rope scaling and the draft config has none."""
    t_rope = configvalues.mapping(text_config(target), "rope_scaling")
    d_rope = configvalues.mapping(text_config(draft), "rope_scaling")
    if t_rope and not d_rope:
        kind = t_rope.get("rope_type") or t_rope.get("type") or "rope scaling"
        return (
            f"the target uses {kind} rope scaling ({t_rope}) and the draft config has none: "
            "the draft runs at the target's absolute positions and its acceptance will fall "
            "on long prompts; copy the target's rope_scaling (and max_position_embeddings) "
            "into the draft config"
        )
    return None


def check_context(
    target: dict[str, Any],
    draft: dict[str, Any] | None,
    context_length: int | None = None,
    env: dict[str, str] | None = None,
    reserved_tokens: int = 0,
) -> ContextCheck:
    """Compare target, ``--context-length`` and draft the way ModelConfig does at startup.

    Args:
        target: the target's config.json.
        draft: the draft's config.json (None for NGRAM/UNO or unknown).
        context_length: ``--context-length`` if given.
        env: the engine's environment (for the override variable).
        reserved_tokens: EAGLE reserved tokens added to every prompt.
    """
    env = env or {}
    allow = env_true(env, OVERRIDE_ENV) or env_true(env, CI_ENV)
    derived_t = derive_context_length(target).length
    effective = derived_t
    warnings: list[str] = []
    verdict = ContextVerdict.COMPATIBLE
    message = f"target context {derived_t}"
    failing: str | None = None
    if context_length is not None:
        if context_length > derived_t:
            if allow:
                warnings.append(_overflow_message("User-specified", context_length, derived_t))
                effective = context_length
                verdict = ContextVerdict.OVERRIDDEN
                message = (
                    f"--context-length {context_length} exceeds the target's derived "
                    f"{derived_t}; it starts only because {OVERRIDE_ENV} is set"
                )
            else:
                verdict = ContextVerdict.STARTUP_FAILS
                failing = "target"
                message = _startup_error("User-specified", context_length, derived_t)
        else:
            effective = context_length
    derived_d: int | None = None
    if draft is not None and verdict != ContextVerdict.STARTUP_FAILS:
        derived_d = derive_context_length(draft).length
        if effective > derived_d:
            if allow:
                warnings.append(_overflow_message("Target model's", effective, derived_d))
                warnings.append(
                    f"Overriding the draft model's max_position_embeddings to {effective}."
                )
                verdict = ContextVerdict.OVERRIDDEN
                message = (
                    f"the draft's derived context {derived_d} is shorter than the "
                    f"target's {effective}; it starts only because {OVERRIDE_ENV} is "
                    f"set, and acceptance is expected to degrade on prompts longer "
                    f"than {derived_d} tokens"
                )
            else:
                verdict = ContextVerdict.STARTUP_FAILS
                failing = "draft"
                message = _startup_error("Target model's", effective, derived_d)
        elif verdict == ContextVerdict.COMPATIBLE:
            message = f"draft context {derived_d} covers the target's {effective}"
    elif draft is not None:
        derived_d = derive_context_length(draft).length
    if draft is not None:
        missing = rope_scaling_missing(target, draft)
        if missing:
            warnings.append(missing)
    # The tokenizer refuses input + reserved >= context; the scheduler refuses input >=
    # context - 1 - 5 (``max_req_input_len``): the tighter of the two is what a prompt may use.
    usable = max(0, min(effective - 1 - reserved_tokens, effective - 1 - 5 - 1))
    return ContextCheck(
        target=derived_t,
        draft=derived_d,
        effective=effective,
        verdict=verdict,
        message=message,
        usable_prompt_tokens=usable,
        reserved_tokens=reserved_tokens,
        failing_model=failing,
        warnings=warnings,
    )
