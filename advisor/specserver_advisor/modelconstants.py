"""The performance model's constants: fitted to the field figures, or first-principles estimates.

``perfmodel`` uses (and re-exports) them; ``calibration`` fits the fitted ones (docs/advisor.md).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Calibration:
    """The model's few constants (see docs/advisor.md for the fit)."""

    bandwidth_efficiency: float = 0.956
    compute_efficiency: float = 0.601
    launch_s_per_dense_layer: float = 0.000228
    launch_s_per_moe_layer: float = 0.000143
    spec_step_overhead_s: float = 0.000616
    #: Work per request per speculative step beyond its forwards (tree build, accept,
    #: bookkeeping, and whatever else grows with the batch): the L4's figures alone fit
    #: 0.27 ms, the GB10's 1.33 ms (docs/advisor.md, host cost); applied on every card.
    spec_s_per_request: float = 0.000595
    #: Fraction of a request's extra verify positions that route like independent tokens.
    moe_routing_independence: float = 0.418
    prefill_efficiency: float = 0.488
    #: Host time per layer of a forward run without a CUDA graph (kernel launches from Python),
    #: paid by batches above the captured decode max. First-principles (about a dozen kernels
    #: per layer at ~20 us each), not fitted: no field figure runs above its captured batch.
    eager_s_per_layer: float = 0.00025
    #: The scheduler's CPU work per step that the overlap scheduler runs while the GPU computes
    #: the previous step (pick the next batch, build its inputs, process the last results): a
    #: fixed part and a part per running request (Python loops over the batch). Not fitted:
    #: every field figure ran with overlap on and GPU steps of 20 ms or more, which hide it.
    schedule_s_per_step: float = 0.0005
    schedule_s_per_request: float = 0.00002


#: Constants the fit leaves alone (no field figure constrains them).
UNFITTED = ("eager_s_per_layer", "schedule_s_per_step", "schedule_s_per_request")


DEFAULT_CALIBRATION = Calibration()
