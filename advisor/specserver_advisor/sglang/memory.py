"""GPU memory, KV pool and max-running-requests planning, following SGLang 0.5.23's accounting.

Called by ``plan``, the operator (computed ``--max-running-requests``), lint rule SPEC009 and
the simulated engine. Pure: shapes and GPU facts in, numbers out.

Startup order modelled (``Scheduler.init_model_worker``): load target weights, load draft
weights, then size the KV pool from what is free minus
``pre_load_free * (1 - mem_fraction_static)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from specserver_advisor.gpus import Gpu
from specserver_advisor.sglang.modelshape import ModelShape

GIB = 1024**3
KV_DTYPE_BYTES = {
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "bf16": 2,
    "bfloat16": 2,
    "fp16": 2,
    "float16": 2,
    "mxfp8": 1,
}
#: Algorithms whose draft keeps KV beside the target's (cell size grows).
DRAFT_KV_ALGORITHMS = {"EAGLE", "EAGLE3", "STANDALONE", "FROZEN_KV_MTP", "DFLASH", "DSPARK"}
#: Algorithms whose draft KV bytes follow ``--speculative-draft-kv-cache-dtype``.
DRAFT_DTYPE_SIZED_ALGORITHMS = {"DFLASH", "DSPARK"}


def kv_dtype_bytes(kv_cache_dtype: str | None, shape: ModelShape) -> int:
    """Bytes per KV element (``configure_kv_cache_dtype``).

    ``auto`` is the model's compute dtype, FP8 checkpoints included (their weights are FP8, their
    activations and KV are not), unless the quant config says ``kv_cache_quant_algo: FP8``.
    """
    if not kv_cache_dtype or kv_cache_dtype == "auto":
        return 1 if shape.kv_cache_fp8 else shape.model_dtype_bytes
    if kv_cache_dtype in KV_DTYPE_BYTES:
        return KV_DTYPE_BYTES[kv_cache_dtype]
    if "fp4" in kv_cache_dtype:
        return 1  # approximate: FP4 recipes carry scales; treat as one byte
    raise ValueError(f"unknown --kv-cache-dtype {kv_cache_dtype!r}")


def kv_cell_bytes(shape: ModelShape, dtype_bytes: int, tp_size: int = 1, dcp_size: int = 1) -> int:
    """KV bytes per token per GPU (``_compute_cell_size`` / ``calculate_mla_kv_cache_dim``)."""
    if shape.is_mla:
        return (shape.kv_lora_rank + shape.qk_rope_head_dim) * shape.num_layers * dtype_bytes
    heads_per_rank = max(1, shape.num_kv_heads // max(1, tp_size // dcp_size))
    return heads_per_rank * (shape.head_dim + shape.v_head_dim) * shape.num_layers * dtype_bytes


def draft_layers(draft: ModelShape, mtp: bool) -> int:
    """Layers of the draft that keep KV: nextn layers for MTP checkpoints, else all."""
    if mtp:
        return max(1, draft.nextn_layers)
    return draft.num_layers


def draft_weight_bytes_mtp(target: ModelShape) -> int:
    """Weights of an MTP draft loaded from the target checkpoint: its nextn decoder layers."""
    per_layer = target.attention_params_per_layer()
    if target.is_moe:
        per_layer += (target.num_experts + target.shared_experts) * target.expert_params()
    else:
        per_layer += target.dense_mlp_params()
    # eh_proj (2h -> h) per MTP layer; embedding and head are shared with the target.
    per_layer += 2 * target.hidden_size * target.hidden_size
    return max(1, target.nextn_layers) * per_layer * target.dtype_bytes


def draft_weight_bytes_separate(draft: ModelShape) -> int:
    """Weights of a separate draft (EAGLE/EAGLE3 head or small model) from its shapes."""
    total = draft.total_params()
    if "eagle3" in draft.architecture.lower():
        total += 3 * draft.hidden_size * draft.hidden_size  # fc over three target layers
        # Its first layer's q/k/v read [embedding, hidden] (2h wide).
        total += draft.hidden_size * (draft.num_heads + 2 * draft.num_kv_heads) * draft.head_dim
    return total * draft.dtype_bytes


@dataclass(frozen=True)
class MemorySettings:
    """What ``handle_gpu_memory_settings`` resolves for a GPU."""

    chunked_prefill_size: int
    cuda_graph_max_bs: int
    mem_fraction_static: float
    reserved_mb: float
    source: str


@dataclass(frozen=True)
class GraphSettings:
    """The CUDA-graph phases the reserve counts (``cuda_graph_config`` after parsing)."""

    decode: bool = True
    prefill: bool = False
    prefill_max_bs: int | None = None

    @classmethod
    def from_values(
        cls, values: dict[str, object], speculative: bool = False, mla: bool = False
    ) -> GraphSettings:
        """From parsed flags: ``--disable-cuda-graph``, the per-phase switches and backends."""
        decode = prefill = True
        prefill = DEFAULT_PREFILL_GRAPH
        if values.get("disable_cuda_graph"):
            decode = prefill = False
        if values.get("disable_prefill_cuda_graph"):
            prefill = False
        if values.get("disable_decode_cuda_graph"):
            decode = False
        if values.get("cuda_graph_backend_decode") is not None:
            decode = values["cuda_graph_backend_decode"] != "disabled"
        if values.get("cuda_graph_backend_prefill") is not None:
            prefill = values["cuda_graph_backend_prefill"] != "disabled"
        max_bs = values.get("cuda_graph_max_bs_prefill")
        return cls(decode, prefill, int(max_bs) if isinstance(max_bs, int) else None)


#: Whether the prefill CUDA graph is captured when no flag says otherwise.
DEFAULT_PREFILL_GRAPH = False


def prefill_graph_batch_sizes(max_bs: int) -> list[int]:
    """``generate_prefill_cuda_graph_batch_sizes``: captured token counts up to ``max_bs``."""
    sizes = (
        list(range(4, 33, 4))
        + list(range(48, 257, 16))
        + list(range(288, 513, 32))
        + list(range(576, 1024 + 1, 64))
        + list(range(1280, 4096 + 1, 256))
        + list(range(4608, max_bs + 1, 512))
    )
    return [s for s in sizes if s <= max_bs]


def memory_settings(
    gpu: Gpu,
    tp_size: int = 1,
    pp_size: int = 1,
    mem_fraction_static: float | None = None,
    chunked_prefill_size: int | None = None,
    cuda_graph_max_bs: int | None = None,
    mla: bool = False,
    max_running_requests: int | None = None,
    graphs: GraphSettings | None = None,
    attn_dp_size: int = 1,
) -> MemorySettings:
    """SGLang's GPU-memory tiers and mem-fraction-static heuristic (non-PD).

    ``max_running_requests`` is the user's explicit ``--max-running-requests``: a default decode
    graph batch larger than it is cut to it, and the graph reserve with it. (The speculative
    reset to 48 happens later in SGLang's pipeline and does not cut it.)
    """
    graphs = graphs or GraphSettings()
    mem = gpu.memory_mib
    if mem < 20 * 1024:
        chunk, bs = 2048, 8
    elif mem < 35 * 1024:
        chunk, bs = 4096, 48 if tp_size < 4 else 160
    elif mem < 60 * 1024:
        chunk, bs = 4096, 32 if tp_size < 4 else 160
    elif mem < 160 * 1024:
        chunk, bs = 8192, 256 if tp_size < 4 else 512
    else:
        chunk, bs = 16384, 512
    chunk = chunked_prefill_size or chunk
    if cuda_graph_max_bs is not None:
        bs = cuda_graph_max_bs
    elif max_running_requests is not None and bs > max_running_requests:
        bs = max_running_requests
    reserved = 512 + max(chunk, 2048) * 1.5 + tp_size * pp_size / 8 * 1024
    if graphs.decode:
        reserved += bs * 2
    if attn_dp_size > 1:
        reserved += bs * attn_dp_size * 3
        if bs > 300:
            reserved += bs * attn_dp_size * 1.5
    if graphs.prefill:
        if mla:
            reserved += 1.5 * 1024
        else:
            prefill_max = graphs.prefill_max_bs or chunk
            reserved += len(prefill_graph_batch_sizes(prefill_max)) * 8
    if mem > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    if mem_fraction_static is not None:
        return MemorySettings(chunk, bs, mem_fraction_static, reserved, "user")
    return MemorySettings(chunk, bs, round((mem - reserved) / mem, 3), reserved, "heuristic")


def settings_from_values(
    gpu: Gpu, values: dict[str, Any], speculative: bool, mla: bool
) -> MemorySettings:
    """``memory_settings`` for a launch's parsed flags, as ``handle_gpu_memory_settings`` reads
    them: --mem-fraction-static, --chunked-prefill-size, --cuda-graph-max-bs-decode, an explicit
    --max-running-requests, the graph switches, tp/pp and attention-DP sizes."""
    return memory_settings(
        gpu,
        tp_size=int(values.get("tp_size") or 1),
        pp_size=int(values.get("pp_size") or 1),
        mem_fraction_static=values.get("mem_fraction_static"),
        chunked_prefill_size=values.get("chunked_prefill_size"),
        cuda_graph_max_bs=values.get("cuda_graph_max_bs_decode"),
        mla=mla,
        max_running_requests=values.get("max_running_requests"),
        graphs=GraphSettings.from_values(values, speculative=speculative, mla=mla),
        attn_dp_size=int(values.get("attn_dp_size") or 1),
    )


@dataclass
class MemoryPlan:
    """KV pool sizes and request capacity for one launch on one GPU type."""

    settings: MemorySettings
    pre_load_free_gib: float
    target_weight_gib: float
    draft_weight_gib: float
    cell_bytes_target: int
    cell_bytes_with_draft: int
    kv_pool_tokens_without_draft: int
    kv_pool_tokens_with_draft: int
    error: str | None = None
    notes: list[str] = field(default_factory=list)


def plan_memory(
    gpu: Gpu,
    target: ModelShape,
    target_weight_bytes: int,
    draft: ModelShape | None,
    draft_weight_bytes: int,
    algorithm: str | None,
    tp_size: int = 1,
    kv_cache_dtype: str | None = None,
    draft_kv_cache_dtype: str | None = None,
    mem_fraction_static: float | None = None,
    draft_is_mtp: bool = False,
    page_size: int = 1,
    settings: MemorySettings | None = None,
) -> MemoryPlan:
    """Predict the KV pool with and without the draft loaded.

    Args:
        gpu: the card (one of ``tp_size`` identical ones).
        target: the target's shape; ``target_weight_bytes`` its checkpoint size.
        draft: the draft's shape (None for NGRAM/UNO/no speculation).
        draft_weight_bytes: the draft's checkpoint size (0 when none).
        algorithm: the resolved algorithm, or None without speculation.
        draft_is_mtp: the draft is the target's own MTP layers.
        settings: SGLang's memory settings for the whole launch (``settings_from_values``:
            chunked prefill and decode-graph sizes change the reserve and so the fraction);
            None: the defaults for ``tp_size`` and ``mem_fraction_static`` alone.
    """
    if settings is None:
        settings = memory_settings(
            gpu, tp_size, mem_fraction_static=mem_fraction_static, mla=target.is_mla
        )
    pre_free = gpu.memory_gib - gpu.context_overhead_gib
    t_w = target_weight_bytes / tp_size / GIB
    d_w = draft_weight_bytes / tp_size / GIB
    slack = pre_free * (1 - settings.mem_fraction_static)
    t_bytes = kv_dtype_bytes(kv_cache_dtype, target)
    cell = kv_cell_bytes(target, t_bytes, tp_size)
    cell_with = cell
    if draft is not None and algorithm in DRAFT_KV_ALGORITHMS:
        extra = cell * draft_layers(draft, draft_is_mtp) / target.num_layers
        # The pool's draft share is sized in the target's KV dtype (pool_configurator.py);
        # --speculative-draft-kv-cache-dtype changes it only for DFLASH-family drafts
        # (draft_kv_budget.py). For EAGLE-family drafts its saving is free device memory.
        if algorithm in DRAFT_DTYPE_SIZED_ALGORITHMS:
            d_bytes = kv_dtype_bytes(draft_kv_cache_dtype or kv_cache_dtype, target)
            extra = extra * d_bytes / t_bytes
        cell_with = cell + int(extra)
    budget_without = (pre_free - t_w - slack) * GIB
    budget_with = (pre_free - t_w - d_w - slack) * GIB
    plan = MemoryPlan(
        settings=settings,
        pre_load_free_gib=pre_free,
        target_weight_gib=t_w,
        draft_weight_gib=d_w,
        cell_bytes_target=cell,
        cell_bytes_with_draft=cell_with,
        kv_pool_tokens_without_draft=_tokens(budget_without, cell, page_size),
        kv_pool_tokens_with_draft=_tokens(budget_with, cell_with, page_size),
    )
    needed = pre_free - t_w - d_w
    if plan.kv_pool_tokens_with_draft <= 0:
        floor_mfs = 1 - needed / pre_free if pre_free else 1.0
        plan.error = (
            "Loaded weights leave no GPU memory for the KV cache under "
            f"--mem-fraction-static={settings.mem_fraction_static}. Raise --mem-fraction-static "
            f"above {max(0.0, floor_mfs):.3f}. If using speculative decoding, draft weights are "
            "now counted."
        )
        if floor_mfs >= 1:
            # SGLang's text asks for a fraction no launch can give: say what would help.
            plan.error += (
                f" (No fraction can: the weights, {t_w + d_w:.1f} GiB a GPU, do not fit the "
                f"{pre_free:.1f} GiB free before loading; use more GPUs (--tp-size), a card "
                "with more memory, or smaller (quantized) weights.)"
            )
    return plan


def _tokens(budget_bytes: float, cell: int, page_size: int) -> int:
    # ``not > 0`` and ``isfinite``: a --mem-fraction-static of nan or inf leaves no pool (the
    # plan's error names the flag) instead of int(nan) raising.
    if not budget_bytes > 0 or not math.isfinite(budget_bytes) or cell <= 0:
        return 0
    tokens = int(budget_bytes // cell)
    return tokens - tokens % max(1, page_size)


def sglang_max_running_requests(
    pool_tokens: int, context_len: int, requested: int | None, dp: int = 1
) -> int:
    """``resolve_max_num_reqs``: what the scheduler really admits per DP worker."""
    if pool_tokens <= 0:
        return 0
    if requested is None:
        by_ctx = int(pool_tokens / max(1, context_len) * 512)
        return min(max(2048, min(by_ctx, 4096)), pool_tokens // 2)
    return min(requested // max(1, dp), pool_tokens // 2)


def requests_that_fit(
    pool_tokens: int,
    input_len: int,
    output_len: int,
    reserved_tokens: int = 0,
    draft_slots: int = 0,
) -> int:
    """How many requests of one shape the pool holds at once, with their decode-step slots.

    ``draft_slots`` is the per-request KV a speculative step allocates (``max(steps*topk,
    draft_tokens)``), reserved twice by SGLang's allocation sizing.
    """
    per_request = input_len + output_len + reserved_tokens + 2 * draft_slots
    return max(0, pool_tokens // max(1, per_request))
