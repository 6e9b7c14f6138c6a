"""Pure status decisions of a pass: which mode to render and what the status should say.

``compute_status`` takes everything observed (engine config or why there is none, the engine
workload: a Deployment, or a LeaderWorkerSet across nodes; the clock as an argument) and returns
the status fields it decides (the pure core, desired.py, completes them and builds the typed
status, statusmodel.py); ``status_changes`` says which fields differ so a resync with nothing
new writes nothing.
"""

from __future__ import annotations

from typing import Any

from specserver_advisor.launch.model import EngineConfig
from specserver_advisor.models import Condition, Mode, SpecServerSpec
from specserver_advisor.policy.model import PolicyState, SpecMode
from specserver_operator.core import conditions as cond
from specserver_operator.core import kinds
from specserver_operator.core.kinds import SCALED_KINDS
from specserver_operator.core.kinds import STATUS_PENDING_KEY as STATUS_PENDING_KEY
from specserver_operator.core.kinds import lws_state as lws_state


def speculation_wanted(spec: SpecServerSpec, status: dict[str, Any]) -> bool:
    """Enabled/Disabled from the spec; Auto keeps what runs (the policy switches), on at first."""
    if spec.mode == Mode.ENABLED:
        return True
    if spec.mode == Mode.DISABLED:
        return False
    return bool(status.get("speculationMode") != SpecMode.OFF.status)


def deployment_state(deployment: dict[str, Any] | None, replicas: int) -> tuple[bool, bool, str]:
    """(ready, progressing, message) from the engine workload's status, by its kind's rule
    (kinds.py: a Deployment's ``deployment_state``, a LeaderWorkerSet's ``lws_state``)."""
    return kinds.state(deployment, replicas)


def compute_status(
    *,
    generation: int | None,
    current: dict[str, Any],
    cfg: EngineConfig | None,
    config_error: str | None,
    deployment: dict[str, Any] | None,
    replicas: int,
    now: str,
    stored: list[Condition] | None = None,
) -> dict[str, Any]:
    """The full status the SpecServer should show (``conditions`` typed, ``cond.as_api`` writes
    them). ``stored``: ``current``'s conditions, parsed, where the caller has them."""
    if stored is None:
        stored = cond.parse(current.get("conditions"))
    conds = stored or cond.initial_conditions(generation, now)
    status: dict[str, Any] = {"observedGeneration": generation}

    def put(type_: str, value: str, reason: str, message: str) -> None:
        nonlocal conds
        conds = cond.put(conds, type_, value, reason, message, generation, now)

    ready, progressing, ready_msg = deployment_state(deployment, replicas)
    if config_error is not None:
        put(cond.CONFIG_VALID, "Unknown", "ConfigUnavailable", config_error)
    elif cfg is not None and not cfg.valid:
        put(cond.CONFIG_VALID, "False", cfg.reason, cfg.message)
    elif cfg is not None:
        warn = "; ".join(f"{code}: {msg}" for code, msg in cfg.warnings)
        put(cond.CONFIG_VALID, "True", "Valid", warn or cfg.message)
    valid = cfg is not None and cfg.valid and config_error is None
    if ready:
        put(cond.READY, "True", "EngineReady", ready_msg)
    else:
        put(cond.READY, "False", *_not_ready_cause(cfg, config_error, deployment, ready_msg))
    put(
        cond.PROGRESSING,
        "True" if progressing and valid else "False",
        "RollingOut" if progressing and valid else ("ConfigInvalid" if not valid else "Stable"),
        ready_msg,
    )
    running_spec = _running_speculation(deployment)
    if running_spec is None and valid and cfg is not None:
        running_spec = cfg.speculative
    if running_spec is None:
        put(cond.SPECULATION_ACTIVE, "Unknown", "NoEngine", "no engine deployed")
    else:
        put(
            cond.SPECULATION_ACTIVE,
            "True" if running_spec else "False",
            "SpeculationOn" if running_spec else "SpeculationOff",
            "the engine runs with speculative flags"
            if running_spec
            else "the engine runs without speculative flags",
        )
        mode = str(SpecMode.of(running_spec).status)
        status["speculationMode"] = mode
        same = current.get("speculationMode") == mode
        status["speculationModeSince"] = (
            current.get("speculationModeSince")
            if same and current.get("speculationModeSince")
            else now
        )
    status["conditions"] = conds
    if valid and cfg is not None:
        status["maxRunningRequests"] = cfg.max_running_requests
        status["maxRunningRequestsSource"] = cfg.max_running_requests_source
        status["maxRunningRequestsReason"] = cfg.max_running_requests_reason
        status["memFractionStatic"] = cfg.mem_fraction_static
        status["memFractionStaticSource"] = cfg.mem_fraction_static_source
        status["memFractionStaticReason"] = cfg.mem_fraction_static_reason
        status["resolved"] = cfg.resolved
    return status


def _not_ready_cause(
    cfg: EngineConfig | None,
    config_error: str | None,
    deployment: dict[str, Any] | None,
    ready_msg: str,
) -> tuple[str, str]:
    """Ready=False's reason and message: the first real cause, not a generic placeholder."""
    if config_error is not None:
        reason, cause = "ConfigUnavailable", config_error
    elif cfg is not None and not cfg.valid:
        reason, cause = cfg.reason, cfg.message
    else:
        return "EngineNotReady", ready_msg
    if deployment is None:
        return reason, f"{cause} (nothing deployed until this is fixed)"
    return reason, f"{cause} (the running engine is kept: {ready_msg})"


def _running_speculation(deployment: dict[str, Any] | None) -> bool | None:
    if deployment is None:
        return None
    labels = deployment["metadata"].get("labels") or {}
    mode = labels.get("specserver.io/mode")
    return None if mode is None else mode == SpecMode.ON


def status_changes(current: dict[str, Any], desired: dict[str, Any]) -> dict[str, Any]:
    """The merge patch that turns ``current`` into ``desired`` for the fields ``desired`` names
    (empty: write nothing). Inside an object field, a key that is gone is patched to null, so
    the stored status loses it too and the next pass finds nothing to write."""
    out: dict[str, Any] = {}
    for key, want in desired.items():
        have = current.get(key)
        if isinstance(want, dict) and isinstance(have, dict):
            inner = _object_patch(have, want)
            if inner:
                out[key] = inner
        elif have != want:
            out[key] = want
    return out


def _object_patch(have: dict[str, Any], want: dict[str, Any]) -> dict[str, Any]:
    out = status_changes(have, want)
    out.update({k: None for k in have if k not in want})
    return out


def autoscaler_condition(
    workload_name: str, autoscalers: list[tuple[str, str, str, str]]
) -> tuple[str, str, str]:
    """``AutoscalerPresent``: whether an HPA or KEDA ScaledObject scales the engine workload
    (the serving Deployment or LeaderWorkerSet, by its name)."""
    hits = [
        f"{kind} {name}"
        for kind, name, target_kind, target in autoscalers
        if target_kind in SCALED_KINDS and target == workload_name
    ]
    if not hits:
        return "False", "NoAutoscaler", "no HPA or ScaledObject targets the engine Deployment"
    return (
        "True",
        "AutoscalerTargetsEngine",
        f"{', '.join(hits)} scales the engine Deployment: replicas change while speculation "
        "switches restart pods, and each replica's KV pool (not the replica count) is what "
        "makes speculation stop paying; keep minReplicas stable during switches",
    )


def auto_view(current: dict[str, Any], held: PolicyState | None) -> dict[str, Any]:
    """For Auto between evaluations: keep the mode the policy state holds (else what runs)."""
    if held is not None:
        return {"speculationMode": str(held.mode.status)}
    return current


def status_events(
    current: dict[str, Any],
    desired: dict[str, Any],
    conditions: list[Condition],
    cfg: EngineConfig | None,
    stored: list[Condition] | None = None,
) -> list[tuple[str, str, str]]:
    """Events for condition flips and reason changes only (no repeats on resync)."""
    events = []
    old = cond.parse(current.get("conditions")) if stored is None else stored
    for new in conditions:
        before = cond.get_condition(old, new.type)
        if before and before.status == new.status and before.reason == new.reason:
            continue
        status = new.status.value
        if new.type == cond.CONFIG_VALID and status == "False":
            events.append(("Warning", new.reason, new.message))
        elif new.type == cond.CONFIG_VALID and status == "Unknown":
            events.append(("Warning", "ConfigUnavailable", new.message))
        elif new.type == cond.READY and status == "True":
            events.append(("Normal", "EngineReady", new.message))
        elif new.type == cond.SPECULATION_ACTIVE and status in ("True", "False"):
            events.append(("Normal", new.reason, new.message))
    if desired.get("memFractionStaticSource") == "Computed" and (
        current.get("memFractionStatic") != desired.get("memFractionStatic")
        or current.get("memFractionStaticSource") != "Computed"
    ):
        events.append(("Normal", "MemFractionComputed", desired["memFractionStaticReason"]))
    if cfg is not None and cfg.valid:
        for code, message in cfg.warnings:
            if code not in str(current.get("conditions")):
                events.append(("Warning", code, message))
    return events
