"""One launch model: from a SpecServer spec and its model configs to the exact SGLang launch.

The one place that turns a SpecServer into SGLang argv (``specserver_args``) and into the policy
context the auto-speculation policy starts from (``policy_context_for``). The operator renders
engines with ``build_engine_config``, ``lint`` reads SpecServers through ``specserver_args`` (each
flag carries the spec field that set it), ``plan --from`` and ``replay --policy`` plan the same
launch. Pure: configs are given, nothing is read or fetched here.

Every speculative flag is rendered explicitly, auto-chosen values included, and always an
explicit ``--max-running-requests``: the spec's, or the recommendation for the KV pool of the mode
being rendered (with the draft when speculating, without it otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from specserver_advisor import drafts, findings, launch_findings
from specserver_advisor.drafts import has_mtp_layers
from specserver_advisor.gpus import Gpu, UnknownGpuError, lookup_gpu
from specserver_advisor.launch_fraction import computed_fraction, given_fraction_message
from specserver_advisor.models import Algorithm, SpecServerSpec
from specserver_advisor.plan import DEFAULT_CONCURRENCY, Plan, PlanInputs, make_plan, policy_context
from specserver_advisor.policy import PolicyContext
from specserver_advisor.replay import NEUTRAL_CONTEXT
from specserver_advisor.sglang.flags import match_option, parse_server_argv
from specserver_advisor.sglang.resolve import MTP_TARGETS, Resolution

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
#: Algorithms that load a draft model: without one, only a target with MTP layers can run them.
NEEDS_DRAFT = drafts.NEEDS_DRAFT


class ModelConfigs(Protocol):
    """Target and draft HF configs with their weight sizes (the operator's and the CLI's)."""

    @property
    def target(self) -> dict[str, Any]: ...

    @property
    def draft(self) -> dict[str, Any] | None: ...

    @property
    def target_weight_bytes(self) -> int | None: ...

    @property
    def draft_weight_bytes(self) -> int | None: ...


@dataclass(frozen=True)
class Arg:
    """One rendered flag: its value (None for a switch) and the spec field that set it."""

    flag: str
    value: str | None
    source: str  # "model", "engine", "speculative", "draft", "resources", "engine.extraArgs.K"


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
    env: dict[str, str] = field(default_factory=dict)
    #: Weights per GPU (target, and the draft when speculating): sizes the pod's requests.
    weight_gib: float = 0.0
    #: The --mem-fraction-static SGLang will use, and where it came from (Spec, Heuristic:
    #: SGLang's own, not rendered; Computed: rendered by the operator, see memfraction.py).
    mem_fraction_static: float | None = None
    mem_fraction_static_source: str | None = None
    mem_fraction_static_reason: str = ""
    #: The plan behind the rendering (None when the spec was refused before planning).
    plan: Plan | None = field(default=None, compare=False, repr=False)


def is_mtp_target(target_config: dict[str, Any] | None) -> bool:
    """Whether the target carries its own MTP layers (NEXTN and friends need no draft)."""
    arch = str(((target_config or {}).get("architectures") or [""])[0])
    return arch in MTP_TARGETS and has_mtp_layers(target_config) is not False


def draftless_error(
    algorithm: str | None, has_draft: bool, target_config: dict[str, Any] | None
) -> str | None:
    """Why a draft-model algorithm without a draft cannot run on this target (None: it can)."""
    if algorithm not in NEEDS_DRAFT or has_draft or is_mtp_target(target_config):
        return None
    arch = str(((target_config or {}).get("architectures") or [""])[0])
    return (
        f"{algorithm} on a {arch or 'non-MTP'} target needs a draft (spec.draft, or "
        "--speculative-draft-model-path): the target has no MTP layers, so SGLang would load "
        "the target checkpoint itself as the draft"
    )


def spec_env(spec: SpecServerSpec) -> dict[str, str]:
    """The engine environment the spec sets."""
    return {v.name: v.value for v in spec.engine.env}


def specserver_args(
    spec: SpecServerSpec,
    speculative: bool,
    mtp_target: bool = False,
    resolution: Resolution | None = None,
    max_running_requests: int | None = None,
    mem_fraction: float | None = None,
) -> list[Arg]:
    """The SGLang flags a SpecServer renders to, in order, each with the field that set it.

    ``resolution``: SGLang's resolved view, whose auto-chosen shape is then rendered explicitly
    (None: the spec's own values). ``max_running_requests``: the cap to render (None: none).
    ``mem_fraction``: the operator's computed fraction when the spec gives none.
    """
    out: list[Arg] = []

    def add(flag: str, value: Any, source: str) -> None:
        if value is not None:
            out.append(Arg(flag, None if value is True else str(value), source))

    e = spec.engine
    add("--model-path", spec.model.path, "model")
    add("--revision", spec.model.revision or None, "model")
    add("--host", "0.0.0.0", "engine")
    add("--port", e.port, "engine")
    add("--enable-metrics", True, "engine")
    add("--tp-size", spec.resources.gpus, "resources")
    add("--context-length", e.context_length or None, "engine")
    add("--mem-fraction-static", e.mem_fraction_static or mem_fraction, "engine")
    add("--max-running-requests", max_running_requests, "engine")
    if speculative:
        out += _speculative_args(spec, mtp_target, resolution)
    for k, item in enumerate(e.extra_args):
        out.append(Arg(item, None, f"engine.extraArgs.{k}"))
    return out


def argv_of(args: list[Arg]) -> list[str]:
    """Flatten ``specserver_args`` into argv (extraArgs items stay single tokens)."""
    argv: list[str] = []
    for a in args:
        argv.append(a.flag)
        if a.value is not None:
            argv.append(a.value)
    return argv


def _speculative_args(spec: SpecServerSpec, mtp_target: bool, r: Resolution | None) -> list[Arg]:
    s = spec.speculative
    out = [Arg("--speculative-algorithm", s.algorithm.value, "speculative")]
    if spec.draft and not mtp_target:
        out.append(Arg("--speculative-draft-model-path", spec.draft.path, "draft"))
        if spec.draft.revision:
            out.append(Arg("--speculative-draft-model-revision", spec.draft.revision, "draft"))
    steps = r.get("speculative_num_steps") if r else s.num_steps
    topk = r.get("speculative_eagle_topk") if r else s.eagle_topk
    ndt = r.get("speculative_num_draft_tokens") if r else s.num_draft_tokens
    pairs: list[tuple[str, Any]]
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
    out += [Arg(f, str(v), "speculative") for f, v in pairs if v is not None]
    if s.adaptive:
        out.append(Arg("--speculative-adaptive", None, "speculative"))
    return out


#: Flags that make SGLang read arguments or the model config from somewhere the operator never
#: checks: a ``--config`` YAML is merged into the argv before the CLI's own flags, so it could set
#: every owned flag the operator leaves unset; ``--json-model-override-args`` rewrites the model
#: config after the operator validated it (architecture, context length, rope scaling: the
#: draft/target context check and memory sizing would judge a different model). Refused like
#: owned flags, in any spelling argparse accepts (docs/security.md).
ARG_SOURCES = {
    "--config": "reads engine arguments from a file",
    "--decrypted-config-file": "replaces the model config the operator validated",
    "--decrypted-draft-config-file": "replaces the draft config the operator validated",
    "--json-model-override-args": "rewrites the model config the operator validated",
}


def _arg_source(option: str) -> str | None:
    """The arg-source flag ``option`` spells (exactly or as an argparse prefix), if any."""
    flag, _ = match_option(option)
    return flag.cli if flag is not None and flag.cli in ARG_SOURCES else None


def owned_in_extra(extra: list[str]) -> str | None:
    """Why extraArgs may not carry a flag the spec owns (None when it carries none)."""
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


def plan_launch(
    spec: SpecServerSpec,
    configs: ModelConfigs,
    gpu: Gpu,
    argv: list[str],
    env: dict[str, str],
    concurrency: list[int] | None = None,
    accept_length: float | None = None,
) -> Plan:
    """The advisor's plan of this SpecServer's launch ``argv`` (resolution, memory, curves)."""
    parsed = parse_server_argv(argv)
    return make_plan(
        PlanInputs(
            parsed.values,
            configs.target,
            # Speculation off: the draft is not loaded; neither its memory nor its context matters.
            configs.draft if "--speculative-algorithm" in argv else None,
            gpu,
            env=env,
            target_weight_bytes=configs.target_weight_bytes,
            draft_weight_bytes=configs.draft_weight_bytes,
            accept_length=accept_length,
            input_len=spec.engine.expected_input_tokens,
            output_len=spec.engine.expected_output_tokens,
            concurrency=list(concurrency or DEFAULT_CONCURRENCY),
        )
    )


def build_engine_config(
    spec: SpecServerSpec,
    configs: ModelConfigs,
    speculative: bool,
    env: dict[str, str] | None = None,
) -> EngineConfig:
    """Validate and render; an invalid result carries the rule code as ``reason``."""
    env = spec_env(spec) if env is None else env
    extra = list(spec.engine.extra_args)
    owned = owned_in_extra(extra)
    if owned:
        return EngineConfig(False, "OwnedFlagInExtraArgs", owned)
    parsed_extra = parse_server_argv(extra)
    if parsed_extra.issues:
        issue = parsed_extra.issues[0]
        code = findings.REMOVED_FLAG if issue.kind == "ambiguous" or issue.hint else "InvalidFlag"
        return EngineConfig(False, code, f"extraArgs: {issue.message}")
    try:
        gpu = lookup_gpu(spec.resources.gpu_type)
    except UnknownGpuError as exc:
        return EngineConfig(False, "UnknownGPU", f"resources.gpuType: {exc}")
    mtp = is_mtp_target(configs.target)
    if speculative:
        algorithm = spec.speculative.algorithm.value
        refused = draftless_error(algorithm, bool(spec.draft), configs.target)
        if refused:
            return EngineConfig(False, findings.DRAFT_PATH_MISMATCH, refused)
    plan = plan_launch(spec, configs, gpu, argv_of(specserver_args(spec, speculative, mtp)), env)
    cannot = launch_findings.refusal(plan, speculative)
    computed = None
    if cannot and cannot[0] == findings.NO_KV_MEMORY:
        computed = computed_fraction(spec, plan, speculative, gpu.name)
    mem_fraction = computed.fraction if computed else None
    if computed is not None and mem_fraction is None:
        return EngineConfig(False, findings.NO_KV_MEMORY, computed.message, plan=plan)
    if mem_fraction is not None:
        argv = argv_of(specserver_args(spec, speculative, mtp, mem_fraction=mem_fraction))
        plan = plan_launch(spec, configs, gpu, argv, env)
        cannot = launch_findings.refusal(plan, speculative)
    if cannot and cannot[0] == findings.NO_KV_MEMORY and spec.engine.mem_fraction_static:
        message = given_fraction_message(spec, plan, speculative)
        return EngineConfig(False, findings.NO_KV_MEMORY, message, plan=plan)
    if cannot:
        return EngineConfig(False, cannot[0], cannot[1], plan=plan)
    cfg = EngineConfig(
        True,
        "Valid",
        "the advisor finds nothing that stops SGLang starting",
        speculative=speculative,
        env=dict(env),
        plan=plan,
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
    _choose_cap(cfg, spec, plan, speculative)
    cfg.args = argv_of(
        specserver_args(
            spec,
            speculative,
            mtp,
            plan.resolution if speculative else None,
            cfg.max_running_requests,
            mem_fraction,
        )
    )
    final = parse_server_argv(cfg.args)
    assert not final.issues, final.issues  # rendered from validated parts
    cfg.resolved = launch_findings.summary(plan, speculative)
    cfg.weight_gib = plan.mem.target_weight_gib + (plan.mem.draft_weight_gib if speculative else 0)
    cfg.warnings = launch_findings.rule_findings(
        cfg.args,
        env,
        configs.target,
        configs.draft if speculative else None,
        spec.resources.gpu_type,
    )
    return cfg


def _choose_cap(cfg: EngineConfig, spec: SpecServerSpec, plan: Plan, speculative: bool) -> None:
    if spec.engine.max_running_requests:
        cfg.max_running_requests = spec.engine.max_running_requests
        cfg.max_running_requests_source = "Spec"
        cfg.max_running_requests_reason = "given in spec.engine.maxRunningRequests"
        return
    fits = plan.fits_on if speculative else plan.fits_off
    graph = plan.mem.settings.cuda_graph_max_bs
    cfg.max_running_requests = max(1, min(plan.recommended_mrr if speculative else fits, graph))
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


def policy_context_for(spec: SpecServerSpec, configs: ModelConfigs) -> PolicyContext:
    """The performance model's crossover and break-even for this SpecServer (speculation on).

    Plans the launch the spec renders when speculating (memFractionStatic, extraArgs, env and
    KV dtype included); the neutral context (no load-based decisions) when it cannot be planned.
    """
    try:
        gpu = lookup_gpu(spec.resources.gpu_type)
    except UnknownGpuError:
        return NEUTRAL_CONTEXT
    argv = argv_of(specserver_args(spec, True, is_mtp_target(configs.target)))
    if parse_server_argv(argv).issues:
        return NEUTRAL_CONTEXT
    plan = plan_launch(spec, configs, gpu, argv, spec_env(spec))
    if plan.resolution.errors or plan.mem.kv_pool_tokens_with_draft <= 0:
        return NEUTRAL_CONTEXT
    return policy_context(
        plan, spec.auto_speculation, engine_adapts_steps=spec.speculative.adaptive
    )
