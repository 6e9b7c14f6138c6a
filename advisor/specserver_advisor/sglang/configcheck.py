"""The one check of a model config before the advisor reads it into the model shape.

:func:`check_model_config` type-checks every ``config.json`` value the advisor reads (the
architecture, the sizes ``modelshape`` multiplies and divides by, the context keys and rope
scaling ``sglang.context`` derives the context from, the quantization block, a DFLASH/DSPARK
draft's ``block_size``) in the config and in the text sub-config SGLang reads, and bounds its
nesting; a bad value is a :class:`ConfigShapeError` (a ValueError) naming the config and the
key path, e.g. ``target config: text_config.num_attention_heads: 0 is out of range``.

Callers: ``loaders.configs`` (every config.json from a directory, the HF cache or an endpoint),
``launch.settle`` and ``launch.plan_argv`` (so the operator's ConfigValid, ``plan``
and ``replay`` check inline and ConfigMap configs too), lint's config finder, and the operator's
admission webhook through ``check_configs``. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from specserver_advisor.bounded import depth
from specserver_advisor.sglang import configvalues as values
from specserver_advisor.sglang.configvalues import ConfigShapeError
from specserver_advisor.sglang.context import CONTEXT_LENGTH_KEYS, TEXT_SUBCONFIG_KEYS


@dataclass(frozen=True)
class LoadedConfig:
    """A model config and where it came from."""

    ref: str
    config: dict[str, Any]
    weight_bytes: int | None
    source: str


#: Containers inside containers a real config needs (``loaders.bounded.MAX_DEPTH``).
MAX_DEPTH = 64
#: Integer keys the advisor reads, with their least valid value (sizes it divides by: 1).
INTEGER_KEYS = {
    **dict.fromkeys(("hidden_size", "n_embd", "d_model"), 1),
    **dict.fromkeys(("num_attention_heads", "n_head", "num_key_value_heads", "num_kv_heads"), 1),
    **dict.fromkeys(("num_hidden_layers", "n_layer", "num_layers", "head_dim", "vocab_size"), 1),
    **dict.fromkeys(CONTEXT_LENGTH_KEYS, 1),
    "block_size": 1,
    **dict.fromkeys(
        (
            "intermediate_size",
            "ffn_dim",
            "kv_lora_rank",
            "qk_nope_head_dim",
            "qk_rope_head_dim",
            "v_head_dim",
            "n_routed_experts",
            "num_experts",
            "num_local_experts",
            "num_experts_per_tok",
            "moe_topk",
            "moe_intermediate_size",
            "n_shared_experts",
            "num_shared_experts",
            "first_k_dense_replace",
            "num_nextn_predict_layers",
            "draft_vocab_size",
        ),
        0,
    ),
}
STRING_KEYS = ("torch_dtype", "dtype")
ROPE_KEYS = ("rope_scaling", "rope_parameters")


#: The keys ``modelshape`` reads a MoE's routed experts and experts per token from, in order.
EXPERT_KEYS = ("n_routed_experts", "num_experts", "num_local_experts")
PER_TOKEN_KEYS = ("num_experts_per_tok", "moe_topk")


def _first(cfg: dict[str, Any], keys: tuple[str, ...]) -> tuple[str, int] | None:
    for key in keys:
        value = values.integer(cfg, key)
        if value is not None:
            return key, value
    return None


def _check_experts(cfg: dict[str, Any], prefix: str) -> None:
    """More experts per token than routed experts is no MoE (the expected experts a batch
    touches, ``1 - (1 - k/e)^n``, is then a complex number)."""
    experts, per_token = _first(cfg, EXPERT_KEYS), _first(cfg, PER_TOKEN_KEYS)
    if experts and per_token and experts[1] and per_token[1] > experts[1]:
        where = f"{prefix}.{per_token[0]}" if prefix else per_token[0]
        raise ConfigShapeError(
            f"{where}: {per_token[1]} is more than the {experts[1]} routed experts ({experts[0]})"
        )


def _check_level(cfg: dict[str, Any], prefix: str) -> None:
    values.architectures(cfg, prefix)
    for key, minimum in INTEGER_KEYS.items():
        values.integer(cfg, key, minimum, prefix)
    _check_experts(cfg, prefix)
    for key in STRING_KEYS:
        values.string(cfg, key, prefix)
    values.flag(cfg, "tie_word_embeddings", prefix)
    for key in ROPE_KEYS:
        rope = values.mapping(cfg, key, prefix)
        if rope is not None:
            where = f"{prefix}.{key}" if prefix else key
            values.number(rope, "factor", where)
            values.string(rope, "rope_type", where)
            values.string(rope, "type", where)
            values.integer(rope, "original_max_position_embeddings", 1, where)
    quant = values.mapping(cfg, "quantization_config", prefix)
    if quant is not None:
        where = f"{prefix}.quantization_config" if prefix else "quantization_config"
        for key in ("quant_method", "fmt", "kv_cache_quant_algo"):
            values.string(quant, key, where)


def check_model_config(config: Any, what: str = "model config") -> dict[str, Any]:
    """``config`` itself when every value the advisor reads has the right type and range.

    Raises:
        ConfigShapeError: ``"{what}: {key path}: {problem}"``.
    """
    if not isinstance(config, dict):
        raise ConfigShapeError(f"{what}: expected a JSON object, got {type(config).__name__}")
    if depth(config) > MAX_DEPTH:
        raise ConfigShapeError(f"{what}: nested more than {MAX_DEPTH} levels deep")
    try:
        level, prefix = config, ""
        while True:  # the sub-config ``sglang.context.text_config`` picks, as deep as it goes
            _check_level(level, prefix)
            key = next((k for k in TEXT_SUBCONFIG_KEYS if level.get(k) is not None), None)
            sub = values.mapping(level, key, prefix) if key else None
            if key is None or sub is None:
                break
            prefix = f"{prefix}.{key}" if prefix else key
            if key != "thinker_config":
                _check_level(sub, prefix)
                break
            level = sub
    except ConfigShapeError as exc:
        raise ConfigShapeError(f"{what}: {exc}") from None
    return config


def check_configs(target: Any, draft: Any = None) -> None:
    """Both configs of a launch (the draft only when given), named ``target``/``draft config``."""
    check_model_config(target, "target config")
    if draft is not None:
        check_model_config(draft, "draft config")
