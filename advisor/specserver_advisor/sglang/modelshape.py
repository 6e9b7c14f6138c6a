"""The shape of a model, read from its HF ``config.json``: layers, heads, MLA, MoE, parameters.

Used by the memory planner (KV bytes per token, weight bytes) and the performance model
(bytes read and FLOPs per token). Pure; configs come in as dicts from ``loaders``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from functools import wraps
from typing import Any, TypeVar

from specserver_advisor.sglang import configvalues
from specserver_advisor.sglang.configvalues import ConfigShapeError
from specserver_advisor.sglang.context import text_config

DTYPE_BYTES = {
    "float32": 4,
    "float": 4,
    "bfloat16": 2,
    "float16": 2,
    "half": 2,
    "fp8": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "int8": 1,
}


_T = TypeVar("_T")


def _memo(method: Callable[[Any], _T]) -> Callable[[Any], _T]:
    """A shape's derived count, computed once per shape (the performance model asks for it on
    every forward of every load: ``plan --search-shape`` plans ~130 loads x ~140 shapes).

    Kept in the instance's ``__dict__`` (a frozen dataclass's fields are untouched, so its
    equality, hash and ``replace`` are as before)."""
    name = "_memo_" + method.__name__

    @wraps(method)
    def cached(self: Any) -> _T:
        found = self.__dict__.get(name, cached)
        if found is cached:
            found = method(self)
            self.__dict__[name] = found
        return found  # type: ignore[no-any-return]

    return cached


def _int(cfg: dict[str, Any], *keys: str, default: int | None = None, minimum: int = 0) -> int:
    """The first of ``keys`` that is set (``configvalues.integer``: an integer >= minimum)."""
    for key in keys:
        value = configvalues.integer(cfg, key, minimum)
        if value is not None:
            return value
    if default is None:
        raise ConfigShapeError(f"config has none of {', '.join(keys)}")
    return default


@dataclass(frozen=True)
class ModelShape:
    """What the planner and the performance model need to know about a model."""

    architecture: str
    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    v_head_dim: int
    vocab_size: int
    intermediate_size: int
    dtype_bytes: int
    # MLA (DeepSeek-style): KV is a compressed latent, not per-head K and V.
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    # Mixture of experts.
    num_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate_size: int = 0
    shared_experts: int = 0
    dense_layers: int = 0
    nextn_layers: int = 0
    draft_vocab_size: int = 0
    tie_embeddings: bool = False
    checkpoint_fp8: bool = False
    #: The checkpoint's quant config says ``kv_cache_quant_algo: FP8`` (KV ``auto`` is FP8).
    kv_cache_fp8: bool = False
    #: Bytes of the model's compute dtype (``torch_dtype``), which KV ``auto`` otherwise uses.
    model_dtype_bytes: int = 2

    def __hash__(self) -> int:
        """The fields' hash, computed once: the performance model's caches key on it at every
        forward of every load a plan predicts."""
        found = self.__dict__.get("_fields_hash")
        if found is None:
            found = hash(tuple(getattr(self, f.name) for f in fields(self)))
            self.__dict__["_fields_hash"] = found
        return int(found)

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    @_memo
    def moe_layers(self) -> int:
        return self.num_layers - self.dense_layers if self.is_moe else 0

    @_memo
    def attention_params_per_layer(self) -> int:
        h = self.hidden_size
        if self.is_mla:
            # q (via lora or direct), kv latent projections, output projection: approximate.
            q = h * self.num_heads * (self.head_dim + self.qk_rope_head_dim)
            kv = h * (self.kv_lora_rank + self.qk_rope_head_dim)
            kv += self.kv_lora_rank * self.num_heads * (self.head_dim + self.v_head_dim)
            o = self.num_heads * self.v_head_dim * h
            return q + kv + o
        q = h * self.num_heads * self.head_dim
        kv = h * self.num_kv_heads * (self.head_dim + self.v_head_dim)
        o = self.num_heads * self.v_head_dim * h
        return q + kv + o

    @_memo
    def expert_params(self) -> int:
        """Parameters of one routed expert (gate, up, down)."""
        return 3 * self.hidden_size * self.moe_intermediate_size

    @_memo
    def dense_mlp_params(self) -> int:
        return 3 * self.hidden_size * self.intermediate_size

    @_memo
    def embedding_params(self) -> int:
        vocab_out = self.draft_vocab_size or self.vocab_size
        emb = self.vocab_size * self.hidden_size
        head = 0 if self.tie_embeddings else vocab_out * self.hidden_size
        return emb + head

    @_memo
    def layer_params_always_read(self) -> int:
        """Per-decode-step weights read regardless of routing: attention, dense MLPs, shared."""
        attn = self.attention_params_per_layer() * self.num_layers
        dense_mlp = self.dense_mlp_params() * (
            self.dense_layers if self.is_moe else self.num_layers
        )
        shared = self.shared_experts * self.expert_params() * self.moe_layers
        return attn + dense_mlp + shared

    @_memo
    def total_params(self) -> int:
        routed = self.num_experts * self.expert_params() * self.moe_layers
        return self.layer_params_always_read() + routed + self.embedding_params()

    @_memo
    def active_params_per_token(self) -> int:
        """Parameters a single token touches (for FLOPs): dense part plus its top-k experts."""
        routed = self.experts_per_token * self.expert_params() * self.moe_layers
        head = (self.draft_vocab_size or self.vocab_size) * self.hidden_size
        return self.layer_params_always_read() + routed + head

    @_memo
    def weight_bytes(self) -> int:
        return self.total_params() * self.dtype_bytes


def _dtype_bytes(cfg: dict[str, Any]) -> tuple[int, bool]:
    quant = configvalues.mapping(cfg, "quantization_config") or {}
    method = str(quant.get("quant_method", "")).lower()
    if method == "fp8" or "fp8" in str(quant.get("fmt", "")).lower():
        return 1, True
    dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16").lower()
    return DTYPE_BYTES.get(dtype, 2), False


def shape_from_config(config: dict[str, Any]) -> ModelShape:
    """Read a ModelShape from an HF config (multimodal configs: their text sub-config).

    Raises:
        ConfigShapeError: when a required field is missing; the message names it.
    """
    cfg = text_config(config)
    archs = configvalues.architectures(config) or configvalues.architectures(cfg) or ["unknown"]
    hidden = _int(cfg, "hidden_size", "n_embd", "d_model", minimum=1)
    heads = _int(cfg, "num_attention_heads", "n_head", minimum=1)
    layers = _int(cfg, "num_hidden_layers", "n_layer", "num_layers", minimum=1)
    kv_heads = _int(cfg, "num_key_value_heads", "num_kv_heads", default=heads, minimum=1)
    head_dim = _int(cfg, "head_dim", default=max(1, hidden // heads), minimum=1)
    dtype_bytes, fp8 = _dtype_bytes(cfg)
    kv_lora = _int(cfg, "kv_lora_rank", default=0)
    num_experts = _int(cfg, "n_routed_experts", "num_experts", "num_local_experts", default=0)
    return ModelShape(
        architecture=str(archs[0]),
        num_layers=layers,
        hidden_size=hidden,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=_int(cfg, "qk_nope_head_dim", default=head_dim) if kv_lora else head_dim,
        v_head_dim=_int(cfg, "v_head_dim", default=head_dim),
        vocab_size=_int(cfg, "vocab_size", minimum=1),
        intermediate_size=_int(cfg, "intermediate_size", "ffn_dim", default=4 * hidden),
        dtype_bytes=dtype_bytes,
        kv_lora_rank=kv_lora,
        qk_rope_head_dim=_int(cfg, "qk_rope_head_dim", default=0),
        num_experts=num_experts,
        experts_per_token=_int(cfg, "num_experts_per_tok", "moe_topk", default=0)
        if num_experts
        else 0,
        moe_intermediate_size=_int(cfg, "moe_intermediate_size", default=0) if num_experts else 0,
        shared_experts=_int(cfg, "n_shared_experts", "num_shared_experts", default=0),
        dense_layers=_int(cfg, "first_k_dense_replace", default=0) if num_experts else 0,
        nextn_layers=_int(cfg, "num_nextn_predict_layers", default=0),
        draft_vocab_size=_int(cfg, "draft_vocab_size", default=0),
        tie_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        checkpoint_fp8=fp8,
        kv_cache_fp8=_kv_cache_fp8(cfg),
        model_dtype_bytes=DTYPE_BYTES.get(
            str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16").lower(), 2
        ),
    )


def _kv_cache_fp8(cfg: dict[str, Any]) -> bool:
    quant = configvalues.mapping(cfg, "quantization_config") or {}
    algo = quant.get("kv_cache_quant_algo")
    return isinstance(algo, str) and algo.upper() == "FP8"


#: ``--dtype`` values SGLang 0.5.23 accepts, as bytes per element (``_STR_DTYPE_TO_TORCH_DTYPE``).
LAUNCH_DTYPE_BYTES = {"half": 2, "float16": 2, "bfloat16": 2, "float": 4, "float32": 4}


def launch_dtype_bytes(shape: ModelShape, dtype: str | None) -> int:
    """Bytes of the dtype SGLang computes in under ``--dtype`` (``_get_and_verify_dtype``).

    ``auto`` keeps the config's dtype but runs a float32 checkpoint in float16; an explicit
    dtype wins (float16 and bfloat16 are the same two bytes).
    """
    flag = (dtype or "auto").lower()
    if flag == "auto":
        return 2 if shape.model_dtype_bytes == 4 else shape.model_dtype_bytes
    return LAUNCH_DTYPE_BYTES[flag]


def with_launch_dtype(shape: ModelShape, dtype: str | None) -> ModelShape:
    """``shape`` as loaded under ``--dtype``: its weights (unless FP8-quantized) and KV ``auto``."""
    loaded = launch_dtype_bytes(shape, dtype)
    weights = shape.dtype_bytes if shape.checkpoint_fp8 else loaded
    return replace(shape, dtype_bytes=weights, model_dtype_bytes=loaded)


def mtp_draft_shape(target: ModelShape) -> ModelShape:
    """The draft SGLang loads for NEXTN/EAGLE on an MTP checkpoint, as one forward sees it.

    ``DeepseekV3ForCausalLMNextN`` (and its kin) builds ``num_nextn_predict_layers`` decoder
    layers (at least one), each placed after the target's layers: past ``first_k_dense_replace``,
    so an MoE target's MTP layer is an MoE layer routed like the target's. The embedding and LM
    head are the target's (``set_embed_and_head``), so a draft step still reads the full head.
    """
    return replace(
        target,
        num_layers=max(1, target.nextn_layers),
        dense_layers=0,
        draft_vocab_size=0,
    )


def mtp_draft_forward_bytes(target: ModelShape, layer_bytes: int) -> int:
    """Bytes a forward of the MTP draft counts as its weights: its own layers (``layer_bytes``,
    what it loads) and the target's embedding and head it shares (the head is read every step;
    ``perfmodel.forward_time`` drops the embedding rows, which are looked up, not streamed)."""
    return layer_bytes + target.embedding_params() * target.dtype_bytes
