"""One launch model: a SpecServer, or SGLang argv + env, with its model configs and GPU, planned.

Everyone plans launches here. ``settle`` is the one pass from a SpecServer to its engine: the
spec rendered once (``launch_args.render_spec``), the memory fraction and cap decided, the argv
filled in and planned once per decision until nothing changes; its ``EngineConfig`` carries
the argv, the plan, the resolved summary and Auto's policy context. The operator (through
``launchlint``, which adds the lint rules' view), ``lint``, ``plan --from`` and ``replay
--policy`` all call it; the engine's preflight and simulated engine plan their argv with
``launch_from_argv``, so their resolved view and memory plan are the objects the operator sees.
Pure: configs are given, nothing is read or fetched here; the linter is never run here.

Every speculative flag is rendered explicitly, auto-chosen values included, and always an
explicit ``--max-running-requests``: the spec's, or the recommendation for the KV pool of the mode
being rendered (with the draft when speculating, without it otherwise).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from specserver_advisor import findings
from specserver_advisor.gpus import Gpu, UnknownGpuError, lookup_gpu
from specserver_advisor.launch import findings as launch_findings
from specserver_advisor.launch.args import (
    ARG_SOURCES,
    NEEDS_DRAFT,
    OWNED,
    argv_of,
    draftless_error,
    fill,
    is_mtp_target,
    owned_in_extra,
    render_spec,
    settled_values,
    spec_env,
)
from specserver_advisor.launch.fraction import computed_fraction, given_fraction_message
from specserver_advisor.launch.multinode import as_leader
from specserver_advisor.models import AutoSpeculation, SpecServerSpec
from specserver_advisor.perf.plan import (
    DEFAULT_CONCURRENCY,
    Plan,
    PlanInputError,
    PlanInputs,
    make_plan,
    policy_context,
    safe_cap,
)
from specserver_advisor.policy.model import NEUTRAL_CONTEXT, PolicyContext
from specserver_advisor.sglang import adaptivetiers, draftcontext
from specserver_advisor.sglang.configcheck import LoadedConfig, check_configs
from specserver_advisor.sglang.configvalues import ConfigShapeError
from specserver_advisor.sglang.flags import ParsedArgs, parse_server_argv
from specserver_advisor.sglang.memfraction import FractionChoice

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
    "PlannedLaunch",
    "TargetDraftConfigs",
    "extra_args_refusal",
    "launch_from_argv",
    "model_config_refusal",
    "plan_argv",
    "plan_launch",
    "policy_context_for",
    "settle",
]


class TargetDraftConfigs(Protocol):
    """Target and draft HF configs with their weight sizes: ``configchain.ModelConfigs`` (the
    operator's) or ``Configs`` (the CLI's and the engine image's)."""

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
    #: What ``policy`` is made from (None: speculation off, or refused before planning).
    policy_basis: _PolicyBasis | None = field(default=None, compare=False, repr=False)

    @functools.cached_property
    def policy(self) -> PolicyContext:
        """Where Auto starts from on this SpecServer: the performance model's crossover and
        break-even on the speculative launch with the spec's own cap (the neutral context, no
        load-based decisions, when it has no KV pool to reason on or was not planned)."""
        basis = self.policy_basis
        return NEUTRAL_CONTEXT if basis is None else basis.context()


@dataclass(frozen=True)
class Configs:
    """``TargetDraftConfigs`` from what the loaders found (the engine image's and the CLI's)."""

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
    configs: TargetDraftConfigs,
    gpu: Gpu,
    *,
    accept_length: float | None = None,
    concurrency: list[int] | None = None,
    input_len: int = 512,
    output_len: int = 128,
    clock_scale: float = 1.0,
    prompt_mix: tuple[tuple[int, float], ...] = (),
    recommend_cap: bool = True,
) -> Plan:
    """The advisor's plan of one launch's parsed flags ``values`` (resolution, memory, curves;
    ``recommend_cap``: ``PlanInputs.recommend_cap``).

    Speculation off, the draft is not loaded: neither its memory nor its context matters.

    Raises:
        ConfigShapeError: a config value the plan reads has the wrong type (``configcheck``).
    """
    speculative = bool(values.get("speculative_algorithm"))
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
            recommend_cap=recommend_cap,
        )
    )


@dataclass
class PlannedLaunch:
    """One SGLang server launch as the advisor sees it: argv, env, SGLang's view, the plan."""

    argv: list[str]
    env: dict[str, str]
    parsed: ParsedArgs
    #: None when SGLang's parser refuses the argv (``parsed.issues``).
    plan: Plan | None
    configs: TargetDraftConfigs | None = field(default=None, compare=False, repr=False)
    gpu: Gpu | None = field(default=None, compare=False, repr=False)

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
    configs: TargetDraftConfigs,
    gpu: Gpu,
    *,
    accept_length: float | None = None,
    concurrency: list[int] | None = None,
    clock_scale: float = 1.0,
) -> PlannedLaunch:
    """Plan ``sglang serve`` argv (``MODEL`` positional or ``--model-path``) as it will run."""
    positional = bool(argv) and not argv[0].startswith("-")
    parsed = parse_server_argv(argv, positional_model=positional)
    if parsed.issues:
        return PlannedLaunch(list(argv), dict(env), parsed, None, configs, gpu)
    plan = plan_argv(
        parsed.values,
        env,
        configs,
        gpu,
        accept_length=accept_length,
        concurrency=concurrency,
        clock_scale=clock_scale,
    )
    return PlannedLaunch(list(argv), dict(env), parsed, plan, configs, gpu)


def plan_launch(
    spec: SpecServerSpec,
    configs: TargetDraftConfigs,
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


def model_config_refusal(configs: TargetDraftConfigs, speculative: bool) -> str | None:
    """Why the configs cannot be read into the model shape (``configcheck.check_configs``: the
    target, and the draft when speculating), naming where they came from and the key; None
    when they can."""
    try:
        check_configs(configs.target, configs.draft if speculative else None)
    except ConfigShapeError as exc:
        source = getattr(configs, "source", None)
        return f"{source} model config: {exc}" if source else str(exc)
    return None


#: How many plans ``settle`` can need: the spec's launch, then at most one more for each of the
#: two values it decides (a computed fraction, a computed cap), each decided once.
MAX_PLANS = 3


def settle(
    spec: SpecServerSpec,
    configs: TargetDraftConfigs,
    speculative: bool,
    env: dict[str, str] | None = None,
) -> EngineConfig:
    """Validate, settle and render one SpecServer mode: the one pass from spec to engine.

    The spec is rendered once (``launch_args.render_spec``); the values the launch model
    decides fill its slots: the memory fraction (computed when the spec leaves it to SGLang and
    SGLang's heuristic leaves no KV cache without a cap), then the cap (the spec's, else
    computed from the KV pool and the crossover), then the resolved draft shape. Each launch
    filled in is planned once, and the loop stops at the first plan made with every value
    decided, whose resolution no decision would change (a fixed point): that plan is the
    rendered launch's own (the draft shape rendered explicitly resolves the same). A spec
    that gives its fraction and cap is planned once; one that leaves them to the operator at
    most ``MAX_PLANS`` times. It terminates because each pass either decides a value not
    decided before (the fraction in the first pass only, the cap at most once, neither ever
    revised) or stops.

    The result carries the argv, the plan, the resolved summary and Auto's policy context
    (``EngineConfig.policy``, from the plan with the spec's own cap), so no caller renders or
    plans the spec again. An invalid result carries the rule code as ``reason`` (a flag the plan
    cannot compute with, e.g. speculative.numSteps 10**13 or maxRunningRequests 10**30: the CRD
    bounds neither, is ``InvalidSpec`` naming it, a verdict and no exception). The lint
    warnings are not here: the composition one floor up (``launchlint``) adds them.
    """
    try:
        return _settle(spec, configs, speculative, spec_env(spec) if env is None else env)
    except PlanInputError as exc:
        return EngineConfig(False, "InvalidSpec", str(exc))


def policy_context_for(spec: SpecServerSpec, configs: TargetDraftConfigs) -> PolicyContext:
    """The performance model's crossover and break-even for this SpecServer, speculation on
    (``settle(spec, configs, True).policy``: the neutral context when it cannot be planned)."""
    return settle(spec, configs, True).policy


def _settle(
    spec: SpecServerSpec, configs: TargetDraftConfigs, speculative: bool, env: dict[str, str]
) -> EngineConfig:
    refused = _unplannable(spec, configs, speculative)
    if refused is not None:
        return EngineConfig(False, *refused)
    gpu = lookup_gpu(spec.resources.gpu_type)
    mtp = is_mtp_target(configs.target)
    override = draft_override(spec, configs)[0] if speculative else None
    rendered = render_spec(spec, speculative, mtp, override)
    cfg = EngineConfig(True, "Valid", "the advisor finds nothing that stops SGLang starting")
    given_cap = spec.engine.max_running_requests
    fraction: FractionChoice | None = None
    # The fraction is decided first, on SGLang's heuristic for the launch without a cap
    # (memfraction.py): a spec that leaves it to SGLang has its own cap filled in after that.
    fraction_open = not spec.engine.mem_fraction_static
    cap = None if fraction_open else given_cap
    for _ in range(MAX_PLANS):
        settled = settled_values(spec, None, cap, fraction.fraction if fraction else None)
        argv = as_leader(argv_of(fill(rendered, settled)), spec.resources.nodes)
        plan = plan_launch(spec, configs, gpu, argv, env)
        cfg.plan = plan
        cannot = launch_findings.refusal(plan, speculative)
        if fraction_open:
            fraction_open = False
            if cannot and cannot[0] == findings.NO_KV_MEMORY:
                fraction = computed_fraction(spec, plan, speculative, gpu.name)
                if fraction is not None and fraction.fraction is None:
                    return _refused(cfg, findings.NO_KV_MEMORY, fraction.message)
            stopped = cannot is not None and cannot[0] != findings.NO_KV_MEMORY
            if not stopped and (fraction is not None or given_cap is not None):
                cap = given_cap
                continue  # decided: the fraction; the launch with it and the spec's cap
        if speculative and cap == given_cap:
            cfg.policy_basis = _PolicyBasis(plan, spec.auto_speculation, spec.speculative.adaptive)
        if cannot and cannot[0] == findings.NO_KV_MEMORY and spec.engine.mem_fraction_static:
            message = given_fraction_message(spec, plan, speculative)
            return _refused(cfg, findings.NO_KV_MEMORY, message)
        if cannot:
            return _refused(cfg, *cannot)
        if cap is None:
            cap = _choose_cap(cfg, spec, plan, speculative)
            continue  # decided: the cap, which cuts SGLang's decode-graph reserve
        break
    else:  # pragma: no cover - each pass decides a value not decided before, or stops
        raise AssertionError(f"settle: no fixed point in {MAX_PLANS} plans")
    if spec.engine.max_running_requests:
        _spec_cap(cfg, spec.engine.max_running_requests)
    cfg.args = argv_of(
        fill(
            rendered,
            settled_values(
                spec,
                plan.resolution if speculative else None,
                cfg.max_running_requests,
                fraction.fraction if fraction else None,
            ),
        )
    )
    final = parse_server_argv(as_leader(cfg.args, spec.resources.nodes))
    assert not final.issues, final.issues  # rendered from validated parts
    cfg.speculative = speculative
    cfg.env = dict(env)
    cfg.mem_fraction_static = plan.mem.settings.mem_fraction_static
    cfg.mem_fraction_static_source, cfg.mem_fraction_static_reason = (
        ("Spec", "given in spec.engine.memFractionStatic")
        if spec.engine.mem_fraction_static
        else ("Computed", fraction.message)
        if fraction
        else ("Heuristic", "SGLang's heuristic for this GPU leaves room for the KV cache")
    )
    if cfg.policy_basis is not None and spec.speculative.adaptive:
        # the cap the On engine runs with decides which adaptive tiers it reaches
        cap_run = cfg.max_running_requests or plan.resolution.get("max_running_requests")
        cfg.policy_basis = replace(cfg.policy_basis, cap=cap_run)
    cfg.resolved = launch_findings.summary(plan, speculative)
    cfg.weight_gib = plan.mem.target_weight_gib + (plan.mem.draft_weight_gib if speculative else 0)
    return cfg


def _unplannable(
    spec: SpecServerSpec, configs: TargetDraftConfigs, speculative: bool
) -> tuple[str, str] | None:
    """Why the spec is refused before any plan: its extraArgs, GPU type, model configs, or a
    draft-model algorithm without a draft."""
    extra_refused = extra_args_refusal(spec)
    if extra_refused is not None:
        return extra_refused
    try:
        lookup_gpu(spec.resources.gpu_type)
    except UnknownGpuError as exc:
        return "UnknownGPU", f"resources.gpuType: {exc}"
    bad_config = model_config_refusal(configs, speculative)
    if bad_config is not None:
        return INVALID_MODEL_CONFIG, bad_config
    if speculative:
        algorithm = spec.speculative.algorithm.value
        refused = draftless_error(algorithm, bool(spec.draft), configs.target)
        if refused:
            return findings.DRAFT_PATH_MISMATCH, refused
        refused = draft_override(spec, configs)[1]
        if refused:
            return "InvalidSpec", refused
    return None


def _refused(cfg: EngineConfig, reason: str, message: str) -> EngineConfig:
    """``cfg`` as a refusal (its plan and policy basis kept: status and Auto still read them)."""
    cfg.valid, cfg.reason, cfg.message = False, reason, message
    return cfg


def _spec_cap(cfg: EngineConfig, cap: int) -> None:
    cfg.max_running_requests = cap
    cfg.max_running_requests_source = "Spec"
    cfg.max_running_requests_reason = "given in spec.engine.maxRunningRequests"


def _choose_cap(cfg: EngineConfig, spec: SpecServerSpec, plan: Plan, speculative: bool) -> int:
    """The cap computed from ``plan``'s KV pool and crossover (recorded in ``cfg``)."""
    fits = plan.fits_on if speculative else plan.fits_off
    # the cap with the most goodput over the planned loads, within the KV pool and the graphs
    # (none where the launch captures no decode graph): never above plan's largest safe cap
    cfg.max_running_requests = max(
        1, min(plan.recommended_mrr, safe_cap(fits, plan.decode_graph_limit))
    )
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
    return cfg.max_running_requests


@dataclass(frozen=True)
class _PolicyBasis:
    """What Auto's policy context is made from: the plan of the speculative launch with the
    spec's own cap (a computed cap is sized for the mode rendered; the Off engine's differs)."""

    plan: Plan
    policy: AutoSpeculation | None
    adapts: bool
    #: the cap the On engine runs with (an adaptive launch's zero-step tier depends on it)
    cap: Any = None

    def context(self) -> PolicyContext:
        if self.plan.resolution.errors or self.plan.mem.kv_pool_tokens_with_draft <= 0:
            return NEUTRAL_CONTEXT
        ctx = policy_context(self.plan, self.policy, engine_adapts_steps=self.adapts)
        if self.adapts:
            ctx.zero_step_batch = zero_step_batch(self.plan, self.cap)
        return ctx


def draft_override(
    spec: SpecServerSpec, configs: TargetDraftConfigs
) -> tuple[str | None, str | None]:
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


def zero_step_batch(plan: Plan, cap: Any) -> float:
    """The smallest running batch an adaptive launch's tiers may run zero steps at under
    ``cap`` (``zerosteps``), inf when none is reachable."""
    if not isinstance(cap, int) or isinstance(cap, bool):
        return math.inf
    found = adaptivetiers.zero_step_batch(cap, plan.scenario.cuda_graph_max_bs)
    return math.inf if found is None else float(found)
