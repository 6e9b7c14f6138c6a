"""One launch model: a SpecServer, or SGLang argv + env, with its model configs and GPU, planned.

Everyone plans launches here. The operator renders engines with ``build_engine_config`` (the
flags from ``launch_args.specserver_args``, the one SpecServer -> argv) and starts its policy
from ``policy_context_for``; ``lint``, ``plan --from`` and ``replay --policy`` plan the same
launch; the engine's preflight and simulated engine plan their argv with ``launch_from_argv``,
so their resolved view and memory plan are the objects the operator and lint see. Pure:
configs are given, nothing is read or fetched here.

Every speculative flag is rendered explicitly, auto-chosen values included, and always an
explicit ``--max-running-requests``: the spec's, or the recommendation for the KV pool of the mode
being rendered (with the draft when speculating, without it otherwise).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol

from specserver_advisor import draftcontext, findings, launch_findings, zerosteps
from specserver_advisor.configcheck import ConfigShapeError, check_configs
from specserver_advisor.gpus import Gpu, UnknownGpuError, lookup_gpu
from specserver_advisor.launch_args import (
    ARG_SOURCES,
    NEEDS_DRAFT,
    OWNED,
    argv_of,
    draftless_error,
    is_mtp_target,
    owned_in_extra,
    spec_env,
    specserver_args,
)
from specserver_advisor.launch_fraction import computed_fraction, given_fraction_message
from specserver_advisor.loaders.configs import LoadedConfig
from specserver_advisor.models import AutoSpeculation, SpecServerSpec
from specserver_advisor.plan import (
    DEFAULT_CONCURRENCY,
    Plan,
    PlanInputError,
    PlanInputs,
    make_plan,
    policy_context,
)
from specserver_advisor.policy import PolicyContext
from specserver_advisor.replay import NEUTRAL_CONTEXT
from specserver_advisor.sglang.flags import ParsedArgs, parse_server_argv

#: The reason of an EngineConfig whose model config has a value of the wrong type.
INVALID_MODEL_CONFIG = "InvalidModelConfig"

#: The operator imports the rendering's tables from here (one launch model).
__all__ = [
    "ARG_SOURCES",
    "INVALID_MODEL_CONFIG",
    "NEEDS_DRAFT",
    "OWNED",
    "Configs",
    "EngineConfig",
    "Launch",
    "ModelConfigs",
    "build_engine_config",
    "extra_args_refusal",
    "launch_from_argv",
    "model_config_refusal",
    "plan_argv",
    "plan_launch",
    "policy_context_for",
]


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


@dataclass(frozen=True)
class Configs:
    """``ModelConfigs`` from what the loaders found (the engine image's and the CLI's)."""

    target: dict[str, Any]
    draft: dict[str, Any] | None = None
    target_weight_bytes: int | None = None
    draft_weight_bytes: int | None = None

    @classmethod
    def loaded(cls, target: LoadedConfig, draft: LoadedConfig | None) -> Configs:
        return cls(
            target.config,
            draft.config if draft else None,
            target.weight_bytes,
            draft.weight_bytes if draft else None,
        )


def plan_argv(
    values: dict[str, Any],
    env: dict[str, str],
    configs: ModelConfigs,
    gpu: Gpu,
    *,
    accept_length: float | None = None,
    concurrency: list[int] | None = None,
    input_len: int = 512,
    output_len: int = 128,
    clock_scale: float = 1.0,
    prompt_mix: tuple[tuple[int, float], ...] = (),
) -> Plan:
    """The advisor's plan of one launch's parsed flags ``values`` (resolution, memory, curves).

    Speculation off, the draft is not loaded: neither its memory nor its context matters.

    Raises:
        ConfigShapeError: a config value the plan reads has the wrong type (``configcheck``).
    """
    speculative = bool(values.get("speculative_algorithm"))
    configs = draftcontext.sglang_configs(values, configs)
    check_configs(configs.target, configs.draft if speculative else None)
    return make_plan(
        PlanInputs(
            values,
            configs.target,
            configs.draft if speculative else None,
            gpu,
            env=env,
            target_weight_bytes=configs.target_weight_bytes,
            draft_weight_bytes=configs.draft_weight_bytes if speculative else None,
            accept_length=accept_length,
            input_len=input_len,
            output_len=output_len,
            concurrency=list(concurrency or DEFAULT_CONCURRENCY),
            clock_scale=clock_scale,
            prompt_mix=prompt_mix,
        )
    )


@dataclass
class Launch:
    """One SGLang server launch as the advisor sees it: argv, env, SGLang's view, the plan."""

    argv: list[str]
    env: dict[str, str]
    parsed: ParsedArgs
    #: None when SGLang's parser refuses the argv (``parsed.issues``).
    plan: Plan | None
    configs: ModelConfigs | None = field(default=None, compare=False, repr=False)
    gpu: Gpu | None = field(default=None, compare=False, repr=False)

    def findings(self) -> list[tuple[str, str]]:
        """(code, message) of every warning or error the lint rule registry finds in it."""
        if self.configs is None or self.gpu is None:
            return []
        draft = self.configs.draft if self.speculative else None
        return launch_findings.rule_findings(
            self.argv, self.env, self.configs.target, draft, self.gpu.name
        )

    def policy_context(
        self, policy: AutoSpeculation | None = None, input_len: int = 512, output_len: int = 128
    ) -> PolicyContext:
        """Where Auto starts from on this launch, at the expected request lengths (the neutral
        context when it does not start or has no KV pool to reason on)."""
        if self.plan is None or self.configs is None or self.gpu is None or self.failure():
            return NEUTRAL_CONTEXT
        plan = plan_argv(
            self.parsed.values,
            self.env,
            self.configs,
            self.gpu,
            input_len=input_len,
            output_len=output_len,
        )
        if not plan.resolution.speculative or plan.mem.kv_pool_tokens_with_draft <= 0:
            return NEUTRAL_CONTEXT
        adapts = bool(plan.resolution.get("speculative_adaptive"))
        ctx = policy_context(plan, policy, engine_adapts_steps=adapts)
        if adapts:
            ctx.zero_step_batch = zero_step_batch(plan, plan.resolution.get("max_running_requests"))
        return ctx

    @property
    def speculative(self) -> bool:
        return self.plan is not None and self.plan.resolution.speculative

    def failure(self) -> tuple[str, str] | None:
        """(check, SGLang's own error text) when SGLang would not start; None when it would.

        check: ``arguments`` (the parser), ``resolution`` (a handler raises), ``context`` (a
        context length SGLang refuses) or ``memory`` (no KV cache).
        """
        if self.plan is None:
            return "arguments", self.parsed.issues[0].message
        r = self.plan.resolution
        if r.errors:
            return "resolution", f"{r.errors[0].exception}: {r.errors[0].message}"
        if self.plan.context.verdict.value == "startup_fails":
            return "context", self.plan.context.message
        if self.plan.mem.error:
            return "memory", self.plan.mem.error
        return None


def launch_from_argv(
    argv: list[str],
    env: dict[str, str],
    configs: ModelConfigs,
    gpu: Gpu,
    *,
    accept_length: float | None = None,
    concurrency: list[int] | None = None,
    clock_scale: float = 1.0,
) -> Launch:
    """Plan ``sglang serve`` argv (``MODEL`` positional or ``--model-path``) as it will run."""
    positional = bool(argv) and not argv[0].startswith("-")
    parsed = parse_server_argv(argv, positional_model=positional)
    if parsed.issues:
        return Launch(list(argv), dict(env), parsed, None, configs, gpu)
    plan = plan_argv(
        parsed.values,
        env,
        configs,
        gpu,
        accept_length=accept_length,
        concurrency=concurrency,
        clock_scale=clock_scale,
    )
    return Launch(list(argv), dict(env), parsed, plan, configs, gpu)


def plan_launch(
    spec: SpecServerSpec,
    configs: ModelConfigs,
    gpu: Gpu,
    argv: list[str],
    env: dict[str, str],
    concurrency: list[int] | None = None,
    accept_length: float | None = None,
    prompt_mix: tuple[tuple[int, float], ...] = (),
) -> Plan:
    """The plan of this SpecServer's launch ``argv`` (at the spec's expected request lengths,
    or the prompt lengths ``prompt_mix``)."""
    return plan_argv(
        parse_server_argv(argv).values,
        env,
        configs,
        gpu,
        accept_length=accept_length,
        concurrency=concurrency,
        input_len=spec.engine.expected_input_tokens,
        output_len=spec.engine.expected_output_tokens,
        prompt_mix=prompt_mix,
    )


def extra_args_refusal(spec: SpecServerSpec) -> tuple[str, str] | None:
    """Why ``spec.engine.extraArgs`` cannot be rendered, as (code, message), else None: a flag
    the operator owns (``OwnedFlagInExtraArgs``), then the first one SGLang 0.5.23 would refuse
    (a removed or ambiguous flag: ``SPEC015``; else ``InvalidFlag``). Needs no model config:
    admission checks it for every SpecServer, build_engine_config before rendering."""
    extra = list(spec.engine.extra_args)
    owned = owned_in_extra(extra)
    if owned:
        return "OwnedFlagInExtraArgs", owned
    issues = parse_server_argv(extra).issues
    if issues:
        issue = issues[0]
        code = findings.REMOVED_FLAG if issue.kind == "ambiguous" or issue.hint else "InvalidFlag"
        return code, f"extraArgs: {issue.message}"
    return None


def model_config_refusal(configs: ModelConfigs, speculative: bool) -> str | None:
    """Why the configs cannot be read into the model shape (``configcheck.check_configs``: the
    target, and the draft when speculating), naming where they came from and the key; None
    when they can."""
    try:
        check_configs(configs.target, configs.draft if speculative else None)
    except ConfigShapeError as exc:
        source = getattr(configs, "source", None)
        return f"{source} model config: {exc}" if source else str(exc)
    return None


def build_engine_config(
    spec: SpecServerSpec,
    configs: ModelConfigs,
    speculative: bool,
    env: dict[str, str] | None = None,
) -> EngineConfig:
    """Validate and render; an invalid result carries the rule code as ``reason`` (a flag the
    plan cannot compute with, e.g. speculative.numSteps 10**13 or maxRunningRequests 10**30:
    the CRD bounds neither, is ``InvalidSpec`` naming it, a verdict and no exception)."""
    try:
        return _build_engine_config(spec, configs, speculative, env)
    except PlanInputError as exc:
        return EngineConfig(False, "InvalidSpec", str(exc))


def _build_engine_config(
    spec: SpecServerSpec,
    configs: ModelConfigs,
    speculative: bool,
    env: dict[str, str] | None,
) -> EngineConfig:
    env = spec_env(spec) if env is None else env
    extra_refused = extra_args_refusal(spec)
    if extra_refused is not None:
        return EngineConfig(False, *extra_refused)
    try:
        gpu = lookup_gpu(spec.resources.gpu_type)
    except UnknownGpuError as exc:
        return EngineConfig(False, "UnknownGPU", f"resources.gpuType: {exc}")
    bad_config = model_config_refusal(configs, speculative)
    if bad_config is not None:
        return EngineConfig(False, INVALID_MODEL_CONFIG, bad_config)
    mtp = is_mtp_target(configs.target)
    override: str | None = None
    if speculative:
        algorithm = spec.speculative.algorithm.value
        refused = draftless_error(algorithm, bool(spec.draft), configs.target)
        if refused:
            return EngineConfig(False, findings.DRAFT_PATH_MISMATCH, refused)
        override, refused = draft_override(spec, configs)
        if refused:
            return EngineConfig(False, "InvalidSpec", refused)
    argv = argv_of(specserver_args(spec, speculative, mtp, model_override=override))
    plan = plan_launch(spec, configs, gpu, argv, env)
    cannot = launch_findings.refusal(plan, speculative)
    computed = None
    if cannot and cannot[0] == findings.NO_KV_MEMORY:
        computed = computed_fraction(spec, plan, speculative, gpu.name)
    mem_fraction = computed.fraction if computed else None
    if computed is not None and mem_fraction is None:
        return EngineConfig(False, findings.NO_KV_MEMORY, computed.message, plan=plan)
    if mem_fraction is not None:
        argv = argv_of(
            specserver_args(
                spec, speculative, mtp, mem_fraction=mem_fraction, model_override=override
            )
        )
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
            override,
        )
    )
    final = parse_server_argv(cfg.args)
    assert not final.issues, final.issues  # rendered from validated parts
    if final.values.get("max_running_requests") != plan.resolution.get("max_running_requests"):
        # The rendered cap cuts SGLang's decode-graph reserve (and so its heuristic fraction):
        # status, the engine and the simulator all see the launch as rendered.
        plan = plan_launch(spec, configs, gpu, cfg.args, env)
        cfg.plan = plan
    cfg.resolved = launch_findings.summary(plan, speculative)
    cfg.weight_gib = plan.mem.target_weight_gib + (plan.mem.draft_weight_gib if speculative else 0)
    seen = draftcontext.sglang_configs(final.values, configs)  # as SGLang reads them
    cfg.warnings = launch_findings.rule_findings(
        cfg.args,
        env,
        seen.target,
        seen.draft if speculative else None,
        spec.resources.gpu_type,
    )
    return cfg


def draft_override(spec: SpecServerSpec, configs: ModelConfigs) -> tuple[str | None, str | None]:
    """(``--json-model-override-args`` value, None) for a speculating spec with
    ``speculative.draftContextFromTarget`` (the target's own rope scaling and positions,
    ``draftcontext``); (None, why) when the field cannot apply; (None, None) when unset."""
    if not spec.speculative.draft_context_from_target:
        return None, None
    refused = draftcontext.refusal(
        spec.speculative.algorithm.value,
        spec.draft is not None,
        is_mtp_target(configs.target),
        configs.target,
    )
    if refused:
        return None, refused
    return draftcontext.override_json(configs.target), None


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


def policy_context_for(
    spec: SpecServerSpec, configs: ModelConfigs, rendered: EngineConfig | None = None
) -> PolicyContext:
    """The performance model's crossover and break-even for this SpecServer (speculation on).

    Plans the launch the spec renders when speculating (memFractionStatic or the computed one,
    the spec's maxRunningRequests, extraArgs, env and KV dtype included); the neutral context
    (no load-based decisions) when it cannot be planned. A computed cap is left out: it is
    sized for the mode being rendered, and the Off engine's would differ. ``rendered`` is
    ``build_engine_config(spec, configs, True)`` where the caller already has it (the
    operator memoises it per generation); else it is rendered here.
    """
    try:
        gpu = lookup_gpu(spec.resources.gpu_type)
    except UnknownGpuError:
        return NEUTRAL_CONTEXT
    # The engine as rendered: the spec's cap (it binds both modes) and a computed fraction.
    cfg = build_engine_config(spec, configs, True) if rendered is None else rendered
    fraction = cfg.mem_fraction_static if cfg.mem_fraction_static_source == "Computed" else None
    mtp = is_mtp_target(configs.target)
    cap = spec.engine.max_running_requests
    override, refused = draft_override(spec, configs)
    if refused:
        return NEUTRAL_CONTEXT
    argv = argv_of(specserver_args(spec, True, mtp, None, cap, fraction, override))
    if parse_server_argv(argv).issues:
        return NEUTRAL_CONTEXT
    try:
        plan = plan_launch(spec, configs, gpu, argv, spec_env(spec))
    except PlanInputError:  # a flag out of any launch's range: it cannot be planned
        return NEUTRAL_CONTEXT
    if plan.resolution.errors or plan.mem.kv_pool_tokens_with_draft <= 0:
        return NEUTRAL_CONTEXT
    ctx = policy_context(plan, spec.auto_speculation, engine_adapts_steps=spec.speculative.adaptive)
    if spec.speculative.adaptive:
        cap = cfg.max_running_requests or plan.resolution.get("max_running_requests")
        ctx.zero_step_batch = zero_step_batch(plan, cap)
    return ctx


def zero_step_batch(plan: Plan, cap: Any) -> float:
    """The smallest running batch an adaptive launch's tiers may run zero steps at under
    ``cap`` (``zerosteps``), inf when none is reachable."""
    if not isinstance(cap, int) or isinstance(cap, bool):
        return math.inf
    found = zerosteps.zero_step_batch(cap, plan.scenario.cuda_graph_max_bs)
    return math.inf if found is None else float(found)
