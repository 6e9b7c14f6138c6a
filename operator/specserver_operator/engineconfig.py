"""From a SpecServer and its model configs to the engine's exact SGLang argv (pure).

Validates with the advisor (what SGLang would refuse, the draft/target context, memory), then
renders every speculative flag explicitly, auto-chosen values included, and always an explicit
``--max-running-requests``: the spec's, or the advisor's recommendation for the KV pool of the
mode being rendered (with the draft when speculating, without it otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from specserver_advisor import drafts, findings
from specserver_advisor.drafts import has_mtp_layers
from specserver_advisor.gpus import UnknownGpuError, lookup_gpu
from specserver_advisor.memfraction import (
    CEILING,
    FractionChoice,
    choose_fraction,
    fraction_for_tokens,
)
from specserver_advisor.models import Algorithm, SpecServerSpec
from specserver_advisor.plan import Plan, PlanInputs, make_plan, policy_context
from specserver_advisor.policy import PolicyContext
from specserver_advisor.replay import NEUTRAL_CONTEXT
from specserver_advisor.sglang.flags import match_option, parse_server_argv
from specserver_advisor.sglang.resolve import MTP_TARGETS
from specserver_operator.configsource import ModelConfigs

#: Fields the operator renders itself; extraArgs may not set them (spec field to use instead).
OWNED = {
    "max_running_requests": "engine.maxRunningRequests",
    "host": "(always 0.0.0.0)",
    "port": "engine.port",
    "enable_metrics": "(always on)",
    "model_path": "model.path",
    "tp_size": "resources.gpus",
    "context_length": "engine.contextLength",
    "mem_fraction_static": "engine.memFractionStatic",
    "revision": "model.revision",
}
NEEDS_DRAFT = drafts.NEEDS_DRAFT


@dataclass
class EngineConfig:
    """The outcome of validating and rendering one SpecServer in one mode."""

    valid: bool
    reason: str
    message: str
    args: list[str] = field(default_factory=list)
    speculative: bool = False
    max_running_requests: int | None = None
    max_running_requests_source: str | None = None
    max_running_requests_reason: str = ""
    resolved: dict[str, Any] = field(default_factory=dict)
    warnings: list[tuple[str, str]] = field(default_factory=list)
    #: Weights per GPU (target, and the draft when speculating): sizes the pod's requests.
    weight_gib: float = 0.0
    #: The --mem-fraction-static SGLang will use, and where it came from (Spec, Heuristic:
    #: SGLang's own, not rendered; Computed: rendered by the operator, see memfraction.py).
    mem_fraction_static: float | None = None
    mem_fraction_static_source: str | None = None
    mem_fraction_static_reason: str = ""


#: Flags that make SGLang read arguments or the model config from a file the operator never
#: sees: a ``--config`` YAML is merged into the argv before the CLI's own flags, so it could set
#: every owned flag the operator leaves unset (docs/security.md). Refused like owned flags.
ARG_SOURCES = {
    "--config": "reads engine arguments from a file",
    "--decrypted-config-file": "replaces the model config the operator validated",
    "--decrypted-draft-config-file": "replaces the draft config the operator validated",
}
#: argparse accepts unambiguous prefixes; ``--conf`` is the shortest that only ``--config`` has.
_SHORTEST_PREFIX = {"--config": 6}


def _arg_source(option: str) -> str | None:
    """The arg-source flag ``option`` spells (exactly or as an argparse prefix), if any."""
    for flag in ARG_SOURCES:
        if option == flag:
            return flag
        if flag.startswith(option) and len(option) >= _SHORTEST_PREFIX.get(flag, len(flag)):
            return flag
    return None


def _owned_in_extra(extra: list[str]) -> str | None:
    for item in extra:
        if not item.startswith("--"):
            continue
        source = _arg_source(item.split("=", 1)[0])
        if source:
            return (
                f"extraArgs may not set {source} (it {ARG_SOURCES[source]}, behind the "
                "operator's back; give the settings as spec fields or plain extraArgs)"
            )
        flag, _ = match_option(item.split("=", 1)[0])
        if flag is None:
            continue
        if flag.field in OWNED or flag.field.startswith("speculative_"):
            use = OWNED.get(flag.field, "spec.speculative")
            return f"extraArgs may not set {flag.cli} (the operator renders it; use {use})"
    return None


def _base_args(spec: SpecServerSpec, mem_fraction: float | None = None) -> list[str]:
    e = spec.engine
    args = ["--model-path", spec.model.path]
    if spec.model.revision:
        args += ["--revision", spec.model.revision]
    args += [
        "--host",
        "0.0.0.0",
        "--port",
        str(e.port),
        "--enable-metrics",
        "--tp-size",
        str(spec.resources.gpus),
    ]
    if e.context_length:
        args += ["--context-length", str(e.context_length)]
    fraction = e.mem_fraction_static or mem_fraction
    if fraction:
        args += ["--mem-fraction-static", str(fraction)]
    return args


def _spec_args(spec: SpecServerSpec, plan: Plan | None, mtp: bool) -> list[str]:
    s = spec.speculative
    algo = s.algorithm.value
    args = ["--speculative-algorithm", algo]
    if spec.draft and not mtp:
        args += ["--speculative-draft-model-path", spec.draft.path]
        if spec.draft.revision:
            args += ["--speculative-draft-model-revision", spec.draft.revision]
    r = plan.resolution if plan else None
    steps = r.get("speculative_num_steps") if r else s.num_steps
    topk = r.get("speculative_eagle_topk") if r else s.eagle_topk
    ndt = r.get("speculative_num_draft_tokens") if r else s.num_draft_tokens
    if s.algorithm == Algorithm.NGRAM:
        n = s.ngram
        pairs = [
            ("--speculative-num-draft-tokens", ndt),
            ("--speculative-ngram-min-bfs-breadth", n.min_bfs_breadth if n else None),
            ("--speculative-ngram-max-bfs-breadth", n.max_bfs_breadth if n else None),
            ("--speculative-ngram-match-type", n.match_type.value if n and n.match_type else None),
            ("--speculative-ngram-max-trie-depth", n.max_trie_depth if n else None),
            ("--speculative-ngram-capacity", n.capacity if n else None),
        ]
    elif s.algorithm in (Algorithm.DFLASH, Algorithm.DSPARK):
        pairs = [("--speculative-num-draft-tokens", ndt)]
    else:
        pairs = [
            ("--speculative-num-steps", steps),
            ("--speculative-eagle-topk", topk),
            ("--speculative-num-draft-tokens", ndt),
        ]
    pairs += [
        ("--speculative-accept-threshold-single", s.accept_threshold_single or 1.0),
        ("--speculative-accept-threshold-acc", s.accept_threshold_acc or 1.0),
        ("--speculative-draft-kv-cache-dtype", s.draft_kv_cache_dtype),
    ]
    for flag, value in pairs:
        if value is not None:
            args += [flag, str(value)]
    return args


def build_engine_config(
    spec: SpecServerSpec,
    configs: ModelConfigs,
    speculative: bool,
    env: dict[str, str] | None = None,
) -> EngineConfig:
    """Validate and render; an invalid result carries the rule code as ``reason``."""
    env = {v.name: v.value for v in spec.engine.env} if env is None else env
    extra = list(spec.engine.extra_args)
    owned = _owned_in_extra(extra)
    if owned:
        return EngineConfig(False, "OwnedFlagInExtraArgs", owned)
    parsed_extra = parse_server_argv(extra)
    if parsed_extra.issues:
        issue = parsed_extra.issues[0]
        code = findings.REMOVED_FLAG if issue.kind in ("removed", "ambiguous") else "InvalidFlag"
        return EngineConfig(False, code, f"extraArgs: {issue.message}")
    try:
        gpu = lookup_gpu(spec.resources.gpu_type)
    except UnknownGpuError as exc:
        return EngineConfig(False, "UnknownGPU", f"resources.gpuType: {exc}")
    arch = str((configs.target.get("architectures") or [""])[0])
    mtp = arch in MTP_TARGETS and has_mtp_layers(configs.target) is not False
    algo = spec.speculative.algorithm.value
    if speculative and algo in NEEDS_DRAFT and not spec.draft and not mtp:
        return EngineConfig(
            False,
            findings.DRAFT_PATH_MISMATCH,
            f"{algo} on a {arch or 'non-MTP'} target needs spec.draft: without "
            "it SGLang loads the target checkpoint as the draft",
        )
    head = _base_args(spec) + (_spec_args(spec, None, mtp) if speculative else [])
    plan = _plan(spec, configs, gpu, head + extra, env)
    invalid = _check(plan, speculative)
    computed = None
    if invalid and invalid.reason == findings.NO_KV_MEMORY:
        computed = _computed_fraction(spec, plan, speculative, gpu.name)
    mem_fraction = computed.fraction if computed else None
    if computed is not None and mem_fraction is None:
        return EngineConfig(False, findings.NO_KV_MEMORY, computed.message)
    if mem_fraction is not None:
        head = _base_args(spec, mem_fraction) + (_spec_args(spec, None, mtp) if speculative else [])
        plan = _plan(spec, configs, gpu, head + extra, env)
        invalid = _check(plan, speculative)
    if invalid and invalid.reason == findings.NO_KV_MEMORY and spec.engine.mem_fraction_static:
        message = _given_fraction_message(spec, plan, speculative)
        return EngineConfig(False, findings.NO_KV_MEMORY, message)
    if invalid:
        return invalid
    cfg = EngineConfig(
        True,
        "Valid",
        "the advisor finds nothing that stops SGLang starting",
        speculative=speculative,
        mem_fraction_static=plan.mem.settings.mem_fraction_static,
        mem_fraction_static_source=(
            "Spec" if spec.engine.mem_fraction_static else "Computed" if computed else "Heuristic"
        ),
        mem_fraction_static_reason=(
            computed.message
            if computed
            else "given in spec.engine.memFractionStatic"
            if spec.engine.mem_fraction_static
            else "SGLang's heuristic for this GPU leaves room for the KV cache"
        ),
    )
    if spec.engine.max_running_requests:
        cfg.max_running_requests = spec.engine.max_running_requests
        cfg.max_running_requests_source = "Spec"
        cfg.max_running_requests_reason = "given in spec.engine.maxRunningRequests"
    else:
        fits = plan.fits_on if speculative else plan.fits_off
        graph = plan.mem.settings.cuda_graph_max_bs
        value = max(1, min(plan.recommended_mrr if speculative else fits, graph))
        cfg.max_running_requests = value
        cfg.max_running_requests_source = "Computed"
        pool = "with" if speculative else "without"
        cfg.max_running_requests_reason = (
            f"KV pool {pool} the draft holds {fits} requests of "
            f"{spec.engine.expected_input_tokens}+{spec.engine.expected_output_tokens} tokens"
            + (
                f"; speculation stops paying near {plan.crossover_concurrency:.0f}"
                if speculative and plan.crossover_concurrency
                else ""
            )
        )
    body = _spec_args(spec, plan, mtp) if speculative else []
    cfg.args = [
        *_base_args(spec, mem_fraction),
        "--max-running-requests",
        str(cfg.max_running_requests),
        *body,
        *extra,
    ]
    final = parse_server_argv(cfg.args)
    assert not final.issues, final.issues  # rendered from validated parts
    cfg.resolved = _summary(plan, speculative)
    cfg.weight_gib = plan.mem.target_weight_gib + (plan.mem.draft_weight_gib if speculative else 0)
    cfg.warnings = _warnings(spec, plan, cfg, speculative)
    return cfg


def _given_fraction_message(spec: SpecServerSpec, plan: Plan, speculative: bool) -> str:
    """SPEC016 for an explicit engine.memFractionStatic, in the author's terms."""
    mem = plan.mem
    with_draft = speculative and mem.draft_weight_gib > 0
    weights = mem.target_weight_gib + (mem.draft_weight_gib if with_draft else 0.0)
    least = fraction_for_tokens(mem, 1, with_draft)
    fix = (
        f"set it to at least {least:.3f}"
        if least <= CEILING
        else "it cannot fit on this GPU at any safe value: add GPUs or use a quantized checkpoint"
    )
    return (
        f"engine.memFractionStatic {spec.engine.mem_fraction_static} leaves no KV cache after "
        f"{weights:.1f} GiB of weights{' with the draft' if with_draft else ''}: {fix}, or "
        "remove it and the operator computes one"
    )


def _computed_fraction(
    spec: SpecServerSpec, plan: Plan, speculative: bool, gpu_name: str
) -> FractionChoice | None:
    """A fraction to render when the spec leaves it to SGLang and its heuristic leaves no KV."""
    pool = (
        plan.mem.kv_pool_tokens_with_draft if speculative else plan.mem.kv_pool_tokens_without_draft
    )
    if spec.engine.mem_fraction_static or pool > 0:
        return None
    r = plan.resolution
    request = spec.engine.expected_input_tokens + spec.engine.expected_output_tokens
    request += r.reserved_tokens + (2 * r.draft_slots if speculative else 0)
    planned = spec.engine.max_running_requests or plan.mem.settings.cuda_graph_max_bs
    return choose_fraction(
        plan.mem,
        request_tokens=request,
        planned_requests=planned,
        with_draft=speculative and plan.mem.draft_weight_gib > 0,
        gpus=spec.resources.gpus,
        gpu_name=gpu_name,
    )


def _plan(
    spec: SpecServerSpec, configs: ModelConfigs, gpu: Any, args: list[str], env: dict[str, str]
) -> Plan:
    parsed = parse_server_argv(args)
    return make_plan(
        PlanInputs(
            parsed.values,
            configs.target,
            # Speculation off: the draft is not loaded; neither its memory nor its context matters.
            configs.draft if "--speculative-algorithm" in args else None,
            gpu,
            env=env,
            target_weight_bytes=configs.target_weight_bytes,
            draft_weight_bytes=configs.draft_weight_bytes,
            input_len=spec.engine.expected_input_tokens,
            output_len=spec.engine.expected_output_tokens,
            concurrency=[1, 2, 4, 8, 16, 32, 64],
        )
    )


def _check(plan: Plan, speculative: bool) -> EngineConfig | None:
    if plan.resolution.errors:
        err = plan.resolution.errors[0]
        return EngineConfig(
            False,
            findings.startup_error_code(err),
            f"SGLang would fail at startup: {err.exception}: {err.message}",
        )
    if plan.context.verdict.value == "startup_fails":
        return EngineConfig(False, findings.DRAFT_CONTEXT_SHORTER, _context_message(plan))
    pool = (
        plan.mem.kv_pool_tokens_with_draft if speculative else plan.mem.kv_pool_tokens_without_draft
    )
    if pool <= 0:
        return EngineConfig(False, findings.NO_KV_MEMORY, plan.mem.error or "no KV memory")
    return None


def _context_message(plan: Plan) -> str:
    """SPEC002 for the SpecServer's author: which length, which model, what to change."""
    ctx = plan.context
    if ctx.failing_model == "draft" and ctx.draft is not None:
        return (
            f"the draft supports {ctx.draft} tokens of context, fewer than the {ctx.effective} "
            "the target runs with: SGLang refuses to start. Set engine.contextLength to "
            f"{ctx.draft} or less, or use a draft trained for the longer context "
            "(SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 in engine.env starts it anyway, with "
            f"wrong drafts past {ctx.draft} tokens)"
        )
    if ctx.failing_model == "target":
        return (
            f"engine.contextLength is longer than the {ctx.target} tokens the model supports: "
            f"SGLang refuses to start. Set engine.contextLength to {ctx.target} or less "
            "(SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 in engine.env overrides, at the risk "
            "of wrong output)"
        )
    return ctx.message


def _summary(plan: Plan, speculative: bool) -> dict[str, Any]:
    r = plan.resolution
    # max_running_requests is always rendered explicitly; status explains it on its own.
    notes = [
        f"{name}: {v.reason}"
        for name, v in r.values.items()
        if v.source in ("auto", "forced", "derived") and v.reason and name != "max_running_requests"
    ]
    return {
        "algorithm": r.algorithm if speculative else None,
        "numSteps": r.get("speculative_num_steps") if speculative else None,
        "eagleTopk": r.get("speculative_eagle_topk") if speculative else None,
        "numDraftTokens": r.get("speculative_num_draft_tokens") if speculative else None,
        "contextLength": plan.context.effective,
        "kvPoolTokens": plan.mem.kv_pool_tokens_with_draft
        if speculative
        else plan.mem.kv_pool_tokens_without_draft,
        "notes": notes[:10],
    }


def _warnings(
    spec: SpecServerSpec, plan: Plan, cfg: EngineConfig, speculative: bool
) -> list[tuple[str, str]]:
    out = []
    if plan.context.verdict.value == "starts_with_override":
        out.append((findings.CONTEXT_OVERRIDE_ENV, plan.context.message))
    for w in plan.context.warnings:
        if "rope scaling" in w:
            out.append((findings.DRAFT_ROPE_SCALING_MISSING, w))
    fits = plan.fits_on if speculative else plan.fits_off
    if cfg.max_running_requests and cfg.max_running_requests > fits:
        out.append(
            (
                findings.CAP_EXCEEDS_KV_POOL,
                f"--max-running-requests {cfg.max_running_requests} exceeds the {fits} "
                f"requests of {spec.engine.expected_input_tokens}+"
                f"{spec.engine.expected_output_tokens} tokens the KV pool holds; the pool "
                "limits and TTFT pays",
            )
        )
    s = spec.speculative
    if speculative and (
        (s.accept_threshold_single or 1.0) < 1 or (s.accept_threshold_acc or 1.0) < 1
    ):
        out.append(
            (
                findings.LOSSY_ACCEPT_THRESHOLD,
                "accept thresholds below 1.0: greedy output no longer matches the target",
            )
        )
    return out


def policy_context_for(spec: SpecServerSpec, configs: ModelConfigs) -> PolicyContext:
    """The performance model's crossover and break-even for this SpecServer (speculation on)."""
    try:
        gpu = lookup_gpu(spec.resources.gpu_type)
    except UnknownGpuError:
        return NEUTRAL_CONTEXT
    arch = str((configs.target.get("architectures") or [""])[0])
    args = _base_args(spec) + _spec_args(spec, None, arch in MTP_TARGETS)
    args += list(spec.engine.extra_args)
    if parse_server_argv(args).issues:
        return NEUTRAL_CONTEXT
    plan = _plan(spec, configs, gpu, args, {v.name: v.value for v in spec.engine.env})
    if plan.resolution.errors or plan.mem.kv_pool_tokens_with_draft <= 0:
        return NEUTRAL_CONTEXT
    return policy_context(plan, spec.auto_speculation)
