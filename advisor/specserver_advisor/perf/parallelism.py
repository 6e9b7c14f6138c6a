"""The fixed costs of a forward that depend on the card and the GPU count, not the bytes streamed.

``perf.model.forward_time`` adds them to the slower of memory and compute.

The layers' small kernels. A decode step under a CUDA (or HIP) graph replays every kernel of
every layer; at decode most of them are latency-bound: norms, rotary and the KV store, the
router and its top-k, the expert-block alignment, the fused MoE at a few tokens per expert, the
one-query attention (GQA, or MLA's absorbed projections and split-KV decode), the FP8
activation quantisation in front of each FP8 GEMM, sampling. Such a kernel takes the card
generation's minimum kernel time (the launch gap inside the graph, the ramp and the tail of a
grid that does not fill the card) however fast the card computes: a card of ten times the
TFLOPS does not run a top-k over 8 tokens ten times faster. ``layer_kernels`` counts them by
mechanism from the model's shape (``ModelShape``: MLA or GQA, MoE with or without shared
experts, an FP8 checkpoint), and ``Calibration.kernel_floor_s`` (NVIDIA),
``cdna3_kernel_floor_s`` and ``cdna4_kernel_floor_s`` (AMD's HIP graphs, per generation) price
each.

On the slow cards of the field figures (L4, GB10) the same kernels do real work at the card's
rate (attention over the context, activations over the intermediate): there the fitted
per-layer work (``launch_s_per_dense_layer`` / ``launch_s_per_moe_layer`` at
``REFERENCE_TFLOPS``, each rank running its 1/tp share of the sharded kernels) is larger than
the floor. A layer pays the larger of the two: its kernels' floor or its small-kernel work.

Tensor parallelism's all-reduces (two per layer: after attention and after the MLP): inside a
node SGLang's custom all-reduce (one-shot at small messages: each GPU reads its peers'
buffers over the fabric and reduces locally; two-shot above ``ONE_SHOT_MAX_BYTES``), NCCL above
the custom kernel's buffer (``CUSTOM_MAX_BYTES``) and whenever the group spans nodes, where the
inter-node link (InfiniBand or RoCE, ``internode_gbs``) and its latency bind. The custom kernel
does not run at all where SGLang 0.5.23 turns it off (``custom_allreduce_off``: the flag, more
than two GPUs without NVLink, no peer-to-peer access, a group size neither kernel supports):
there every all-reduce is NCCL's.

Expert parallelism (all-to-all dispatch and combine, DeepEP) and DP attention are not modelled
here: ``perf.unmodelled`` names them in the plan's notes with the error they imply.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Protocol

from specserver_advisor.gpus import Gpu
from specserver_advisor.perf.constants import Calibration
from specserver_advisor.sglang.modelshape import ModelShape

#: The dense BF16 rate the fitted per-layer work is stated at (TFLOP/s): a card of twice the
#: rate runs a layer's small-kernel work in half the time (never below the kernels' floor).
REFERENCE_TFLOPS = 100.0
#: All-reduces per decoder layer under tensor parallelism (attention output, MLP output).
ALLREDUCES_PER_LAYER = 2
#: SGLang's custom all-reduce: its one-shot kernel up to 256 KiB on 8 GPUs, two-shot above, and
#: the registered buffer's size (``custom_all_reduce`` max_size, 8 MiB); NCCL past it.
ONE_SHOT_MAX_BYTES = 256 * 1024
CUSTOM_MAX_BYTES = 8 * 1024 * 1024
#: The group sizes SGLang's legacy custom all-reduce supports (``CustomAllreduce.
#: _SUPPORTED_WORLD_SIZES``); the CUDA JIT kernel (v2, the default) takes 2-8 GPUs in a node
#: on every arch (``configs/custom_all_reduce_v2.py``).
CUSTOM_ALLREDUCE_SIZES = (2, 4, 6, 8)
CUSTOM_V2_SIZES = tuple(range(2, 9))
#: The fused-MoE kernel's block of rows per expert at decode (the tuned configs' BLOCK_SIZE_M
#: for small M): an expert's few tokens are padded to it and the padding rows are computed.
MOE_BLOCK_M = 16

#: A layer's small (non-GEMM) kernels at decode and whether each runs on the full hidden state
#: (True: the same work on every TP rank) or on the rank's shard, for the fitted small-kernel
#: work on slow cards. SGLang 0.5.23's ``LlamaDecoderLayer`` (Qwen3's is the same plus a
#: per-head q/k norm, also sharded): the two RMSNorms (fused residual add) on the hidden state;
#: rotary, the KV store and attention over the rank's ``num_heads / tp`` heads; SiLU-and-mul
#: over its ``intermediate / tp``.
DENSE_SMALL_KERNELS: tuple[tuple[str, bool], ...] = (
    ("input RMSNorm", True),
    ("rotary", False),
    ("KV store", False),
    ("attention", False),
    ("post-attention RMSNorm", True),
    ("SiLU and mul", False),
)
#: An MoE layer's: the router is a ``ReplicatedLinear`` and every rank selects the top-k and
#: aligns the blocks of all tokens and combines the experts' outputs on the full hidden state;
#: the fused experts' activation runs over the rank's slice of each expert's intermediate.
MOE_SMALL_KERNELS: tuple[tuple[str, bool], ...] = (
    ("input RMSNorm", True),
    ("rotary", False),
    ("KV store", False),
    ("attention", False),
    ("post-attention RMSNorm", True),
    ("router", True),
    ("top-k", True),
    ("block alignment", True),
    ("experts' activation", False),
    ("combine", True),
)

#: The kernels of one decode forward, by mechanism (our count of SGLang 0.5.23's decode path).
#: GQA attention block: input RMSNorm, the QKV GEMM, rotary, the KV store, the decode
#: attention, the output GEMM. MLA (DeepSeek): the fused q_a/kv_a GEMM, the two latent norms,
#: q_b, the absorbed k bmm, rotary, the KV store, the split-KV decode and its merge, the
#: absorbed v bmm, the output GEMM.
GQA_ATTENTION_KERNELS = 6
MLA_ATTENTION_KERNELS = 12
#: Qwen3's per-head q and k RMSNorms.
QK_NORM_KERNELS = 2
QK_NORM_ARCHS = ("Qwen3ForCausalLM", "Qwen3MoeForCausalLM")
#: The dense MLP: post-attention RMSNorm, gate_up GEMM, SiLU-and-mul, down GEMM.
DENSE_MLP_KERNELS = 4
#: The MoE block: post-attention RMSNorm, the router GEMM, its top-k (grouped and biased for
#: DeepSeek), the block alignment, the fused experts' two GEMMs and activation, the weighted
#: sum; shared experts add their gate_up, activation and down.
MOE_KERNELS = 8
SHARED_EXPERT_KERNELS = 3
#: GEMMs per block (each FP8 GEMM quantises its activation first: one more kernel each).
GQA_ATTENTION_GEMMS = 2
MLA_ATTENTION_GEMMS = 3
DENSE_MLP_GEMMS = 2
MOE_GEMMS = 2
SHARED_EXPERT_GEMMS = 2
#: Once per forward: the embedding, the final norm, the LM head and sampling's few kernels.
FORWARD_KERNELS = 6
#: Kernels per layer the old launch floor counted (kept for its callers' tests).
DENSE_LAYER_KERNELS = GQA_ATTENTION_KERNELS + DENSE_MLP_KERNELS
MOE_LAYER_KERNELS = GQA_ATTENTION_KERNELS + MOE_KERNELS + 2


class Parallel(Protocol):
    """What these costs read of a ``perfmodel.Scenario``."""

    @property
    def gpu(self) -> Gpu: ...
    @property
    def tp_size(self) -> int: ...
    @property
    def nnodes(self) -> int: ...
    @property
    def clock_scale(self) -> float: ...
    @property
    def custom_allreduce_disabled(self) -> bool: ...


def kernel_floor_s(gpu: Gpu, cal: Calibration) -> float:
    """The shortest a latency-bound kernel takes in a graph replay on ``gpu``'s generation."""
    if gpu.generation == "cdna4":
        return cal.cdna4_kernel_floor_s
    if gpu.generation == "cdna3":
        return cal.cdna3_kernel_floor_s
    return cal.kernel_floor_s


def layer_kernels(shape: ModelShape) -> tuple[int, int]:
    """(kernels of a dense layer, kernels of an MoE layer) of ``shape`` at decode."""
    mla = shape.is_mla
    attention = MLA_ATTENTION_KERNELS if mla else GQA_ATTENTION_KERNELS
    if shape.architecture in QK_NORM_ARCHS:
        attention += QK_NORM_KERNELS
    gemms = MLA_ATTENTION_GEMMS if mla else GQA_ATTENTION_GEMMS
    dense = attention + DENSE_MLP_KERNELS
    dense_gemms = gemms + DENSE_MLP_GEMMS
    moe = attention + MOE_KERNELS
    moe_gemms = gemms + MOE_GEMMS
    if shape.shared_experts:
        moe += SHARED_EXPERT_KERNELS
        moe_gemms += SHARED_EXPERT_GEMMS
    if shape.checkpoint_fp8:
        dense += dense_gemms
        moe += moe_gemms
    return dense, moe


def eager_forward_launch_s(shape: ModelShape, cal: Calibration) -> float:
    """Host time to launch one forward of ``shape`` kernel by kernel from Python (no graph).

    SGLang captures CUDA graphs for decode (and the speculative verify and draft) only: a
    prefill forward launches each of its layers' kernels (``layer_kernels``) and the forward's
    own at ``Calibration.eager_launch_s`` each, and the GPU cannot finish before the host
    has launched the last. Card-independent: it is Python and the launch path, not the GPU.
    """
    dense, moe = layer_kernels(shape)
    kernels = (shape.num_layers - shape.moe_layers) * dense + shape.moe_layers * moe
    return float((kernels + FORWARD_KERNELS) * cal.eager_launch_s)


def layer_launch_s(scn: Parallel, shape: ModelShape, cal: Calibration) -> float:
    """The layers' small kernels of one forward under a graph, on one GPU of the group.

    Each layer pays the larger of its kernels' floor (``layer_kernels`` x ``kernel_floor_s``:
    latency-bound, the same on a fast card as on a slow one of the generation) and its fitted
    small-kernel work at the card's compute rate (a locked clock slows it by its square root,
    the fit on the L4 at 900 MHz; under tensor parallelism each GPU runs the sharded kernels on
    1/tp of the work, ``tp_work_share``). The forward's own kernels (embedding, final norm,
    LM head, sampling) pay the floor once.
    """
    return _layer_launch_s(scn.gpu, scn.tp_size, scn.clock_scale, shape, cal)


@lru_cache(maxsize=1024)
def _layer_launch_s(
    gpu: Gpu, tp: int, clock_scale: float, shape: ModelShape, cal: Calibration
) -> float:
    """``layer_launch_s`` once per card, group, clock and shape: it does not depend on the
    batch (every forward of every load of a plan asks)."""
    floor = kernel_floor_s(gpu, cal)
    rate = REFERENCE_TFLOPS / gpu.bf16_tflops / clock_scale**0.5
    dense_work = cal.launch_s_per_dense_layer * rate * _share(DENSE_SMALL_KERNELS, tp)
    moe_work = cal.launch_s_per_moe_layer * rate * _share(MOE_SMALL_KERNELS, tp)
    dense_kernels, moe_kernels = layer_kernels(shape)
    dense = max(dense_kernels * floor, dense_work)
    moe = max(moe_kernels * floor, moe_work)
    layers = (shape.num_layers - shape.moe_layers) * dense + shape.moe_layers * moe
    return float(layers + FORWARD_KERNELS * floor)


def tp_work_share(kernels: tuple[tuple[str, bool], ...], scn: Parallel) -> float:
    """The share of a layer's small-kernel work one GPU of the TP group runs (1 at TP 1).

    Each small kernel counts alike (at decode they are latency-bound, not work-bound by size):
    the whole ones fully, the sharded ones at 1/tp.
    """
    return _share(kernels, scn.tp_size)


def _share(kernels: tuple[tuple[str, bool], ...], tp: int) -> float:
    whole = sum(1 for _, full in kernels if full)
    sharded = len(kernels) - whole
    return (whole + sharded / max(1, tp)) / len(kernels)


def moe_padded_rows(shape: ModelShape, tokens: float, touched: float) -> float:
    """Rows the fused-MoE GEMMs compute per MoE layer: each touched expert's tokens padded up
    to ``MOE_BLOCK_M`` (a few tokens per expert compute a whole block)."""
    if not shape.is_moe or touched <= 0:
        return 0.0
    per_expert = tokens * shape.experts_per_token / touched
    blocks = max(1.0, -(-per_expert // MOE_BLOCK_M))
    return float(touched * blocks * MOE_BLOCK_M)


def custom_allreduce_off(gpu: Gpu, tp: int, nnodes: int, disabled: bool) -> str | None:
    """Why SGLang 0.5.23 runs no custom all-reduce for a TP group of ``tp`` GPUs on ``gpu``
    over ``nnodes`` nodes (None: it runs; TP 1 has no all-reduce to run).

    ``dispatch_custom_allreduce``: on CUDA the JIT kernel (v2) first, which takes any group of
    2-8 GPUs that are all one NVLink hop apart (``can_use_custom_all_reduce_v2``); else the
    legacy kernel, whose ``can_use_custom_all_reduce_with_nvlink`` checks, in its order: the
    group spans nodes, its size is not one it supports, more than two GPUs are not all one
    NVLink (on AMD, Infinity Fabric) hop apart, the platform has no GPU peer-to-peer access
    (CUDA only; ROCm's XGMI peers always have it). ``disabled``: the launch turns it off
    (``perf.allreduceflags.custom_allreduce_flagged_off``).
    """
    if tp <= 1:
        return None
    if disabled:
        return "the launch turns it off: --disable-custom-all-reduce, or deterministic inference"
    if nnodes > 1:
        return "the group spans nodes"
    if not gpu.rocm and gpu.full_nvlink and tp in CUSTOM_V2_SIZES:
        return None
    if tp not in CUSTOM_ALLREDUCE_SIZES:
        return f"it supports groups of 2, 4, 6 or 8 GPUs, not {tp}"
    if tp > 2 and not gpu.full_nvlink:
        return f"the {gpu.name} has no NVLink, and without it the kernel runs on two GPUs at most"
    if not gpu.rocm and not gpu.p2p:
        return f"the {gpu.name}'s driver allows no GPU peer-to-peer access"
    return None


def one_allreduce_s(
    gpu: Gpu, tp: int, nnodes: int, payload: float, cal: Calibration, custom: bool = True
) -> float:
    """One all-reduce of ``payload`` bytes over ``tp`` GPUs (0 at TP 1).

    Inside a node: the custom kernel's one-shot (latency + every peer's buffer read over the
    fabric), two-shot (a reduce-scatter and an all-gather: 2 (tp-1)/tp of the payload) up to
    its buffer, NCCL's ring past it (its own, longer, latency), and at every size where the
    custom kernel does not run (``custom`` False: ``custom_allreduce_off``). Across nodes NCCL
    bound by the inter-node link, with that link's latency on top.
    """
    if tp <= 1:
        return 0.0
    link = gpu.link_gbs * 1e9
    ring = 2 * (tp - 1) / tp * payload
    if nnodes > 1:
        latency = cal.nccl_latency_s + cal.internode_latency_s
        return float(latency + ring / min(link, cal.internode_gbs * 1e9))
    if custom and payload <= ONE_SHOT_MAX_BYTES:
        return float(cal.allreduce_latency_s + (tp - 1) * payload / link)
    if custom and payload <= CUSTOM_MAX_BYTES:
        return float(2 * cal.allreduce_latency_s + ring / link)
    return float(cal.nccl_latency_s + ring / link)


def allreduce_s(scn: Parallel, shape: ModelShape, tokens: int, cal: Calibration) -> float:
    """Tensor parallelism's all-reduces of one forward over ``tokens`` tokens (0 at TP 1).

    Each moves the tokens' hidden states in the compute dtype (``one_allreduce_s``).
    """
    payload = tokens * shape.hidden_size * shape.model_dtype_bytes
    off = custom_allreduce_off(scn.gpu, scn.tp_size, scn.nnodes, scn.custom_allreduce_disabled)
    each = one_allreduce_s(scn.gpu, scn.tp_size, scn.nnodes, payload, cal, custom=off is None)
    return float(ALLREDUCES_PER_LAYER * shape.num_layers * each)
