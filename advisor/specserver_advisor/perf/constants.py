"""The performance model's constants: fitted to the field figures, or first-principles estimates.

``perf.model`` uses them (callers import them from here); ``calibration`` fits the fitted
ones (docs/advisor.md).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Calibration:
    """The model's few constants (see docs/advisor.md for the fit)."""

    bandwidth_efficiency: float = 0.956
    compute_efficiency: float = 0.601
    #: A layer's small kernels under CUDA graphs on a card of ``parallelism.REFERENCE_TFLOPS``
    #: dense BF16 (scaled by the card's rate): fitted, dense on the L4, MoE on the GB10.
    launch_s_per_dense_layer: float = 0.000281
    launch_s_per_moe_layer: float = 0.0001015
    spec_step_overhead_s: float = 0.000551
    #: Work per request per speculative step beyond its forwards (tree build, accept,
    #: bookkeeping, and whatever else grows with the batch): the L4's figures alone fit
    #: 0.27 ms, the GB10's 1.33 ms (docs/advisor.md, host cost); applied on every card.
    spec_s_per_request: float = 0.000563
    #: Fraction of a request's extra verify positions that route like independent tokens.
    moe_routing_independence: float = 0.418
    prefill_efficiency: float = 0.488
    #: Host time per layer of a forward run without a CUDA graph (kernel launches from Python),
    #: paid by batches above the captured decode max. First-principles (about a dozen kernels
    #: per layer at ~20 us each), not fitted: no field figure runs above its captured batch.
    eager_s_per_layer: float = 0.00025
    #: Host time of one kernel launched eagerly from Python (the ~20 us that
    #: ``eager_s_per_layer`` counts a dozen of): what an eager speculative step pays for each
    #: kernel of its draft loop's top-k selection and tree organisation, which a captured draft
    #: graph replays. First-principles, not fitted, for the same reason.
    eager_s_per_kernel: float = 0.00002
    #: The scheduler's CPU work per step that the overlap scheduler runs while the GPU computes
    #: the previous step (pick the next batch, build its inputs, process the last results): a
    #: fixed part and a part per running request (Python loops over the batch). Not fitted:
    #: every field figure ran with overlap on and GPU steps of 20 ms or more, which hide it.
    schedule_s_per_step: float = 0.0005
    schedule_s_per_request: float = 0.00002
    #: The shortest a kernel takes in a CUDA graph replay (launch gap and ramp, ~2 us on any
    #: card): the floor under a layer's small kernels on fast cards. First-principles, not
    #: fitted: on the field's cards the layers' fitted cost is far above it.
    kernel_floor_s: float = 0.000002
    #: One tensor-parallel all-reduce's latency inside a node (SGLang's custom one-shot
    #: all-reduce: a peer write and a flag round trip, a few us). First-principles, not
    #: fitted: every field figure ran on one GPU.
    allreduce_latency_s: float = 0.000004
    #: Across nodes: the NIC's extra latency and its bandwidth per GPU (400 Gb/s InfiniBand or
    #: RoCE, ~50 GB/s: an order of magnitude below NVLink). First-principles, not fitted.
    internode_latency_s: float = 0.00001
    internode_gbs: float = 50.0


#: Constants the fit leaves alone (no field figure constrains them).
UNFITTED = (
    "eager_s_per_layer",
    "eager_s_per_kernel",
    "schedule_s_per_step",
    "schedule_s_per_request",
    "kernel_floor_s",
    "allreduce_latency_s",
    "internode_latency_s",
    "internode_gbs",
)


DEFAULT_CALIBRATION = Calibration()
