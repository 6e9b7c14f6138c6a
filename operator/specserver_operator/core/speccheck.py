"""The one set of checks behind both ConfigValid and the admission webhook (pure).

``parse`` (the models' validation, then what the schema cannot check: the advisor's
``launch.validation``, which ``lint`` calls too) is what
observe.validated runs; ``render_problems`` (the operator's render of one mode, then the
context and the admin's pod policy) is what desired.py turns into ConfigValid. admission.py
calls the same two functions, so what ``kubectl apply`` refuses is what ConfigValid would
report and the two cannot drift apart: the webhook only adds the lint's warnings, every mode
the spec can run, and the hfTokenSecretRef access check.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from specserver_advisor.launch import validation
from specserver_advisor.launch.model import INVALID_MODEL_CONFIG, EngineConfig
from specserver_advisor.launch.validation import context_problems
from specserver_advisor.lint.launchlint import build_engine_config
from specserver_advisor.loaders.configchain import ModelConfigs
from specserver_advisor.models import SpecServer
from specserver_advisor.sglang.configvalues import ConfigShapeError
from specserver_operator.core import podpolicy
from specserver_operator.core.render import unexpanded_problem

#: (reason, message): a ConfigValid=False reason (InvalidSpec, PodPolicyRefused, a SPEC code)
Problem = tuple[str, str]
INVALID_SPEC = "InvalidSpec"


def parse(
    doc: dict[str, Any], model: Callable[[dict[str, Any]], SpecServer] | None = None
) -> tuple[SpecServer | None, list[str]]:
    """The SpecServer of ``doc`` and every problem naming its field: the advisor's one
    validation (``launch.validation.parse``), which ``lint`` runs too."""
    return validation.parse(doc, model)


def shape_refusal(configs: ModelConfigs, exc: ConfigShapeError) -> EngineConfig:
    """A config no model has (the advisor's ConfigShapeError), naming its source."""
    return EngineConfig(False, INVALID_MODEL_CONFIG, f"{configs.source} model config: {exc}")


def render(server: SpecServer, configs: ModelConfigs, speculative: bool) -> EngineConfig:
    """The operator's engine config of one mode (desired.engine_config memoises the same)."""
    try:
        return build_engine_config(server.spec, configs, speculative)
    except ConfigShapeError as exc:  # a config the tenant gave that no model has
        return shape_refusal(configs, exc)


def render_problems(
    server: SpecServer, cfg: EngineConfig | None, policy: podpolicy.PodPolicy
) -> list[Problem]:
    """Why ``cfg`` (None: no model config known yet) may not run, in increasing precedence:
    the render's own reason, the expected tokens against the context, what the rendered
    containers would run after Kubernetes' ``$(VAR)`` expansion if it is not what was judged
    (render.unexpanded_problem: never, while the spec's text is rendered escaped), the pod
    policy."""
    out: list[Problem] = []
    if cfg is not None and not cfg.valid:
        out.append((cfg.reason, cfg.message))
    if cfg is not None:
        context = cfg.resolved.get("contextLength") if cfg.valid else None
        found = context_problems(server, context if isinstance(context, int) else None)
        if found:
            out.append((INVALID_SPEC, "; ".join(found)))
    if cfg is not None and cfg.valid:
        unexpanded = unexpanded_problem(server, cfg)
        if unexpanded:
            out.append((INVALID_SPEC, unexpanded))
    refused = podpolicy.refusal(server.spec, policy)
    if refused:
        out.append((podpolicy.REFUSED, refused))
    return out
