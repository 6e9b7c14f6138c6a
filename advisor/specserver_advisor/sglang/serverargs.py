"""What ``sglang serve`` 0.5.23 resolves for a whole launch on a named GPU, before any weight loads.

One pure function, ``predict_server``: argv + environment + the target/draft ``config.json`` + a
GPU from ``gpus.py`` in, SGLang's outcome out: accepted, or the argparse / ValueError /
AssertionError text it exits with; the resolved fields (speculative shape, max running requests,
mem-fraction-static, chunked prefill, CUDA-graph max batch sizes, page size, attention backend,
mixed chunk, overlap schedule) and the target's and draft's context lengths. It composes
``flags`` (the parser), ``overrides`` (``--json-model-override-args`` on target and draft),
``resolve`` (the model hooks and the speculative handlers), ``context`` and ``memory``
(``handle_gpu_memory_settings``) in SGLang's resolution order. The configs given are the files
SGLang reads (config.json, or the ``--decrypted-*-config-file`` the caller loaded). The
differential tests (tests/oracle) hold it against SGLang itself, field by field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from specserver_advisor.gpus import Gpu
from specserver_advisor.sglang import configvalues, context
from specserver_advisor.sglang.dplayout import dp_attention_layout
from specserver_advisor.sglang.flags import parse_server_argv
from specserver_advisor.sglang.memory import settings_from_values
from specserver_advisor.sglang.overrides import OverrideArgsError, effective_configs
from specserver_advisor.sglang.resolve import Resolution, resolve_launch
from specserver_advisor.sglang.resolve_deterministic import (
    deterministic_attention_backend,
    deterministic_on,
)

ACCEPTED = "accepted"
#: Architectures whose attention SGLang runs on the MLA path (``use_mla_backend``).
MLA_ARCHS = (
    "DeepseekV2ForCausalLM",
    "DeepseekV3ForCausalLM",
    "DeepseekV32ForCausalLM",
    "DeepseekVL2ForCausalLM",
    "KimiVLForConditionalGeneration",
    "MiniCPM3ForCausalLM",
    "Glm4MoeLiteForCausalLM",
    "GlmMoeDsaForCausalLM",
    "MistralLarge3ForCausalLM",
    "PixtralForConditionalGeneration",
)


@dataclass
class ServerOutcome:
    """SGLang's answer for one launch (the shape the oracle worker answers in)."""

    outcome: str
    message: str = ""
    fields: dict[str, Any] = field(default_factory=dict)
    context_len: int | None = None
    draft_outcome: str | None = None
    draft_message: str = ""
    draft_context_len: int | None = None
    resolution: Resolution | None = None

    @property
    def accepted(self) -> bool:
        return self.outcome == ACCEPTED


def is_mla(config: dict[str, Any] | None) -> bool:
    """Whether the target runs SGLang's MLA attention path."""
    cfg = context.text_config(config or {})
    archs = configvalues.architectures(config)
    return bool(archs and archs[0] in MLA_ARCHS and cfg.get("kv_lora_rank"))


def model_hook_backend(gpu: Gpu, mla: bool, architecture: str) -> str | None:
    """The backend a model hook sets before any other handler reads it (None: none): DeepSeek
    V3/R1 on sm100 takes trtllm_mla (``model_overrides/deepseek_v2.py``)."""
    if mla and not gpu.rocm and gpu.capability[0] == 10:
        return "trtllm_mla" if architecture == "DeepseekV3ForCausalLM" else None
    return None


def backend_before_default(
    values: dict[str, Any], gpu: Gpu, mla: bool, architecture: str
) -> tuple[str | None, str | None]:
    """The attention backend set before SGLang's default is taken (None: the default decides)
    and deterministic inference's refusal of it (None: none): the user's backend, else a model
    hook's fill; with deterministic inference on, its own pick where that leaves none
    (``handle_deterministic_inference`` runs after the model hooks, before the default)."""
    backend = values.get("attention_backend") or model_hook_backend(gpu, mla, architecture)
    if not deterministic_on(values):
        return backend, None
    given = {**values, "attention_backend": backend}
    return deterministic_attention_backend(given, gpu, architecture)


def default_attention_backend(
    gpu: Gpu,
    mla: bool,
    values: dict[str, Any],
    architecture: str = "",
    mla_heads: int | None = None,
) -> str:
    """``get_default_attn_backend`` on CUDA and ROCm, with the DeepSeek-V3 override on sm100.

    Taken before the speculative handler runs: ``topk`` is the user's (NGRAM's is unset then),
    which is why NGRAM with ``--page-size`` > 1 gets fa3 on Hopper and then fails.
    """
    if gpu.rocm:
        # ``get_default_attn_backend``'s is_hip arms: aiter for MHA; for MLA aiter when the
        # rank's KV heads (``get_num_kv_heads(tp)``) are 16 or 128 (aiter's MLA decode
        # kernels), else triton.
        if not mla:
            return "aiter"
        tp = int(values.get("tp_size") or 1)
        if mla_heads is None or max(1, mla_heads // max(1, tp)) in (16, 128):
            return "aiter"
        return "triton"
    major = gpu.capability[0]
    topk = values.get("speculative_eagle_topk")
    page = values.get("page_size")
    algorithm = values.get("speculative_algorithm")
    topk_one = topk is None or (topk == 1 and page in (None, 1))
    if not mla:
        if major == 9 and topk_one:
            return "fa3"
        if (
            major == 10
            and topk_one
            and (algorithm is None or topk is not None or str(algorithm).upper() == "DFLASH")
        ):
            return "trtllm_mha"
        return "flashinfer"
    hooked = model_hook_backend(gpu, mla, architecture)
    if hooked:
        return hooked
    if major == 9:
        return "fa3"
    if major == 10:
        return "flashinfer"
    return "triton"


#: ``get_total_num_kv_heads``'s attributes, in its order (num_attention_heads when none is set).
_KV_HEAD_KEYS = (
    "n_head_kv",
    "num_kv_heads",
    "num_key_value_heads",
    "multi_query_group_num",
    "num_attention_groups",
)


def _mla_heads(config: dict[str, Any] | None) -> int | None:
    """The target's KV heads as ``ModelConfig.get_total_num_kv_heads`` reads them (None when
    unread or unreadable: the aiter default)."""
    cfg = context.text_config(config or {})
    key = next((k for k in _KV_HEAD_KEYS if cfg.get(k) is not None), "num_attention_heads")
    try:
        return configvalues.integer(cfg, key, 1)
    except configvalues.ConfigShapeError:
        return None


#: ``_mla_backend_page_constraints``: backend -> the page sizes it accepts (else 64).
PAGE_CONSTRAINTS: dict[str, tuple[int, ...]] = {
    "flashmla": (64,),
    "trtllm_mla": (32, 64),
    "cutedsl_mla": (32, 64),
    "trtllm_mha": (16, 32, 64, 128),
    "hpc_ops": (64,),
}


def resolved_page_size(backend: str, page_size: int | None) -> int:
    """The page size after the backend's snap (``None`` is SGLang's default of 1)."""
    allowed = PAGE_CONSTRAINTS.get(backend)
    if allowed is not None and page_size not in allowed:
        return 64
    return page_size or 1


def backend_error(gpu: Gpu, backend: str, values: dict[str, Any]) -> str | None:
    """``handle_attention_backend_compatibility``'s refusals for a backend on a GPU."""
    major = gpu.capability[0]
    if backend == "trtllm_mha" and major not in (9, 10, 12):
        return (
            "TRTLLM MHA backend for prefill requires Hopper (SM90), Blackwell (SM100), or SM120 "
            "GPUs. Please use a different prefill backend."
        )
    if backend == "trtllm_mha" and major == 12 and values.get("kv_cache_dtype") == "fp8_e4m3":
        return "TRTLLM FMHAv2 prefill on SM120 does not support fp8_e4m3 KV cache or skip-softmax."
    if backend == "trtllm_mla":
        if major not in (10, 11, 12):
            return (
                "TRTLLM MLA backend is only supported on Blackwell GPUs (SM100/SM12x). Please "
                "use a different backend."
            )
        if values.get("kv_cache_dtype", "auto") not in ("fp8_e4m3", "bf16", "auto"):
            return (
                "TensorRT-LLM MLA backend only supports kv-cache-dtype of fp8_e4m3, bf16, or auto."
            )
    return None


def predict_server(
    argv: list[str],
    gpu: Gpu,
    target_config: dict[str, Any] | None,
    draft_config: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
) -> ServerOutcome:
    """Resolve ``argv`` (``launch_server`` form, no positional model) as SGLang 0.5.23 would."""
    env = env or {}
    parsed = parse_server_argv(argv)
    if parsed.error:
        return ServerOutcome("argparse", parsed.error)
    values = dp_attention_layout(parsed.values)
    given_draft = draft_config
    try:
        # ``get_config`` applies --json-model-override-args to target and draft alike.
        target_config, draft_config = effective_configs(values, target_config, draft_config)
    except OverrideArgsError as exc:
        return ServerOutcome(exc.exception, exc.message)
    mla = is_mla(target_config)
    arch = configvalues.architecture(target_config)
    if target_config is not None:
        # The model config (and its context check) is read by the first hook that needs it,
        # before the attention and speculative handlers.
        target_check = context.check_context(
            target_config, None, context_length=values.get("context_length"), env=env
        )
        if target_check.verdict == context.ContextVerdict.STARTUP_FAILS:
            return ServerOutcome("ValueError", target_check.message)
    heads = _mla_heads(target_config) if gpu.rocm and mla else None
    backend, refused_here = backend_before_default(values, gpu, mla, arch)
    if refused_here:
        return ServerOutcome("ValueError", refused_here)
    backend = backend or default_attention_backend(gpu, mla, values, arch, heads)
    refused = backend_error(gpu, backend, values)
    if refused:
        return ServerOutcome("ValueError", refused)
    attn_dp, dp = int(values.get("attn_dp_size", 1)), int(values.get("dp_size", 1))
    if attn_dp > 1 and dp > 1:  # _handle_data_parallelism
        return ServerOutcome(
            "ValueError",
            f"--dp-size {dp} with --attn-dp-size {attn_dp}: data-parallel replicas combined "
            "with attention data parallelism are not supported.",
        )
    values["attention_backend"] = backend
    values["page_size"] = resolved_page_size(backend, values.get("page_size"))
    res = resolve_launch(values, target_config, given_draft, device="cuda", hip=gpu.rocm)
    if res.errors:
        err = res.errors[0]
        return ServerOutcome(err.exception, err.message, resolution=res)
    spec = res.speculative
    mrr = res.get("max_running_requests")
    mem = settings_from_values(gpu, values, spec, mla)
    chunk = mem.chunked_prefill_size
    if int(values.get("attn_dp_size", 1)) > 1:
        chunk = chunk // int(values["attn_dp_size"])
    fields: dict[str, Any] = {
        "speculative_algorithm": res.algorithm,
        "speculative_num_steps": res.get("speculative_num_steps"),
        "speculative_eagle_topk": res.get("speculative_eagle_topk"),
        "speculative_num_draft_tokens": res.get("speculative_num_draft_tokens"),
        "max_running_requests": mrr,
        "mem_fraction_static": mem.mem_fraction_static,
        "chunked_prefill_size": chunk,
        "cuda_graph_max_bs_decode": mem.cuda_graph_max_bs,
        "page_size": values["page_size"],
        "attention_backend": backend,
        "enable_mixed_chunk": bool(res.get("enable_mixed_chunk")),
        "disable_overlap_schedule": bool(res.get("disable_overlap_schedule")),
        "speculative_adaptive": bool(res.get("speculative_adaptive")),
        "reserved_tokens": res.reserved_tokens,
    }
    out = ServerOutcome(ACCEPTED, fields=fields, resolution=res)
    if target_config is None:
        return out
    reserved = res.reserved_tokens
    check = context.check_context(
        target_config,
        None,
        context_length=values.get("context_length"),
        env=env,
        reserved_tokens=reserved,
    )
    if check.verdict == context.ContextVerdict.STARTUP_FAILS:
        return ServerOutcome("ValueError", check.message, fields=fields, resolution=res)
    out.context_len = check.effective
    derived = res.values.get("speculative_draft_model_path")
    if spec and draft_config is None and derived is not None and derived.source == "derived":
        draft_config = target_config  # an MTP target is its own draft checkpoint
    if spec and draft_config is not None:
        draft_check = context.check_context(
            target_config,
            draft_config,
            context_length=values.get("context_length"),
            env=env,
            reserved_tokens=reserved,
        )
        if draft_check.verdict == context.ContextVerdict.STARTUP_FAILS:
            out.draft_outcome, out.draft_message = "ValueError", draft_check.message
        else:
            out.draft_outcome = ACCEPTED
            out.draft_context_len = draft_check.effective
    return out
