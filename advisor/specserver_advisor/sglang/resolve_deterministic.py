"""SGLang 0.5.23's ``handle_deterministic_inference`` as far as a launch's acceptance goes (pure).

It runs after the model hooks and before the speculative hook
(``arg_groups/pipeline.py``):

- ``--rl-on-policy-target`` turns ``--enable-deterministic-inference`` on, with a warning, so
  every later step (the HIP rejection-sampling default, UNO's refusal) sees it on;
- with no ``--attention-backend`` it picks one that is batch-invariant before SGLang's own
  default is taken (``_deterministic_attention_backend``: flashinfer on sm100/sm120, triton there
  for the DeepSeek family, fa3 elsewhere), and refuses a given backend outside its list; an
  absorbed-MLA model also needs a radix-cache-capable one (``deterministic_attention_backend``,
  which ``serverargs.predict_server`` calls where it takes the default backend);
- on ROCm, deterministic tensor parallelism above two ranks relies on the one-stage custom
  all-reduce, so ``--disable-custom-all-reduce`` there is a startup error
  (``_deterministic_rocm_rccl_check``, ``arg_groups/overrides.py``).

What it does to the all-reduce itself on CUDA (NCCL's tree, custom all-reduce off) is the
performance model's (``perf.allreduceflags``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from specserver_advisor.gpus import Gpu

if TYPE_CHECKING:
    from specserver_advisor.sglang.resolve import Resolver

#: ``DETERMINISTIC_ATTENTION_BACKEND_CHOICES`` (``arg_groups/choices.py``), in its order.
DETERMINISTIC_BACKENDS = ["ascend", "fa3", "fa4", "flashinfer", "intel_xpu", "triton"]
#: ``RADIX_SUPPORTED_DETERMINISTIC_ATTENTION_BACKEND``: what an absorbed-MLA model may use.
RADIX_DETERMINISTIC_BACKENDS = ["ascend", "fa3", "fa4", "triton"]
#: ``_deterministic_is_deepseek_model``: triton instead of flashinfer on Blackwell.
TRITON_FALLBACK_ARCHS = (
    "DeepseekV2ForCausalLM",
    "DeepseekV3ForCausalLM",
    "DeepseekV32ForCausalLM",
    "MistralLarge3ForCausalLM",
    "PixtralForConditionalGeneration",
    "GlmMoeDsaForCausalLM",
    "Glm4MoeLiteForCausalLM",
)
#: ``handle_deterministic_inference``'s absorbed-MLA list (one architecture more).
ABSORBED_MLA_ARCHS = (*TRITON_FALLBACK_ARCHS, "Glm5NextForConditionalGeneration")

#: ``handle_deterministic_inference``'s warning, word for word.
RL_ON_POLICY_WARNING = "Enable deterministic inference because of rl_on_policy_target."
#: ``_deterministic_rocm_rccl_check``'s ValueError, word for word.
ROCM_RCCL_MESSAGE = (
    "--disable-custom-all-reduce cannot be combined with "
    "--enable-deterministic-inference on ROCm when --tp-size is above 2: "
    "the all-reduce would run through RCCL, which is not batch-invariant."
)


def deterministic_on(values: Mapping[str, Any]) -> bool:
    """Deterministic inference: the flag, or ``--rl-on-policy-target`` (which turns it on)."""
    return bool(values.get("enable_deterministic_inference")) or (
        values.get("rl_on_policy_target") is not None
    )


def deterministic_attention_backend(
    values: Mapping[str, Any], gpu: Gpu, architecture: str
) -> tuple[str | None, str | None]:
    """(the attention backend deterministic inference leaves, SGLang's ValueError text or None)
    for a launch with it on; the backend is None where it leaves the choice to the default."""
    given = values.get("attention_backend")
    backend = given
    if given is None:
        blackwell = not gpu.rocm and gpu.capability[0] in (10, 12)  # is_sm100 or is_sm120
        if blackwell:
            backend = "triton" if architecture in TRITON_FALLBACK_ARCHS else "flashinfer"
        else:
            backend = "fa3"
    elif given not in DETERMINISTIC_BACKENDS:
        return given, (
            f"Currently only {DETERMINISTIC_BACKENDS} attention backends are supported for "
            f"deterministic inference, but you explicitly specified '{given}'."
        )
    if architecture in ABSORBED_MLA_ARCHS:
        if backend not in RADIX_DETERMINISTIC_BACKENDS:
            return backend, (
                f"Currently only {RADIX_DETERMINISTIC_BACKENDS} attention backends are supported "
                f"for deterministic inference with absorbed-MLA models. But you're using "
                f"{backend}."
            )
        if backend == "fa4" and (gpu.rocm or gpu.capability[0] not in (10, 11)):
            return backend, (
                "Deterministic inference with absorbed-MLA models on the fa4 attention backend "
                "requires SM100/SM110: it runs absorbed MLA, whose qv argument flash_attn.cute "
                "only implements on those archs."
            )
    return backend, None


def deterministic(r: Resolver) -> None:
    """Record what deterministic inference decides about the launch, or the error it raises."""
    if r.cur("rl_on_policy_target") is not None:
        r.set("enable_deterministic_inference", True, "forced", RL_ON_POLICY_WARNING)
        r.warn(RL_ON_POLICY_WARNING)
    if not r.cur("enable_deterministic_inference"):
        return
    if r.hip and int(r.cur("tp_size") or 1) > 2 and r.cur("disable_custom_all_reduce"):
        r.fail(
            ROCM_RCCL_MESSAGE,
            "disable_custom_all_reduce",
            "enable_deterministic_inference",
            "tp_size",
        )
