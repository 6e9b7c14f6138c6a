"""The pure core of a reconcile pass: from what was observed to what should be written.

``desired(observed, settings, memo)`` takes one ``Observed`` snapshot (observe.py: the
SpecServer, its children, autoscalers, model configs, signals, the clock) and returns a
``PassPlan``: the switch intent to record first, the children to write (missing, changed, or
edited by hand in a field the operator owns), the children to delete, the typed status
(``SpecServerStatus``) and its merge patch, the events, and why the next pass should try again.
It does no I/O: the thin apply step (reconcile/apply.py) writes the plan. ``memo`` (the cycle's
``PassCache``) only memoises renderings, engine configs and which stored status was found
canonical: a plan is the same with an empty one. The policy's evaluation time is the one piece
of state the plan carries out (``evaluated_at``) for the apply step to record.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from specserver_advisor.launch.model import EngineConfig
from specserver_advisor.launch.multinode import effective_policy
from specserver_advisor.lint.launchlint import build_engine_config
from specserver_advisor.loaders.configchain import ModelConfigs
from specserver_advisor.models import (
    MAX_LEDGER_ENTRIES,
    AutoSpeculation,
    Condition,
    Mode,
    SpecServer,
    SpecServerStatus,
)
from specserver_advisor.policy.model import KEEP, Observation, PolicyContext, SpecMode
from specserver_advisor.policy.switchcost import modelled_startup_s, switch_deadline_s
from specserver_advisor.sglang.configvalues import ConfigShapeError
from specserver_operator.core import children, nodeschange, speccheck
from specserver_operator.core import conditions as cond
from specserver_operator.core.autopilot import PAUSE_ANNOTATION, AutoStep, auto_step
from specserver_operator.core.blocked import Blocked
from specserver_operator.core.bluegreen import MODE_LABEL
from specserver_operator.core.drift import SCALED_KINDS, drift
from specserver_operator.core.drift import replicas as live_replicas
from specserver_operator.core.hashes import applied_hash
from specserver_operator.core.names import child_name
from specserver_operator.core.nodeschange import NodesStep, Phase, Seen
from specserver_operator.core.observed import Observed
from specserver_operator.core.passcache import PassCache
from specserver_operator.core.podpolicy import PodPolicy
from specserver_operator.core.status import (
    auto_view,
    autoscaler_condition,
    compute_status,
    deployment_state,
    speculation_wanted,
    status_events,
)
from specserver_operator.core.statusmodel import status_plan
from specserver_operator.core.switching import iso

#: Ready=False's reason while the engine starts (status.py): a known cause replaces it.
NOT_READY = "EngineNotReady"
#: Status fields of a new switch, written before the engine is touched.
INTENT_FIELDS = ("switch", "policyState", "decisions", "lastDecisionReason")
#: Switch results recorded before the engine is touched too (switching.py's ends at a deadline).
DEADLINE_RESULTS = ("blocked", "failed", "fellback")
Event = tuple[str, str, str]  # (type, reason, message)


class RenderSettings(Protocol):
    """What the pure core reads of the operator's settings (``runsettings.Settings`` has it)."""

    @property
    def pod_policy(self) -> PodPolicy: ...

    @property
    def preflight_image(self) -> str: ...


@dataclass(frozen=True)
class Write:
    """A child to write, and what a hand edit changed in it (None: missing or changed spec)."""

    child: children.Child
    repair: str | None = None


@dataclass
class Decided:
    """The engine decisions the status is built from."""

    cfg: EngineConfig | None = None
    config_error: str | None = None
    step: AutoStep | None = None
    #: overrides Progressing: (status, reason, message)
    progressing: tuple[str, str, str] | None = None
    #: overrides Ready: (status, reason, message)
    not_ready: tuple[str, str, str] | None = None
    #: a resources.nodes change's part of the pass (nodeschange.py)
    nodes: NodesStep | None = None
    #: the workload status reads when not the spec's own (the old kind while it serves)
    serving: tuple[str, str] | None = None


@dataclass
class PassPlan:
    """What one pass should write, in order: intent, children, deletions, status."""

    decided: Decided
    status: SpecServerStatus
    #: the merge patch that turns the stored status into ``status`` (empty: write nothing)
    patch: dict[str, Any]
    #: status fields of a new switch, recorded before any child changes
    intent: dict[str, Any] | None = None
    writes: list[Write] = field(default_factory=list)
    deletions: list[tuple[str, str]] = field(default_factory=list)
    #: renders the full objects of ``writes`` (only called when one is written)
    rendered: children.Children | None = None
    #: events of condition flips (status_of), and the policy's own
    status_events: list[Event] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    retry: str | None = None
    #: when the policy was evaluated (None: not this pass), and how long it took
    evaluated_at: float | None = None
    evaluation_s: float = 0.0
    #: the signal sample the policy evaluated (its ``Observation.ts``; None: none)
    evaluated_sample: float | None = None
    #: guarded status someone else wrote, to write back first (ownstatus.py)
    restore: dict[str, Any] = field(default_factory=dict)


def desired(observed: Observed, settings: RenderSettings, memo: PassCache) -> PassPlan:
    """The plan for one SpecServer (no I/O)."""
    meta, current = observed.meta, observed.current
    uid = meta["uid"]
    server, configs = observed.server, observed.configs
    decided = Decided(config_error=observed.config_error)
    if observed.invalid is not None:
        decided.cfg = EngineConfig(False, "InvalidSpec", observed.invalid)
    deployment = children.serving_workload(
        observed.child, meta["name"], observed.blue_green, observed.workload_kind
    )
    evaluation_s = 0.0
    seen = None
    if server is not None and observed.switch is None:  # one switch at a time
        seen = children.nodes_seen(observed.child, server, uid, observed.blue_green)
        if observed.nodes_change is None and (seen.new_ready or seen.old is None):
            seen = None  # no resources.nodes change under way
    if server is not None and configs is not None:
        try:
            started = time.perf_counter()
            # Auto holds its mode while a resources.nodes change is under way.
            if seen is None:
                decided.step = _auto(observed, server, configs, current, deployment, memo)
            evaluation_s = time.perf_counter() - started
            if decided.step is not None:
                want = decided.step.speculative
            elif server.spec.mode == Mode.AUTO and observed.switch is not None:
                want = SpecMode.from_status(observed.switch.target).speculative
            else:
                held = observed.policy_state if server.spec.mode == Mode.AUTO else None
                want = speculation_wanted(server.spec, auto_view(current, held))
            decided.cfg = _checked(
                observed, server, engine_config(server, uid, configs, want, memo), settings
            )
        except ConfigShapeError as exc:  # a config the tenant gave that no model has
            decided.cfg = speccheck.shape_refusal(configs, exc)
    step = decided.step
    plan = PassPlan(decided, SpecServerStatus(), {}, retry=observed.config_error)
    if step is not None:
        plan.evaluated_at = observed.now_ts
        plan.evaluation_s = evaluation_s
        if step.decision is not None and observed.metrics is not None:
            plan.evaluated_sample = observed.metrics.ts
        plan.events += step.events
        new = step.status.get("switch") or {}
        before = observed.switch
        begun = bool(new) and (before is None or bool(new.get("fallback") and not before.fallback))
        if begun or step.switch_result in DEADLINE_RESULTS:
            # The intent goes to status before any child changes: an operator killed in
            # between finds the switch (or its fallback to Recreate, or its end at the
            # deadline) there on restart and completes it (exactly once). An end is recorded
            # first too: once the standby is scaled back its pods, and the cause they showed,
            # are gone, and a restart would no longer know why the switch ended.
            plan.intent = {k: v for k, v in step.status.items() if k in INTENT_FIELDS}
    cfg = decided.cfg
    missing = _missing_kind(observed)
    if missing is not None:
        decided.progressing = decided.not_ready = missing
    elif server is not None and configs is not None and cfg is not None and cfg.valid:
        if seen is not None:
            decided.nodes = _nodes_step(observed, server, configs, seen, cfg, memo)
            nodes = decided.nodes
            plan.events += nodes.events
            if nodes.intent and nodes.writes_record:
                # A merge patch: what the stored record has and the new one not is nulled.
                record = nodes.record if isinstance(nodes.record, dict) else None
                stored = current.get("switch") or {}
                gone = {k: None for k in stored if record is not None and k not in record}
                plan.intent = {"switch": None if record is None else {**gone, **record}}
                if nodes.entry is not None:
                    plan.intent["decisions"] = _nodes_ledger(current, nodes, cfg, observed.now_ts)
            if nodes.phase in (Phase.FOLLOW, Phase.HELD) and seen.old is not None:
                decided.serving = seen.old  # status reads the old kind while it serves
        _plan_children(plan, observed, server, configs, cfg, settings, memo)
    if decided.serving is not None:
        deployment = observed.child(*decided.serving)
    plan.status, plan.patch, plan.status_events = status_of(observed, decided, deployment, memo)
    return plan


def _nodes_step(
    observed: Observed,
    server: SpecServer,
    configs: ModelConfigs,
    seen: Seen,
    cfg: EngineConfig,
    memo: PassCache,
) -> NodesStep:
    """This pass's part of a ``resources.nodes`` change (nodeschange.py): the deadline from
    the SpecServer's autoSpeculation (its defaults when unset), whatever the mode."""
    policy = effective_policy(server.spec)
    ctx = policy_ctx(server, observed.meta["uid"], configs, memo)
    mode = SpecMode.of(cfg.speculative)
    workload = children.new_engine(server, observed.blue_green, mode)
    return nodeschange.step(
        observed.nodes_change,
        server,
        seen,
        policy,
        switch_deadline_s(policy, ctx),
        mode,
        observed.blocked(workload),
        observed.now_ts,
        modelled_startup_s(ctx),
    )


def _nodes_ledger(
    current: dict[str, Any], nodes: NodesStep, cfg: EngineConfig, now: float
) -> list[dict[str, Any]]:
    """The ledger with the nodes change's entry (a nodes change keeps the speculation mode)."""
    assert nodes.entry is not None
    reason, message = nodes.entry
    mode = SpecMode.of(cfg.speculative)
    entries = list(current.get("decisions") or [])
    entries.append(
        {
            "time": iso(now),
            "action": KEEP,
            "reason": reason,
            "mode": str(mode.status),
            "message": message[:300],
        }
    )
    return entries[-MAX_LEDGER_ENTRIES:]


def _missing_kind(observed: Observed) -> tuple[str, str, str] | None:
    """Ready/Progressing False when the workload's kind has no CRD in the cluster (a
    multi-node SpecServer without LeaderWorkerSet installed): nothing is written for it."""
    if observed.server is None or observed.workload_kind not in observed.absent_kinds:
        return None
    return (
        "False",
        cond.LWS_MISSING,
        f"spec.resources.nodes = {observed.server.spec.resources.nodes} runs on a "
        "LeaderWorkerSet (leaderworkerset.x-k8s.io/v1), and this cluster has no LeaderWorkerSet "
        "CRD: install LeaderWorkerSet v0.10 (https://lws.sigs.k8s.io), or set "
        "spec.resources.nodes to 1",
    )


def _checked(
    observed: Observed, server: SpecServer, cfg: EngineConfig, settings: RenderSettings
) -> EngineConfig:
    """``cfg`` unless the context, the pod policy (the admission webhook's own checks:
    speccheck.render_problems) or a Secret no review approved refuse it; with a missing
    Secret's warning."""
    problems = speccheck.render_problems(server, cfg, settings.pod_policy)
    if problems and problems[-1] != (cfg.reason, cfg.message):
        cfg = EngineConfig(False, *problems[-1])
    if observed.unapproved_secret is not None and cfg.valid:
        # Any refusal keeps the Secret out of pods; this one is named when it is the only one.
        cfg = EngineConfig(False, cond.SECRET_NOT_APPROVED, observed.unapproved_secret)
    if observed.missing_secret and cfg.valid:
        cfg = dataclasses.replace(cfg, warnings=[*cfg.warnings, observed.missing_secret])
    return cfg


def _plan_children(
    plan: PassPlan,
    observed: Observed,
    server: SpecServer,
    configs: ModelConfigs,
    cfg: EngineConfig,
    settings: RenderSettings,
    memo: PassCache,
) -> None:
    uid = observed.meta["uid"]
    strategy = (server.spec.auto_speculation or AutoSpeculation()).switch_strategy
    wanted = children.plan_children(
        observed.child,
        server,
        uid,
        cfg,
        lambda speculative: engine_config(server, uid, configs, speculative, memo),
        settings.preflight_image,
        strategy.value,
        memo.rendered,
        recreate=_falling_back(observed, plan.decided.step),
        nodes=plan.decided.nodes.phase if plan.decided.nodes is not None else None,
    )
    plan.rendered, plan.deletions = wanted, list(wanted.delete)
    conflicts = []
    for child in wanted.apply:
        found = observed.child(child.kind, child.name)
        repair = None
        if applied_hash(found) == child.digest:
            repair = _drift(observed, child, found)
            if repair is None:
                continue
        if found is not None and not children.owned(found, uid):
            conflicts.append(f"{child.kind} {child.name}")  # never take over another's
            continue
        plan.writes.append(Write(child, repair))
    if conflicts:
        plan.decided.progressing = (
            "False",
            "NameConflict",
            f"{', '.join(conflicts)} exists and is not this SpecServer's; rename one of them",
        )
    elif wanted.switching is not None:
        plan.decided.progressing = ("True", "BlueGreenSwitch", wanted.switching)


def _falling_back(observed: Observed, step: AutoStep | None) -> bool:
    """Whether the switch under way (after this pass's step) fell back to Recreate: the old
    engine's GPUs are freed first (switching.py)."""
    if step is not None and "switch" in step.status:
        return bool((step.status["switch"] or {}).get("fallback"))
    return observed.switch is not None and observed.switch.fallback is not None


def _drift(observed: Observed, child: children.Child, found: dict[str, Any] | None) -> str | None:
    """What a hand edit changed in an owned field of ``found`` (None: nothing)."""
    what = drift(child.kind, found, child.owned, child.replicas, autoscaled=True)
    replicas_differ = child.kind in SCALED_KINDS and live_replicas(found) != child.replicas
    if what is None and not replicas_differ:
        return None
    scalers = observed.autoscalers or []
    scaled = any(tk == child.kind and target == child.name for _, _, tk, target in scalers)
    return drift(child.kind, found, child.owned, child.replicas, autoscaled=scaled)


def status_of(
    observed: Observed, decided: Decided, deployment: dict[str, Any] | None, memo: PassCache
) -> tuple[SpecServerStatus, dict[str, Any], list[Event]]:
    """The typed status for what runs (``deployment``), its merge patch, and its events."""
    meta, current, now = observed.meta, observed.current, observed.now
    generation = meta.get("generation")
    server, step = observed.server, decided.step
    events: list[Event] = []

    def put(conds: list[Condition], type_: str, value: tuple[str, str, str]) -> list[Condition]:
        return cond.put(conds, type_, *value, generation, now)

    stored = cond.parse(current.get("conditions"))

    fields = compute_status(
        generation=generation,
        current=current,
        cfg=decided.cfg,
        config_error=decided.config_error,
        deployment=deployment,
        # An unparsable spec names no replicas: what runs is judged by its own.
        replicas=server.spec.replicas if server is not None else live_replicas(deployment) or 0,
        now=now,
        stored=stored,
    )
    conds: list[Condition] = fields.pop("conditions")
    if decided.progressing is not None:
        before = cond.get_condition(stored, cond.PROGRESSING)
        reason = decided.progressing[1]
        if reason == "NameConflict" and (before is None or before.reason != reason):
            events.append(("Warning", reason, decided.progressing[2]))
        conds = put(conds, cond.PROGRESSING, decided.progressing)
    if decided.not_ready is not None:
        before = cond.get_condition(stored, cond.READY)
        if before is None or before.reason != decided.not_ready[1]:
            events.append(("Warning", decided.not_ready[1], decided.not_ready[2]))
        conds = put(conds, cond.READY, decided.not_ready)
    if step is not None:
        fields.update(step.status)
        if step.metrics_condition is not None:
            conds = put(conds, cond.METRICS_AVAILABLE, step.metrics_condition)
        if step.steps_condition is not None:
            conds = put(conds, cond.ENGINE_ZERO_STEPS, step.steps_condition)
        elif step.decision is not None:  # the On engine does not adapt (any more)
            conds = [c for c in conds if c.type != cond.ENGINE_ZERO_STEPS]
    elif server is not None and server.spec.mode != Mode.AUTO:
        if observed.switch is not None:
            fields["switch"] = None  # a switch Auto left unfinished ends with Auto
        auto_only = (cond.METRICS_AVAILABLE, cond.ENGINE_ZERO_STEPS)
        conds = [c for c in conds if c.type not in auto_only]
    nodes = decided.nodes
    if nodes is not None:
        if nodes.writes_record:
            fields["switch"] = nodes.record
        if nodes.entry is not None and decided.cfg is not None:
            fields["decisions"] = _nodes_ledger(current, nodes, decided.cfg, observed.now_ts)
        if nodes.progressing is not None:
            conds = put(conds, cond.PROGRESSING, nodes.progressing)
    conds, blocked_events = blocked_conditions(observed, conds, stored, generation, now)
    events += blocked_events
    if server is not None and deployment is not None and observed.autoscalers is not None:
        serving = (deployment.get("metadata") or {}).get("name") or child_name(meta["name"])
        found = autoscaler_condition(serving, observed.autoscalers)
        conds = put(conds, cond.AUTOSCALER_PRESENT, found)
    fields["conditions"] = cond.as_api(conds)
    status, patch = status_plan(
        current,
        fields,
        meta["uid"],
        meta.get("resourceVersion"),
        memo,
        lambda: observed.policy_state,
    )
    return status, patch, status_events(current, fields, conds, decided.cfg, stored) + events


def blocked_workload(observed: Observed) -> Blocked | None:
    """The first owned engine workload that is not Ready for a known cause (blocked.py), in
    the order ``children.workload_keys`` lists them (None: none is blocked)."""
    uid = str(observed.meta.get("uid"))
    for (kind, name), obj in observed.children.items():
        if obj is None or kind not in SCALED_KINDS or not children.owned(obj, uid):
            continue
        found = observed.blocked(name)
        if found is not None:
            return found
    return None


def blocked_conditions(
    observed: Observed,
    conds: list[Condition],
    stored: list[Condition],
    generation: int | None,
    now: str,
) -> tuple[list[Condition], list[Event]]:
    """``SwitchBlocked`` (and Ready=False with the same cause while no engine serves), and a
    ``Warning SwitchBlocked`` event once per cause (a new reason, not a new message: the
    scheduler's node count changing is the same cause)."""
    found = blocked_workload(observed)
    before = cond.get_condition(stored, cond.SWITCH_BLOCKED)
    if found is None:
        if before is not None and before.status.value != "False":
            nothing = ("False", cond.NOT_BLOCKED, "no engine workload is blocked")
            conds = cond.put(conds, cond.SWITCH_BLOCKED, *nothing, generation, now)
        return conds, []
    message = found.describe()
    conds = cond.put(conds, cond.SWITCH_BLOCKED, "True", found.reason, message, generation, now)
    ready = cond.get_condition(conds, cond.READY)
    if ready is not None and ready.status.value == "False" and ready.reason == NOT_READY:
        conds = cond.put(conds, cond.READY, "False", found.reason, message, generation, now)
    events: list[Event] = []
    if before is None or before.status.value != "True" or before.reason != found.reason:
        events.append(("Warning", cond.SWITCH_BLOCKED, message))
    return conds, events


def _auto(
    observed: Observed,
    server: SpecServer,
    configs: ModelConfigs,
    current: dict[str, Any],
    deployment: dict[str, Any] | None,
    memo: PassCache,
) -> AutoStep | None:
    """Evaluate the policy when its interval has passed (or a switch is being followed)."""
    spec, uid, now_ts = server.spec, observed.meta["uid"], observed.now_ts
    policy = effective_policy(spec)
    due = now_ts - memo.last_evaluation.get(uid, 0.0) >= policy.evaluation_interval_seconds
    if spec.mode != Mode.AUTO or not (due or observed.switch):
        return None
    # The sample the policy evaluated last (a slow refresh still running, or Prometheus failing
    # and this sample held): nothing new to count (a breach counted twice would shorten the
    # confirmation) and nothing to write, until it is older than staleAfterSeconds.
    if not observed.switch and _seen(observed.metrics, memo.evaluated_sample.get(uid)):
        age = observed.metrics.age_s if observed.metrics is not None else None
        if age is not None and age <= policy.stale_after_seconds:
            return None
    labels = (deployment or {}).get("metadata", {}).get("labels", {})
    running = SpecMode.parse(labels.get(MODE_LABEL))
    ready = deployment_state(deployment, spec.replicas)[0]
    paused = server.metadata.annotations.get(PAUSE_ANNOTATION, "").lower() in ("true", "1")
    blocked = None
    if observed.switch is not None:  # why the switch's new engine is not Ready
        target = SpecMode.from_status(observed.switch.target)
        blocked = observed.blocked(children.new_engine(server, observed.blue_green, target))
    return auto_step(
        spec,
        current,
        observed.switch,
        observed.policy_state,
        observed.metrics,
        observed.metrics_error,
        policy_ctx(server, uid, configs, memo),
        running,
        ready,
        now_ts,
        paused,
        blocked,
    )


def _seen(sample: Observation | None, evaluated: float | None) -> bool:
    """Whether ``sample`` is the one the policy evaluated last (its refresh time, signals.py)."""
    return sample is not None and evaluated is not None and sample.ts == evaluated


def engine_config(
    server: SpecServer, uid: str, configs: ModelConfigs, speculative: bool, memo: PassCache
) -> EngineConfig:
    """The engine config of one mode (memoised per generation)."""
    key = (uid, server.metadata.generation or 0, speculative)
    if key not in memo.engine_configs:
        memo.engine_configs[key] = _shared(
            memo,
            server,
            configs,
            SpecMode.of(speculative),
            lambda: build_engine_config(server.spec, configs, speculative),
        )
    return memo.engine_configs[key]  # type: ignore[no-any-return]


def policy_ctx(
    server: SpecServer, uid: str, configs: ModelConfigs, memo: PassCache
) -> PolicyContext:
    """What the performance model predicts for this SpecServer (memoised per generation): the
    speculative engine config's own (``launch.settle`` made it from the plan it already has)."""
    key = (uid, server.metadata.generation or 0)
    if key not in memo.policy_contexts:
        memo.policy_contexts[key] = _shared(
            memo,
            server,
            configs,
            "policy",
            lambda: engine_config(server, uid, configs, True, memo).policy,
        )
    return memo.policy_contexts[key]  # type: ignore[no-any-return]


def _shared(
    memo: PassCache, server: SpecServer, configs: ModelConfigs, what: str, build: Any
) -> Any:
    """A result that depends only on the spec and the model configs, shared by every
    SpecServer with the same ones. Keyed by a digest of the spec, not its JSON: a spec with
    inline configs is up to half a megabyte of text, and each key would keep its own copy."""
    spec_json = server.spec.model_dump_json(by_alias=True)
    key = (hashlib.sha256(spec_json.encode()).hexdigest(), id(configs), what)
    if key not in memo.shared:
        memo.shared[key] = (configs, build())
    return memo.shared[key][1]
