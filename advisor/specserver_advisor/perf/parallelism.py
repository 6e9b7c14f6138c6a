"""The fixed costs of a forward that depend on the card and the GPU count, not the bytes read.

``perf.model.forward_time`` adds them to the slower of memory and compute: the layers' small
kernels under CUDA graphs (norms, rotary, activation, routing, the attention of one query: work
that runs at the card's compute rate, not its bandwidth; under tensor parallelism each rank runs
the sharded ones over its 1/N of the heads or intermediate and the ones on the full hidden state
whole), and tensor parallelism's all-reduces (two per layer, after attention and after the
MLP), each a latency plus its bytes over the link inside a node (NVLink or PCIe,
``Gpu.link_gbs``) or, when the TP group spans nodes (``--nnodes``), across them. Constants come
from ``perf.constants.Calibration``.
"""

from __future__ import annotations

from typing import Protocol

from specserver_advisor.gpus import Gpu
from specserver_advisor.perf.constants import Calibration
from specserver_advisor.sglang.modelshape import ModelShape

#: The dense BF16 rate the per-layer constants are stated at (TFLOP/s): a card of twice the
#: rate runs a layer's small kernels in half the time.
REFERENCE_TFLOPS = 100.0
#: All-reduces per decoder layer under tensor parallelism (attention output, MLP output).
ALLREDUCES_PER_LAYER = 2
#: Kernels one decoder layer launches at decode (our count of SGLang's forward: norms, the
#: projections, rotary, attention, activation; an MoE layer adds the router, top-k, alignment,
#: the expert GEMMs and the combine), each paying at least ``Calibration.kernel_floor_s``.
DENSE_LAYER_KERNELS = 10
MOE_LAYER_KERNELS = 16
#: A layer's small (non-GEMM) kernels at decode and whether each runs on the full hidden state
#: (True: the same work on every TP rank) or on the rank's shard. SGLang 0.5.23's
#: ``LlamaDecoderLayer`` (Qwen3's is the same plus a per-head q/k norm, also sharded): the two
#: RMSNorms (fused residual add) on the hidden state; rotary, the KV store and attention over
#: the rank's ``num_heads / tp`` heads; SiLU-and-mul over its ``intermediate / tp``.
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


def layer_launch_s(scn: Parallel, shape: ModelShape, cal: Calibration) -> float:
    """The layers' small kernels of one forward under CUDA graphs, on one GPU of the group.

    Per layer (dense and MoE apart) at ``REFERENCE_TFLOPS``, scaled by the card's compute rate;
    a locked clock slows them by its square root (the fit on the L4 at 900 MHz). Under tensor
    parallelism each GPU runs every kernel, the sharded ones on 1/tp of the work
    (``tp_work_share``). However fast the card and wide the group, a layer pays at least its
    kernels' launch floor under the graph.
    """
    rate = REFERENCE_TFLOPS / scn.gpu.bf16_tflops / scn.clock_scale**0.5
    dense_work = cal.launch_s_per_dense_layer * rate * tp_work_share(DENSE_SMALL_KERNELS, scn)
    moe_work = cal.launch_s_per_moe_layer * rate * tp_work_share(MOE_SMALL_KERNELS, scn)
    dense = max(DENSE_LAYER_KERNELS * cal.kernel_floor_s, dense_work)
    moe = max(MOE_LAYER_KERNELS * cal.kernel_floor_s, moe_work)
    return float((shape.num_layers - shape.moe_layers) * dense + shape.moe_layers * moe)


def tp_work_share(kernels: tuple[tuple[str, bool], ...], scn: Parallel) -> float:
    """The share of a layer's small-kernel work one GPU of the TP group runs (1 at TP 1).

    Each small kernel counts alike (at decode they are latency-bound, not work-bound by size):
    the whole ones fully, the sharded ones at 1/tp.
    """
    whole = sum(1 for _, full in kernels if full)
    sharded = len(kernels) - whole
    return (whole + sharded / max(1, scn.tp_size)) / len(kernels)


def allreduce_s(scn: Parallel, shape: ModelShape, tokens: int, cal: Calibration) -> float:
    """Tensor parallelism's all-reduces of one forward over ``tokens`` tokens (0 at TP 1).

    Each moves the tokens' hidden states (compute dtype): a ring moves 2 (tp - 1) / tp of them
    per GPU. Inside a node over ``Gpu.link_gbs``; a group spanning nodes is bound by the
    inter-node link (``internode_gbs``, about an order of magnitude below NVLink) and pays its
    latency too.
    """
    tp = scn.tp_size
    if tp <= 1:
        return 0.0
    payload = tokens * shape.hidden_size * shape.model_dtype_bytes
    wire = 2 * (tp - 1) / tp * payload
    latency, link = cal.allreduce_latency_s, scn.gpu.link_gbs
    if scn.nnodes > 1:
        latency += cal.internode_latency_s
        link = min(link, cal.internode_gbs)
    each = latency + wire / (link * 1e9)
    return float(ALLREDUCES_PER_LAYER * shape.num_layers * each)
