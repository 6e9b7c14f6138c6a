"""What the performance model does not price yet, named in the plan's notes with its error.

Expert parallelism (``--ep-size``, an all-to-all MoE backend such as DeepEP), DP attention
(``--enable-dp-attention``) and FP4 weights (``--quantization`` modelopt_fp4/mxfp4/w4afp8, or an
FP4 checkpoint) are accepted by ``plan`` and predicted as plain tensor parallelism over the
same GPUs in the checkpoint's 8/16-bit weights. Each note says which way that is wrong and
roughly by how much, from the same step model (``model.gpu_step_time``), so a reader does not
take the curve for a prediction of that launch.
"""

from __future__ import annotations

from typing import Any

from specserver_advisor.perf.constants import Calibration
from specserver_advisor.perf.model import Scenario, gpu_step_time
from specserver_advisor.perf.parallelism import one_allreduce_s

FP4_METHODS = ("modelopt_fp4", "mxfp4", "w4afp8", "fp4", "nvfp4")


def _step_ms(scn: Scenario, cal: Calibration) -> float:
    return gpu_step_time(scn, 1, False, cal) * 1000


def unmodelled_notes(
    args: dict[str, Any], config: dict[str, Any], scn: Scenario, cal: Calibration
) -> list[str]:
    """The plan's notes for the launch features the model predicts as something else."""
    notes: list[str] = []
    step = _step_ms(scn, cal)
    moe_layers = scn.target.moe_layers
    ep = int(args.get("ep_size") or 1)
    a2a = str(args.get("moe_a2a_backend") or "none").lower()
    if not a2a.replace("_", "").replace("-", "").isalnum():
        a2a = "(set)"
    if moe_layers and (ep > 1 or a2a not in ("none", "")):
        # Dispatch and combine replace the MoE's all-reduce: two all-to-alls per MoE layer,
        # each at least one all-reduce's latency (more across nodes).
        a2a_ms = 2 * moe_layers * one_allreduce_s(scn.gpu, scn.tp_size, scn.nnodes, 0.0, cal) * 1000
        notes.append(
            f"not modelled: expert parallelism (--ep-size {ep}, --moe-a2a-backend {a2a}) is "
            f"predicted as tensor parallelism over the same GPUs: the two all-to-alls per MoE "
            f"layer (dispatch, combine: ~{a2a_ms:.1f} ms a step at one request, against a "
            f"predicted {step:.1f} ms step) and whole experts per GPU instead of slices are not "
            "priced; expect TPOT off by up to that much either way"
        )
    if args.get("enable_dp_attention"):
        dp = int(args.get("dp_size") or 1)
        notes.append(
            f"not modelled: DP attention (--dp-size {dp}) is predicted as tensor-parallel "
            f"attention: each of the {dp} attention groups runs its own requests' attention "
            "and KV (a larger pool and batch per rank, a gather and scatter around the MoE), "
            "so at many requests the predicted throughput is low and at one request the "
            "predicted TPOT is short by the gather's latency"
        )
    quant = str(args.get("quantization") or "").lower()
    method = ""
    qc = config.get("quantization_config")
    if isinstance(qc, dict):
        method = str(qc.get("quant_method", "")).lower()
    if quant in FP4_METHODS or "fp4" in method:
        # The config's method is another tenant's string: name only the ones we know.
        named = quant if quant in FP4_METHODS else (method if method in FP4_METHODS else "FP4")
        notes.append(
            f"not modelled: FP4 weights ({named}) are predicted at the checkpoint's "
            "8/16-bit weight bytes: the memory-bound part of each step is over-predicted by up "
            f"to 2-4x (a predicted {step:.1f} ms step at one request is an upper bound)"
        )
    return notes
