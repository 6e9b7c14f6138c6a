"""Shared helpers for rule modules: building diagnostics and cached per-launch analysis."""

from __future__ import annotations

import contextlib
from types import ModuleType
from typing import Any

from specserver_advisor.findings import NO_KV_MEMORY
from specserver_advisor.gpus import Gpu, UnknownGpuError, lookup_gpu
from specserver_advisor.launch.model import Configs, settle
from specserver_advisor.lint.model import Diagnostic, Launch, Position
from specserver_advisor.lint.specservers import COMPUTED_CAP
from specserver_advisor.models import Mode, SpecServerSpec
from specserver_advisor.perf.plan import Plan, PlanInputError, PlanInputs, make_plan
from specserver_advisor.sglang.configvalues import ConfigShapeError
from specserver_advisor.sglang.context import ContextCheck, check_context, env_true
from specserver_advisor.sglang.overrides import OverrideArgsError, effective_configs
from specserver_advisor.sglang.resolve import Resolution, resolve_launch


def diag(rule: ModuleType, launch: Launch, pos: Position, message: str) -> Diagnostic:
    """A diagnostic carrying the rule module's metadata."""
    return Diagnostic(
        launch.path, pos.line, pos.column, rule.CODE, rule.NAME, rule.SEVERITY, message, rule.FIX
    )


def resolution(launch: Launch) -> Resolution:
    """SGLang's resolution of this launch (with the target/draft configs when found, on ROCm
    when its GPU type is an AMD card)."""
    cache = launch.configs
    if "_resolution" not in cache:
        cache["_resolution"] = resolve_launch(
            server_args(launch), cache.get("target"), cache.get("draft"), hip=on_rocm(launch)
        )
    result: Resolution = cache["_resolution"]
    return result


def on_rocm(launch: Launch) -> bool:
    """Whether the launch's GPU type (``--gpu``, a SpecServer's gpuType, a cookbook's hardware)
    is an AMD card, where SGLang resolves some flags differently (``get_platform().is_hip``);
    False when the type is unknown or not given."""
    if not launch.gpu_type:
        return False
    try:
        return lookup_gpu(launch.gpu_type).rocm
    except UnknownGpuError:
        return False


def server_args(launch: Launch) -> dict[str, Any]:
    """The launch's SGLang flags, without the marker of a cap the operator computes."""
    return {k: v for k, v in launch.parsed.values.items() if v != COMPUTED_CAP}


def memory_plan(launch: Launch) -> Plan | None:
    """The advisor's plan on the launch's GPU type (None without a GPU type or configs).

    A SpecServer is planned as the operator renders it (``launch.settle``: with the fraction
    the operator computes when the spec leaves it to SGLang and the heuristic leaves no KV
    cache, and the cap it renders).
    """
    cache = launch.configs
    if "_plan" not in cache:
        cache["_plan"] = None
        if launch.gpu_type and cache.get("target") is not None:
            with contextlib.suppress(UnknownGpuError, ConfigShapeError, PlanInputError):
                gpu = lookup_gpu(launch.gpu_type)
                if launch.specserver is not None:
                    cache["_plan"] = _as_operator_renders(launch, launch.specserver)
                else:
                    cache["_plan"] = _plan(launch, server_args(launch), gpu)
    plan_: Plan | None = cache["_plan"]
    return plan_


def use_plan(launch: Launch, plan: Plan | None) -> None:
    """Make ``plan`` the launch's memory plan (the caller planned this exact launch already:
    ``launchlint`` with the plan ``launch.settle`` made), so no rule plans it again."""
    launch.configs["_plan"] = plan


def no_kv_message(launch: Launch) -> str | None:
    """The operator's SPEC016 wording for a SpecServer that leaves no KV cache (else None)."""
    message: str | None = launch.configs.get("_no_kv")
    return message


def _plan(launch: Launch, args: dict[str, Any], gpu: Gpu) -> Plan:
    cache = launch.configs
    return make_plan(
        PlanInputs(args, cache["target"], cache.get("draft"), gpu, env=launch.env, concurrency=[1])
    )


def _as_operator_renders(launch: Launch, spec: SpecServerSpec) -> Plan | None:
    """The operator's own plan of the SpecServer (``launch.settle``: its fraction and cap, at
    the spec's request lengths); its SPEC016 words when the render leaves no KV cache."""
    cache = launch.configs
    configs = Configs(cache["target"], cache.get("draft"))
    cfg = settle(spec, configs, spec.mode != Mode.DISABLED, launch.env)
    if cfg.reason == NO_KV_MEMORY and cfg.plan is not None and cfg.message != cfg.plan.mem.error:
        cache["_no_kv"] = cfg.message
    return cfg.plan


def model_configs(launch: Launch) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The target and draft configs as SGLang reads them: ``--json-model-override-args``
    applied to both (``sglang.overrides``); as found when the flag cannot be applied (the
    resolution carries SGLang's error for it)."""
    cache = launch.configs
    if "_effective" not in cache:
        try:
            cache["_effective"] = effective_configs(
                server_args(launch), cache.get("target"), cache.get("draft")
            )
        except OverrideArgsError as exc:
            cache["_effective"] = (cache.get("target"), cache.get("draft"))
            cache["_override_error"] = exc.message
    found: tuple[dict[str, Any] | None, dict[str, Any] | None] = cache["_effective"]
    return found


def override_error(launch: Launch) -> str | None:
    """Why ``--json-model-override-args`` cannot be applied (not JSON, past the bounded
    reader's limits, NaN, or a config value of the wrong type once applied), else None."""
    model_configs(launch)
    found: str | None = launch.configs.get("_override_error")
    return found


def context_check(launch: Launch) -> ContextCheck | None:
    """The draft/target context check, when both configs were found."""
    cache = launch.configs
    target, draft = model_configs(launch)
    if target is None:
        return None
    if "_context" not in cache:
        r = resolution(launch)
        cache["_context"] = check_context(
            target,
            draft,
            launch.parsed.values.get("context_length"),
            launch.env,
            r.reserved_tokens,
        )
    check: ContextCheck = cache["_context"]
    return check


def speculative(launch: Launch) -> bool:
    return launch.kind in ("server", "specserver") and bool(
        launch.parsed.values.get("speculative_algorithm")
    )


def is_set(launch: Launch, field_name: str) -> bool:
    """Set on the command line, or set from a variable the linter could not resolve."""
    return field_name in launch.parsed.values or field_name in launch.unresolved_fields


def env_is_true(launch: Launch, name: str) -> bool:
    return env_true(launch.env, name)


def draft_path_ignored(target: dict[str, Any] | None) -> bool:
    """A target that carries its MTP layers: SGLang ignores a draft path given with it (so
    the draft's config is not needed)."""
    from specserver_advisor.sglang import configvalues
    from specserver_advisor.sglang.speculative_tables import MTP_TARGETS

    arch = configvalues.architecture(target or {})
    return arch in MTP_TARGETS and arch not in (
        "MistralLarge3ForCausalLM",
        "PixtralForConditionalGeneration",
    )


#: The rules each missing config switches off (INFO001 names them).
NEEDS = {
    "target": "SPEC002, SPEC009, SPEC014 and SPEC016 (context, KV pool, rope scaling, memory)",
    "draft": "SPEC002 and SPEC014 (the draft's context and rope scaling)",
}


def missing_config(rule: ModuleType, launch: Launch) -> list[Diagnostic]:
    """The once-per-launch info that config-needing rules could not run: which config (the
    target's or the draft's, by its reference), which rules, why, and how to supply it."""
    why = launch.configs.get("missing")
    if not why or launch.configs.get("_missing_reported"):
        return []
    launch.configs["_missing_reported"] = True
    model = launch.configs.get("missing_model", "target")
    ref = launch.configs.get("missing_ref") or "?"
    if str(ref).startswith("/"):  # a path in the container: map it to a local folder
        fix = f"Pass --model-dir {ref}=DIR (DIR holding its config.json), or --fetch-configs."
    else:
        fix = "Pass --model-dir DIR, populate the HF cache, or use --fetch-configs."
    message = f"the {model}'s config ({ref}) was not found, so {NEEDS[model]} did not run: {why}"
    return [
        Diagnostic(
            launch.path,
            launch.start.line,
            launch.start.column,
            "INFO001",
            "config-not-found",
            "info",
            message,
            fix,
        )
    ]


def values(launch: Launch) -> dict[str, Any]:
    return launch.parsed.values
