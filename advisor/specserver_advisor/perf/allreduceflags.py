"""What a launch says about its all-reduces: whether SGLang 0.5.23's custom all-reduce is
turned off by the launch (``custom_allreduce_flagged_off``), and the plan's note where every
all-reduce of the TP group is NCCL's (``nccl_note``). The hardware's side of the decision is
``perf.parallelism.custom_allreduce_off``.
"""

from __future__ import annotations

from typing import Any

from specserver_advisor.gpus import Gpu
from specserver_advisor.perf.model import Scenario
from specserver_advisor.perf.parallelism import custom_allreduce_off
from specserver_advisor.sglang.dplayout import attn_dp_enabled
from specserver_advisor.sglang.resolve_deterministic import deterministic_on

#: ``_FLASHINFER_ALLREDUCE_FUSION_ARCHS`` (SGLang 0.5.23's ``arg_groups/overrides.py``): the
#: models whose all-reduces FlashInfer's fused all-reduce + RMSNorm kernel takes on sm90/sm100.
FLASHINFER_FUSION_ARCHS = frozenset(
    {
        "DeepseekV3ForCausalLM",
        "DeepseekV32ForCausalLM",
        "DeepseekV4ForCausalLM",
        "GptOssForCausalLM",
        "GlmMoeDsaForCausalLM",
        "Glm4MoeForCausalLM",
        "Glm4MoeLiteForCausalLM",
        "MistralLarge3ForCausalLM",
        "Qwen3MoeForCausalLM",
        "Qwen3VLMoeForConditionalGeneration",
        "Qwen3NextForCausalLM",
        "Qwen4ExpForConditionalGeneration",
        "KimiK25ForConditionalGeneration",
        "Qwen3_5MoeForConditionalGeneration",
        "InternS2PreviewForConditionalGeneration",
        "Qwen3_5ForConditionalGeneration",
        "NemotronHForCausalLM",
        "NemotronHPuzzleForCausalLM",
        "NemotronH_Omni_Reasoning_V3",
    }
)


def flashinfer_fusion_runs(args: dict[str, Any], gpu: Gpu, architecture: str) -> bool:
    """``_flashinfer_allreduce_fusion_auto_enable``: FlashInfer's fused all-reduce takes the
    model's all-reduces on Hopper and Blackwell (sm100) whatever ``--disable-custom-all-reduce``
    says, at TP > 1 without DP attention or an all-to-all backend (across nodes on sm100 only);
    deterministic inference turns it off. Its one-shot IPC kernel is priced as the custom one.
    """
    return (
        not gpu.rocm
        and architecture in FLASHINFER_FUSION_ARCHS
        and gpu.capability[0] in (9, 10)
        and int(args.get("tp_size") or 1) > 1
        and not attn_dp_enabled(args)
        and (int(args.get("nnodes") or 1) == 1 or gpu.capability[0] == 10)
        and args.get("moe_a2a_backend") in (None, "none")
        and args.get("flashinfer_allreduce_fusion_backend") is None
        and not deterministic_on(args)
    )


def custom_allreduce_flagged_off(args: dict[str, Any], gpu: Gpu, architecture: str) -> bool:
    """The launch turns SGLang's custom all-reduce off: ``--disable-custom-all-reduce`` (unless
    FlashInfer's fused all-reduce takes the model's all-reduces anyway), or deterministic
    inference on CUDA (``_handle_deterministic_inference`` sets the flag at TP > 1; on ROCm it
    keeps the custom kernel's one-stage path)."""
    if deterministic_on(args):
        return not gpu.rocm or bool(args.get("disable_custom_all_reduce"))
    if args.get("disable_custom_all_reduce"):
        return not flashinfer_fusion_runs(args, gpu, architecture)
    return False


def nccl_note(scn: Scenario) -> str | None:
    """The plan's note where every all-reduce of the TP group is NCCL's."""
    off = custom_allreduce_off(scn.gpu, scn.tp_size, scn.nnodes, scn.custom_allreduce_disabled)
    if off is None or scn.nnodes > 1:
        return None
    return (
        f"SGLang's custom all-reduce does not run ({off}): every all-reduce of the "
        f"{scn.tp_size} GPUs is NCCL's, priced at its latency"
    )
