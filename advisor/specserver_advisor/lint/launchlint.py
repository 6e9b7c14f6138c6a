"""Render, then lint: a SpecServer's engine config with the lint rules' findings on its argv.

One floor above both the launch model (``launch.settle``: the one pass from spec to argv and
plan) and the linter (``lint``): the launch model never runs the linter, so neither imports the
other. ``build_engine_config`` is what the operator (``core.desired``, ``core.speccheck``:
ConfigValid, the warning events, admission) and ``plan --from`` call; ``launch_findings`` lints an
argv the engine's preflight and the parity tests plan with ``launch.launch_from_argv``. The
warnings are the rule registry's own findings on the exact argv rendered (the rules ``lint`` runs),
not messages matched by substring. Pure.
"""

from __future__ import annotations

from typing import Any

from specserver_advisor.launch.model import EngineConfig, PlannedLaunch, TargetDraftConfigs, settle
from specserver_advisor.launch.multinode import as_leader
from specserver_advisor.lint.argv import make_launch
from specserver_advisor.lint.model import Context, Position
from specserver_advisor.lint.rules import RULES
from specserver_advisor.lint.rules._base import use_plan
from specserver_advisor.models import SpecServerSpec
from specserver_advisor.perf.plan import Plan


def build_engine_config(
    spec: SpecServerSpec,
    configs: TargetDraftConfigs,
    speculative: bool,
    env: dict[str, str] | None = None,
) -> EngineConfig:
    """``launch.settle``, with the lint rules' warnings and errors on the argv it rendered."""
    cfg = settle(spec, configs, speculative, env)
    if cfg.valid:
        cfg.warnings = rule_findings(
            as_leader(cfg.args, spec.resources.nodes),  # the argv the leader's process gets
            cfg.env,
            configs.target,
            configs.draft if speculative else None,
            spec.resources.gpu_type,
            cfg.plan,
        )
    return cfg


def launch_findings(launch: PlannedLaunch) -> list[tuple[str, str]]:
    """(code, message) of every warning or error the lint rules find in a planned launch."""
    if launch.configs is None or launch.gpu is None:
        return []
    draft = launch.configs.draft if launch.speculative else None
    return rule_findings(
        launch.argv, launch.env, launch.configs.target, draft, launch.gpu.name, launch.plan
    )


def rule_findings(
    argv: list[str],
    env: dict[str, str],
    target: dict[str, Any],
    draft: dict[str, Any] | None,
    gpu_type: str,
    plan: Plan | None = None,
) -> list[tuple[str, str]]:
    """(code, message) of every warning or error the lint rules find in this server launch;
    ``plan``: the launch model's plan of this argv, which the memory rules then read (SPEC009
    judges the cap at the request lengths it was sized for) instead of planning it again."""
    launch = make_launch(
        "<specserver>", "server", argv, [Position()] * len(argv), Position(), env, True
    )
    launch.configs.update({"target": target, "draft": draft})
    launch.gpu_type = gpu_type
    if plan is not None:
        use_plan(launch, plan)
    ctx = Context([launch])
    out = []
    for module in RULES.values():
        if "server" not in module.APPLIES_TO:
            continue
        for d in module.check(launch, ctx):
            if d.severity in ("warning", "error"):
                out.append((d.code, d.message))
    return out
