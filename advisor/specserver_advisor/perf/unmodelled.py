"""What the performance model does not price yet, named in the plan with the error it implies.

Expert parallelism (``--ep-size``, an all-to-all MoE backend such as DeepEP), DP attention
(``--enable-dp-attention`` / ``--attn-dp-size``) and 4-bit weights (``--quantization``
modelopt_fp4, mxfp4, nvfp4_online, ..., or an FP4 checkpoint) are accepted by ``plan`` and
predicted as plain tensor parallelism over the same GPUs with the weights' bytes and the BF16
compute rate. Each ``Unmodelled`` names the feature, the flags that asked for it and which way
the prediction is wrong (``error``: "decode predicted too fast", ...), with a size from the same
step model (``model.gpu_step_time``), so a reader does not take the curve for a prediction of
that launch. The plan's text prints each as a note; its JSON lists them (``not_modelled``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from specserver_advisor.perf.constants import Calibration
from specserver_advisor.perf.model import Scenario, gpu_step_time
from specserver_advisor.perf.parallelism import one_allreduce_s
from specserver_advisor.sglang.dplayout import attn_dp_enabled

#: ``--quantization`` methods whose weights are 4-bit (FP4, MXFP4, or INT4 with FP8 activations).
FP4_METHODS = (
    "modelopt_fp4",
    "mxfp4",
    "quark_mxfp4",
    "mxfp_w4a8",
    "nvfp4_online",
    "petit_nvfp4",
    "w4afp8",
    "fp4",
    "nvfp4",
)


@dataclass(frozen=True)
class Unmodelled:
    """One launch feature the model predicts as something else."""

    #: ``expert_parallelism``, ``dp_attention`` or ``fp4_weights``.
    feature: str
    #: The launch's flags (or the checkpoint) that asked for it, as the reader would spell them.
    flags: str
    #: Which way the prediction is wrong, in a few words ("decode predicted too fast").
    error: str
    #: Why, and roughly by how much.
    detail: str

    @property
    def note(self) -> str:
        return f"{_TITLES[self.feature]} not modelled ({self.flags}): {self.error}; {self.detail}"

    def to_json(self) -> dict[str, str]:
        return {
            "feature": self.feature,
            "flags": self.flags,
            "error": self.error,
            "detail": self.detail,
        }


_TITLES = {
    "expert_parallelism": "EP all-to-all",
    "dp_attention": "DP attention",
    "fp4_weights": "FP4 weights",
}


def _step_ms(scn: Scenario, cal: Calibration) -> float:
    return gpu_step_time(scn, 1, False, cal) * 1000


def _word(value: Any) -> str:
    """A flag value from the launch (another tenant's string) shown only when it is a plain
    word: the choices SGLang accepts are."""
    text = str(value).lower()
    return text if text.replace("_", "").replace("-", "").isalnum() and len(text) < 40 else "(set)"


def _int(value: Any) -> int:
    try:
        return int(value or 1)
    except (TypeError, ValueError):
        return 1


def _expert_parallelism(args: dict[str, Any], scn: Scenario, cal: Calibration) -> Unmodelled:
    ep = _int(args.get("ep_size"))
    a2a = _word(args.get("moe_a2a_backend") or "none")
    flags = ", ".join(
        part
        for part in (f"--ep-size {ep}" if ep > 1 else "", f"--moe-a2a-backend {a2a}")
        if part and not part.endswith(" none")
    )
    # Dispatch and combine replace the MoE's all-reduce: two all-to-alls per MoE layer, each at
    # least one all-reduce's latency (more across nodes, and DeepEP's low-latency kernels more).
    layers = scn.target.moe_layers
    a2a_ms = 2 * layers * one_allreduce_s(scn.gpu, scn.tp_size, scn.nnodes, 0.0, cal) * 1000
    return Unmodelled(
        "expert_parallelism",
        flags,
        "decode predicted too fast",
        f"the dispatch and combine all-to-alls of each of the {layers} MoE layers are not "
        f"priced (at least ~{a2a_ms:.1f} ms a step at one request against a predicted "
        f"{_step_ms(scn, cal):.1f} ms step, more across nodes); the whole experts per GPU it "
        "runs instead of TP slices are not priced either, which at large batches makes the "
        "predicted throughput low instead",
    )


def _dp_attention(args: dict[str, Any]) -> Unmodelled:
    attn_dp = _int(args.get("attn_dp_size"))
    dp = attn_dp if attn_dp > 1 else _int(args.get("dp_size"))
    flags = f"--attn-dp-size {attn_dp}" if attn_dp > 1 else f"--enable-dp-attention --dp-size {dp}"
    return Unmodelled(
        "dp_attention",
        flags,
        "one request's decode predicted too fast, many requests' throughput predicted too low",
        f"each of the {dp} attention groups runs its own requests' attention and KV (a larger "
        "KV pool and attention batch per rank than tensor-parallel attention gives: not "
        "priced, so throughput at many requests is under-predicted) and gathers and scatters "
        "the tokens around every MoE layer (not priced, so one request's TPOT is "
        "under-predicted by their latency)",
    )


def _fp4_method(args: dict[str, Any], config: dict[str, Any]) -> str | None:
    quant = str(args.get("quantization") or "").lower()
    if quant in FP4_METHODS:
        return f"--quantization {quant}"
    qc = config.get("quantization_config")
    if not isinstance(qc, dict):
        return None
    # The config's strings are another tenant's: name only the ones we know.
    method = str(qc.get("quant_method", "")).lower()
    algo = str(qc.get("quant_algo", "")).lower()
    if method in FP4_METHODS:
        return f"checkpoint quant_method {method}"
    if "fp4" in method or "fp4" in algo:
        return "an FP4 checkpoint"
    return None


def _fp4_weights(named: str, indexed: bool, scn: Scenario, cal: Calibration) -> Unmodelled:
    step = _step_ms(scn, cal)
    if indexed:
        return Unmodelled(
            "fp4_weights",
            named,
            "large batches predicted too slow, one request about right",
            "the weights are read at the checkpoint's on-disk size (4-bit with its scales), "
            "but the 4-bit GEMMs are priced at the card's BF16 rate (FP4 runs 2-4x faster "
            "where the card has it) and the dequantisation kernels are not priced",
        )
    return Unmodelled(
        "fp4_weights",
        named,
        "decode predicted too slow",
        f"the weights are priced at 8/16-bit bytes, not 4-bit: the memory-bound part of each "
        f"step is over-predicted by up to 2-4x (a predicted {step:.1f} ms step at one request "
        "is an upper bound), and the 4-bit GEMMs at the BF16 rate",
    )


def unmodelled(
    args: dict[str, Any],
    config: dict[str, Any],
    scn: Scenario,
    cal: Calibration,
    weights_indexed: bool = False,
) -> list[Unmodelled]:
    """The launch features the model predicts as something else (``weights_indexed``: the
    target's weight bytes came from its checkpoint's index, not its parameters x dtype)."""
    out: list[Unmodelled] = []
    ep = _int(args.get("ep_size"))
    a2a = _word(args.get("moe_a2a_backend") or "none")
    if scn.target.moe_layers and (ep > 1 or a2a != "none"):
        out.append(_expert_parallelism(args, scn, cal))
    if attn_dp_enabled(args):
        out.append(_dp_attention(args))
    named = _fp4_method(args, config or {})
    if named:
        out.append(_fp4_weights(named, weights_indexed, scn, cal))
    return out


def unmodelled_notes(
    args: dict[str, Any],
    config: dict[str, Any],
    scn: Scenario,
    cal: Calibration,
    weights_indexed: bool = False,
) -> list[str]:
    """The plan's notes for the launch features the model predicts as something else."""
    return [u.note for u in unmodelled(args, config, scn, cal, weights_indexed)]
