"""Shared helpers for rule modules: building diagnostics and cached per-launch analysis."""

from __future__ import annotations

import contextlib
from types import ModuleType
from typing import Any

from specserver_advisor.gpus import Gpu, UnknownGpuError, lookup_gpu
from specserver_advisor.launch_fraction import computed_fraction, given_fraction_message
from specserver_advisor.lint.model import Diagnostic, Launch, Position
from specserver_advisor.lint.specservers import COMPUTED_CAP
from specserver_advisor.models import SpecServerSpec
from specserver_advisor.modelshape import ConfigShapeError
from specserver_advisor.plan import Plan, PlanInputError, PlanInputs, make_plan
from specserver_advisor.sglang.context import ContextCheck, check_context, env_true
from specserver_advisor.sglang.overrides import OverrideArgsError, effective_configs
from specserver_advisor.sglang.resolve import Resolution, resolve_launch


def diag(rule: ModuleType, launch: Launch, pos: Position, message: str) -> Diagnostic:
    """A diagnostic carrying the rule module's metadata."""
    return Diagnostic(
        launch.path, pos.line, pos.column, rule.CODE, rule.NAME, rule.SEVERITY, message, rule.FIX
    )


def resolution(launch: Launch) -> Resolution:
    """SGLang's resolution of this launch (with the target/draft configs when found)."""
    cache = launch.configs
    if "_resolution" not in cache:
        cache["_resolution"] = resolve_launch(
            server_args(launch), cache.get("target"), cache.get("draft")
        )
    result: Resolution = cache["_resolution"]
    return result


def server_args(launch: Launch) -> dict[str, Any]:
    """The launch's SGLang flags, without the marker of a cap the operator computes."""
    return {k: v for k, v in launch.parsed.values.items() if v != COMPUTED_CAP}


def memory_plan(launch: Launch) -> Plan | None:
    """The advisor's plan on the launch's GPU type (None without a GPU type or configs).

    A SpecServer is planned as the operator renders it: when the spec leaves
    memFractionStatic to SGLang and the heuristic leaves no KV cache, with the operator's
    computed fraction (``launch_fraction.computed_fraction``).
    """
    cache = launch.configs
    if "_plan" not in cache:
        cache["_plan"] = None
        if launch.gpu_type and cache.get("target") is not None:
            with contextlib.suppress(UnknownGpuError, ConfigShapeError, PlanInputError):
                gpu = lookup_gpu(launch.gpu_type)
                args = server_args(launch)
                plan = _plan(launch, args, gpu)
                if launch.specserver is not None:
                    plan = _as_operator_renders(launch, launch.specserver, plan, args, gpu)
                cache["_plan"] = plan
    plan_: Plan | None = cache["_plan"]
    return plan_


def no_kv_message(launch: Launch) -> str | None:
    """The operator's SPEC016 wording for a SpecServer that leaves no KV cache (else None)."""
    message: str | None = launch.configs.get("_no_kv")
    return message


def _plan(launch: Launch, args: dict[str, Any], gpu: Gpu) -> Plan:
    cache = launch.configs
    return make_plan(
        PlanInputs(args, cache["target"], cache.get("draft"), gpu, env=launch.env, concurrency=[1])
    )


def _as_operator_renders(
    launch: Launch, spec: SpecServerSpec, plan: Plan, args: dict[str, Any], gpu: Gpu
) -> Plan:
    speculative = bool(args.get("speculative_algorithm"))
    if spec.engine.mem_fraction_static:
        if plan.mem.error:
            launch.configs["_no_kv"] = given_fraction_message(spec, plan, speculative)
        return plan
    choice = computed_fraction(spec, plan, speculative, gpu.name)
    if choice is None:
        return plan
    if choice.fraction is None:
        launch.configs["_no_kv"] = choice.message
        return plan
    return _plan(launch, {**args, "mem_fraction_static": choice.fraction}, gpu)


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
        except OverrideArgsError:
            cache["_effective"] = (cache.get("target"), cache.get("draft"))
    found: tuple[dict[str, Any] | None, dict[str, Any] | None] = cache["_effective"]
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


def missing_config(rule: ModuleType, launch: Launch) -> list[Diagnostic]:
    """The once-per-launch info that a config-needing rule could not run."""
    why = launch.configs.get("missing")
    if not why or launch.configs.get("_missing_reported"):
        return []
    launch.configs["_missing_reported"] = True
    return [
        Diagnostic(
            launch.path,
            launch.start.line,
            launch.start.column,
            "INFO001",
            "config-not-found",
            "info",
            f"model configs not found, context rules skipped: {why}",
            "Pass --model-dir DIR, populate the HF cache, or use --fetch-configs.",
        )
    ]


def values(launch: Launch) -> dict[str, Any]:
    return launch.parsed.values
