"""One reconcile pass for one SpecServer: read, decide (pure), write what changed.

Called by cycle.py (each shared cycle, and kopf's create/update handlers). Reads model configs
from the configured source, validates and renders with the advisor, applies children through
``client.KubeClient`` and writes status. Returns the events to post and, when a dependency (a
ConfigMap, an endpoint) is not readable yet, why the next pass should try again.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from specserver_advisor.models import AutoSpeculation, Mode, SpecServer
from specserver_advisor.modelshape import ConfigShapeError
from specserver_advisor.policy import PolicyContext
from specserver_operator import children, configsource, opmetrics, podpolicy
from specserver_operator import conditions as cond
from specserver_operator.applychildren import apply_children, autoscalers
from specserver_operator.autopilot import NO_PROMETHEUS_URL, PAUSE_ANNOTATION, AutoStep, auto_step
from specserver_operator.client import ApiError, KubeClient, NotFoundError
from specserver_operator.configsource import (
    ConfigSourceError,
    HfSettings,
    ModelConfigs,
)
from specserver_operator.engineconfig import (
    EngineConfig,
    build_engine_config,
    policy_context_for,
)
from specserver_operator.names import child_name
from specserver_operator.passcache import PassCache
from specserver_operator.reconcile import (
    auto_view,
    autoscaler_condition,
    compute_status,
    deployment_state,
    speculation_wanted,
    status_changes,
    status_events,
)
from specserver_operator.render import DEFAULT_PREFLIGHT_IMAGE
from specserver_operator.signals import SignalCache
from specserver_operator.validation import context_problems, spec_problems

log = logging.getLogger("specserver.controller")
#: Status fields of a new switch, written before the engine is touched.
INTENT_FIELDS = ("switch", "policyState", "decisions", "lastDecisionReason")


@dataclass
class Outcome:
    """What a pass did, for handlers to report."""

    events: list[tuple[str, str, str]] = field(default_factory=list)  # (type, reason, message)
    wrote_children: int = 0
    wrote_status: bool = False
    retry: str | None = None


@dataclass
class Settings:
    """Operator-wide settings (environment)."""

    hf: HfSettings = field(default_factory=HfSettings.from_env)
    pod_policy: podpolicy.PodPolicy = field(default_factory=podpolicy.PodPolicy.from_env)
    preflight_image: str = os.environ.get("SPECSERVER_ENGINE_IMAGE", DEFAULT_PREFLIGHT_IMAGE)


#: Seconds before a config source that failed is read again (for the same generation).
CONFIG_RETRY_S = 30.0
#: The pass cache of callers that bring none (tests; the cycle owns its own).
DEFAULT = PassCache()


def read_configs(
    client: KubeClient, server: SpecServer, uid: str, settings: Settings, memo: PassCache
) -> ModelConfigs:
    """Model configs from the first source that has them (cached per generation)."""
    key = (uid, server.metadata.generation or 0)
    if key in memo.configs:
        return memo.configs[key]  # type: ignore[no-any-return]
    failed = memo.config_failed.get(key)
    if failed is not None and time.monotonic() < failed[0]:
        raise ConfigSourceError(failed[1])  # an endpoint that failed is not asked every pass
    try:
        configs = _read_configs(client, server, settings, memo)
    except ConfigSourceError as exc:
        memo.config_failed[key] = (time.monotonic() + CONFIG_RETRY_S, str(exc))
        raise
    memo.config_failed.pop(key, None)
    memo.configs[key] = configs
    return configs


def _read_configs(
    client: KubeClient, server: SpecServer, settings: Settings, memo: PassCache
) -> ModelConfigs:
    ns = server.metadata.namespace or "default"

    def configmap(name: str) -> dict[str, str]:
        try:
            return client.get_configmap_data(ns, name)
        except NotFoundError as exc:
            raise ConfigSourceError(str(exc)) from exc

    return configsource.read_configs(server.spec, configmap, settings.hf, memo.bundled)


SECRET_RECHECK_S = 60.0


def _missing_secret(
    client: KubeClient, server: SpecServer, uid: str, now_ts: float, memo: PassCache
) -> tuple[str, str] | None:
    """A warning when the HF token Secret the engine pod reads is missing, whatever the config
    source (the pod could not start); checked once a minute per generation, not every pass."""
    src = server.spec.model_source
    ref = src.hf_token_secret_ref if src else None
    if ref is None:
        return None
    key = (uid, server.metadata.generation or 0)
    cached = memo.secrets.get(key)
    if cached and now_ts - cached[0] < SECRET_RECHECK_S:
        return cached[1]
    ns = server.metadata.namespace or "default"
    found: tuple[str, str] | None = None
    try:
        if not client.secret_exists(ns, ref.name):
            found = (
                "SecretNotFound",
                f"Secret {ns}/{ref.name} not found (spec.modelSource.hfTokenSecretRef): the "
                "engine pod cannot start until it exists",
            )
    except ApiError:
        # No `get` on Secrets in this namespace (the default install grants none): unknown.
        found = cached[1] if cached else None
    memo.secrets[key] = (now_ts, found)
    return found


def _validated(body: dict[str, Any], memo: PassCache) -> tuple[SpecServer | None, str | None]:
    """The SpecServer model (or why the spec is invalid), kept until spec or annotations change."""
    meta = body["metadata"]
    annotations = meta.get("annotations") or {}
    key = (meta.get("generation"), tuple(sorted(annotations.items())))
    hit = memo.validated.get(meta["uid"])
    if hit and hit[0] == key:
        return hit[1], hit[2]
    try:
        parsed = SpecServer.model_validate({k: v for k, v in body.items() if k != "status"})
        problems = spec_problems(parsed)  # what the schema cannot check
        invalid = "; ".join(problems[:3]) if problems else None
        server: SpecServer | None = None if problems else parsed
    except ValidationError as exc:
        err = exc.errors()[0]
        invalid = f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}"
        server = None
    memo.validated[meta["uid"]] = (key, server, invalid)
    return server, invalid


def _engine_config(
    server: SpecServer, uid: str, configs: ModelConfigs, speculative: bool, memo: PassCache
) -> EngineConfig:
    key = (uid, server.metadata.generation or 0, speculative)
    if key not in memo.engine_configs:
        memo.engine_configs[key] = _shared(
            memo,
            server,
            configs,
            "on" if speculative else "off",
            lambda: build_engine_config(server.spec, configs, speculative),
        )
    return memo.engine_configs[key]  # type: ignore[no-any-return]


def _shared(
    memo: PassCache, server: SpecServer, configs: ModelConfigs, what: str, build: Any
) -> Any:
    """A result that depends only on the spec and the model configs, shared by every
    SpecServer with the same ones."""
    spec_json = server.spec.model_dump_json(by_alias=True)
    key = (spec_json, id(configs), what)
    if key not in memo.shared:
        memo.shared[key] = (configs, build())
    return memo.shared[key][1]


def clear_caches() -> None:
    """Forget everything the default pass cache holds (tests)."""
    DEFAULT.clear()


def _policy_ctx(
    server: SpecServer, uid: str, configs: ModelConfigs, memo: PassCache
) -> PolicyContext:
    key = (uid, server.metadata.generation or 0)
    if key not in memo.policy_contexts:
        memo.policy_contexts[key] = _shared(
            memo, server, configs, "policy", lambda: policy_context_for(server.spec, configs)
        )
    return memo.policy_contexts[key]  # type: ignore[no-any-return]


def _auto(
    server: SpecServer,
    uid: str,
    configs: ModelConfigs,
    current: dict[str, Any],
    deployment: dict[str, Any] | None,
    signals: SignalCache | None,
    now_ts: float,
    memo: PassCache,
) -> AutoStep | None:
    """Evaluate the policy when its interval has passed (or a switch is being followed)."""
    spec = server.spec
    policy = spec.auto_speculation or AutoSpeculation()
    due = now_ts - memo.last_evaluation.get(uid, 0.0) >= policy.evaluation_interval_seconds
    if spec.mode != Mode.AUTO or not (due or current.get("switch")):
        return None
    memo.last_evaluation[uid] = now_ts
    running = (deployment or {}).get("metadata", {}).get("labels", {}).get("specserver.io/mode")
    ready = deployment_state(deployment, spec.replicas)[0]
    ns, name = server.metadata.namespace or "", server.metadata.name or ""
    obs = signals.get(ns, child_name(name)) if signals else None  # the pods' name label
    error = signals.last_error if signals else NO_PROMETHEUS_URL
    paused = server.metadata.annotations.get(PAUSE_ANNOTATION, "").lower() in ("true", "1")
    started = time.perf_counter()
    step = auto_step(
        spec,
        current,
        obs,
        error,
        _policy_ctx(server, uid, configs, memo),
        running,
        ready,
        now_ts,
        paused,
    )
    opmetrics.EVALUATION.observe(time.perf_counter() - started)
    if step.decision is not None:
        d = step.decision
        opmetrics.DECISIONS.labels(ns, name, d.action, d.reason).inc()
    if step.switch_result:
        opmetrics.SWITCHES.labels(ns, name, step.switch_result).inc()
    return step


def reconcile(
    client: KubeClient,
    body: dict[str, Any],
    now: str,
    settings: Settings | None = None,
    signals: SignalCache | None = None,
    now_ts: float | None = None,
    memo: PassCache | None = None,
) -> Outcome:
    """Bring one SpecServer's children and status in line with its spec (and the policy)."""
    settings = settings or Settings()
    memo = DEFAULT if memo is None else memo
    now_ts = time.time() if now_ts is None else now_ts
    meta = body["metadata"]
    ns, name, uid = meta["namespace"], meta["name"], meta["uid"]
    current = dict(body.get("status") or {})
    out = Outcome()
    cfg: EngineConfig | None = None
    config_error: str | None = None
    step: AutoStep | None = None
    blue_green = children.is_blue_green(body)
    deployment = children.serving_deployment(client, ns, name, blue_green)
    progressing: tuple[str, str, str] | None = None  # overrides Progressing (status, reason, msg)
    server, invalid = _validated(body, memo)
    if invalid is not None:
        cfg = EngineConfig(False, "InvalidSpec", invalid)
    if server is not None:
        try:
            configs = read_configs(client, server, uid, settings, memo)
            step = _auto(server, uid, configs, current, deployment, signals, now_ts, memo)
            if step is not None:
                want = step.speculative
            elif current.get("switch"):
                want = current["switch"]["target"] == "On"
            else:
                want = speculation_wanted(server.spec, auto_view(current, deployment))
            cfg = _engine_config(server, uid, configs, want, memo)
            context = cfg.resolved.get("contextLength") if cfg.valid else None
            problems = context_problems(server, context if isinstance(context, int) else None)
            if problems:
                cfg = EngineConfig(False, "InvalidSpec", "; ".join(problems))
            refused = podpolicy.refusal(server.spec, settings.pod_policy)
            if refused:
                cfg = EngineConfig(False, podpolicy.REFUSED, refused)
            missing = _missing_secret(client, server, uid, now_ts, memo)
            if missing and cfg.valid:
                cfg = dataclasses.replace(cfg, warnings=[*cfg.warnings, missing])
        except ConfigSourceError as exc:
            config_error = str(exc)
            out.retry = config_error
        except ConfigShapeError as exc:  # a config the tenant gave that no model has
            cfg = EngineConfig(False, "InvalidModelConfig", f"{configs.source} model config: {exc}")
    hold = False
    if step is not None and step.status.get("switch") and not current.get("switch"):
        # The intent goes to status before any child changes: an operator killed in between
        # finds the switch there on restart and completes it (exactly once in the ledger).
        intent = {k: v for k, v in step.status.items() if k in INTENT_FIELDS}
        try:
            client.patch_status(ns, name, intent)
            current.update(intent)
            out.wrote_status = True
        except (ApiError, NotFoundError) as exc:
            out.retry, hold = f"switch not recorded, engine left as it is: {exc}", True
    if server is not None and cfg is not None and cfg.valid and not hold:
        strategy = (server.spec.auto_speculation or AutoSpeculation()).switch_strategy
        plan = children.plan_children(
            client,
            server,
            uid,
            cfg,
            lambda speculative: _engine_config(server, uid, configs, speculative, memo),
            settings.preflight_image,
            strategy.value,
            memo.rendered,
        )
        applied = apply_children(client, plan, ns, uid, now_ts, memo)
        out.wrote_children += applied.written
        out.events += applied.events
        conflicts = applied.conflicts
        if conflicts:
            progressing = (
                "False",
                "NameConflict",
                f"{', '.join(conflicts)} exists and is not this SpecServer's; rename one of them",
            )
        for kind, left in plan.delete:
            client.delete(kind, ns, left)
            out.events.append(
                ("Normal", "ChildRemoved", f"{kind} {left} left by another switch strategy")
            )
        if out.wrote_children or plan.delete:
            deployment = children.serving_deployment(client, ns, name, blue_green)
        if plan.switching is not None and progressing is None:
            progressing = ("True", "BlueGreenSwitch", plan.switching)
    replicas = server.spec.replicas if server is not None else 0
    desired = compute_status(
        generation=meta.get("generation"),
        current=current,
        cfg=cfg,
        config_error=config_error,
        deployment=deployment,
        replicas=replicas,
        now=now,
    )
    if progressing is not None:
        value, reason, message = progressing
        before = cond.get_condition(current.get("conditions") or [], cond.PROGRESSING) or {}
        if reason == "NameConflict" and before.get("reason") != reason:
            out.events.append(("Warning", reason, message))
        desired["conditions"] = cond.set_condition(
            desired["conditions"],
            cond.condition(cond.PROGRESSING, value, reason, message, meta.get("generation"), now),
            now,
        )
    if step is not None:
        desired.update(step.status)
        if step.metrics_condition is not None:
            value, reason, message = step.metrics_condition
            desired["conditions"] = cond.set_condition(
                desired["conditions"],
                cond.condition(
                    cond.METRICS_AVAILABLE, value, reason, message, meta.get("generation"), now
                ),
                now,
            )
        out.events += step.events
    elif server is not None and server.spec.mode != Mode.AUTO:
        desired["conditions"] = [
            c for c in desired["conditions"] if c["type"] != cond.METRICS_AVAILABLE
        ]
    if server is not None and deployment is not None:
        scalers = autoscalers(client, ns, now_ts, memo)
        if scalers is not None:
            value, reason, message = autoscaler_condition(child_name(name), scalers)
            desired["conditions"] = cond.set_condition(
                desired["conditions"],
                cond.condition(
                    cond.AUTOSCALER_PRESENT, value, reason, message, meta.get("generation"), now
                ),
                now,
            )
    changes = status_changes(current, desired)
    if changes:
        log.debug("%s/%s: status fields changed: %s", ns, name, ", ".join(sorted(changes)))
        try:
            client.patch_status(ns, name, changes)
            out.wrote_status = True
        except (ApiError, NotFoundError) as exc:
            out.retry = str(exc)
    opmetrics.MODE.labels(ns, name).set(opmetrics.mode_value(desired.get("speculationMode")))
    ready = [c for c in desired.get("conditions") or [] if c["type"] == cond.READY]
    opmetrics.READY.labels(ns, name).set(1 if ready and ready[0]["status"] == "True" else 0)
    out.events = status_events(current, desired, cfg) + out.events
    return out
