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
    #: A speculative step's GPU work per request beyond its forwards (``model.spec_request_s``:
    #: the tree's build, mask and accept kernels and the KV slot moves, whose size grows with the
    #: requests), on a card of the L4's 300 GB/s (``model.SPEC_REFERENCE_GBS``), scaled by the
    #: card's memory bandwidth (small gathers and scatters): the GB10 1.1x, an H100 0.09x, an
    #: H200 0.06x. Fitted to the field (L4 and GB10); the EAGLE-3 paper's gain at batch 64 on
    #: an H100 bounds it there (<= ~0.07 ms a request), which SGLang 0.5.23's spec V2 keeps a
    #: gain (the paper's synchronous release also pays ``spec_sync_step_s``, docs/advisor.md).
    spec_s_per_request: float = 0.0005
    #: The host's share of the same (Python's loop over the batch's requests between the draft
    #: and the verify, which the speculative worker does not overlap): the same on every card.
    #: First-principles (~20 us of Python per request), not fitted: the field's two cards cannot
    #: separate it from the GPU part, whose card scaling they need.
    spec_host_s_per_request: float = 0.00002
    #: The GPU's work per request for each node of an EAGLE tree (topk > 1) beyond a chain's
    #: one per step (``model.spec_request_s``: the tree's mask rows, its candidates' gathers and
    #: the accept walk over its nodes, small kernels bound by memory traffic), stated like
    #: ``spec_s_per_request`` at ``model.SPEC_REFERENCE_GBS`` and scaled by the card's memory
    #: bandwidth. Not fitted: the field ran chains. Set so that the field's workstation case
    #: (a wide tree at 20 users on an A6000, a quarter slower than plain decoding) pays what
    #: the card-independent 0.5 ms a node did before stop 53 (0.5 ms x 768 / 300 GB/s); on an
    #: H100 that is 0.11 ms, which GPUStack's sweep of one launch's tree sizes (8 to 32 draft
    #: tokens, within 6% of each other) allows and the old card-independent cost did not.
    spec_tree_node_s: float = 0.00128
    #: Fraction of a request's extra verify positions that route like independent tokens.
    moe_routing_independence: float = 0.418
    prefill_efficiency: float = 0.488
    #: Host time to launch one kernel of a forward from Python, the Python around it included
    #: (``parallelism.eager_forward_launch_s`` counts a forward's kernels as a decode graph
    #: holds them; the views, casts and wrappers between them are in this price). What every
    #: forward without a CUDA graph takes at least: a prefill (SGLang captures decode only), a
    #: decode above the captured batch; and what an eager speculative step pays for each
    #: kernel of its draft loop's top-k selection and tree organisation. Fitted to the public
    #: corpus (``CORPUS_FITTED``: a big MoE's first tokens and its decodes interrupted by
    #: prefills see it); first-principles ~20 us (``validation.PRIOR``), which the field's
    #: figures never bind (their prefills are compute-bound).
    eager_launch_s: float = 0.000075
    #: The scheduler's CPU work per step that the overlap scheduler runs while the GPU computes
    #: the previous step (pick the next batch, build its inputs, process the last results): a
    #: fixed part and a part per running request (Python loops over the batch). Not fitted:
    #: every field figure ran with overlap on and GPU steps of 20 ms or more, which hide it.
    schedule_s_per_step: float = 0.0005
    schedule_s_per_request: float = 0.00002
    #: A synchronous speculative step's host work beyond the scheduler's: the speculative
    #: worker's Python between its GPU stages (the draft's tree built, the verify's accepted
    #: lengths read back, the draft extend prepared), each stage waiting on a host sync, so
    #: none of it overlaps the GPU. SGLang 0.5.23 runs speculation under the overlap scheduler
    #: (spec V2) and pays it only with ``--disable-overlap-schedule``; every release before
    #: spec V2 became the default ran speculation this way (``model.Scenario.spec_overlap``).
    #: First-principles (~0.5 ms: three stages, each a host sync and ~150 us of Python; the
    #: same order as the scheduler's own step), not fitted: the field ran spec V2, and a
    #: corpus fit (all its speculative figures come from such releases) follows its largest
    #: source, one experimenter's TP 2-4 launches, to ~2.7 ms (docs/advisor.md).
    spec_sync_host_s: float = 0.0005
    #: The same worker's host work for each draft step, in series with the GPU for the same
    #: reason: before the draft graph replays, each draft step's attention metadata is
    #: prepared on the host (FlashInfer's plan per step, with its copies back to the host; the
    #: FA3 backend's per-step metadata loop), and the verify's Python walks up to one accepted
    #: token per step. First-principles ~0.15 ms (``validation.PRIOR``: sglang PR #8490
    #: measures a draft decode's plan at ~0.12 ms); fitted to the public corpus
    #: (``CORPUS_FITTED``), whose synchronous launches cost more a step the more draft steps
    #: they run (GPUStack's sweep of steps 2-8 at one tree size; docs/advisor.md).
    spec_sync_step_s: float = 0.00063
    #: The shortest a latency-bound kernel takes in a CUDA graph replay on NVIDIA cards (the
    #: launch gap inside the graph, the ramp and tail of a grid that does not fill the card):
    #: what a decode layer's ~15-30 small kernels each pay on Hopper and Blackwell, however
    #: fast the card computes (``parallelism.layer_kernels``). Fitted to the public validation
    #: corpus's plain decode of big models (``perf.validation``; docs/advisor.md); on the
    #: L4 and the GB10 the fitted small-kernel work above is larger and binds instead.
    kernel_floor_s: float = 0.0000055
    #: The same on AMD Instinct cards under HIP graphs, per CDNA generation (the HIP launch
    #: path and the aiter kernels SGLang picks differ between gfx942 and gfx950). The corpus
    #: fit moves each on its own (``CORPUS_FITTED``); the defaults are still the one
    #: first-principles ROCm floor, not that fit (docs/advisor.md says why).
    cdna3_kernel_floor_s: float = 0.000008
    cdna4_kernel_floor_s: float = 0.000008
    #: The custom all-reduce's latency inside a node (one-shot: a peer write and a flag round
    #: trip over NVLink/NVSwitch or Infinity Fabric). Fitted to the corpus (TP 2-8 figures).
    allreduce_latency_s: float = 0.0000038
    #: NCCL's (RCCL's) all-reduce latency where the custom kernel does not apply (past its
    #: buffer, or a group spanning nodes). First-principles: about twice the custom kernel's.
    nccl_latency_s: float = 0.00002
    #: Across nodes: the NIC's extra latency and its bandwidth per GPU (400 Gb/s InfiniBand or
    #: RoCE, ~50 GB/s: an order of magnitude below NVLink). The latency is fitted to the
    #: corpus's two-node figures; the bandwidth is the data sheet's.
    internode_latency_s: float = 0.00008
    internode_gbs: float = 50.0


#: Constants the fit leaves alone (no field figure constrains them).
UNFITTED = (
    "spec_host_s_per_request",
    "spec_tree_node_s",
    "eager_launch_s",
    "schedule_s_per_step",
    "schedule_s_per_request",
    "spec_sync_host_s",
    "spec_sync_step_s",
    "kernel_floor_s",
    "cdna3_kernel_floor_s",
    "cdna4_kernel_floor_s",
    "allreduce_latency_s",
    "nccl_latency_s",
    "internode_latency_s",
    "internode_gbs",
)
#: The constants the public validation corpus fits (``perf.validation``): the latency-bound
#: costs that only fast cards and big groups expose. The field fit (``calibration``) leaves
#: them alone; the corpus fit leaves the field's alone.
CORPUS_FITTED = (
    "kernel_floor_s",
    "cdna3_kernel_floor_s",
    "cdna4_kernel_floor_s",
    "allreduce_latency_s",
    "internode_latency_s",
    "eager_launch_s",
    "spec_sync_step_s",
)


DEFAULT_CALIBRATION = Calibration()
