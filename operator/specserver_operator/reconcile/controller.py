"""One reconcile pass for one SpecServer: observe, decide (pure), apply.

Called by cycle.py (each shared cycle, and kopf's create/update handlers). The pass is three
steps: ``observe.observe`` reads everything (children, autoscalers, model configs, the Secret
check, the signals the signal thread fetched) into an ``Observed`` snapshot; the pure core
``desired.desired`` turns it into a ``PassPlan`` (children to write and delete, typed status
and its patch, events); ``applychildren.apply_plan`` writes the plan. Returns the events to post
and, when a dependency (a ConfigMap, an endpoint) is not readable yet, why the next pass should
try again. With ``defer``, a pass whose plan writes anything stops before the first write and
returns the rest (``Outcome.rest``) for the cycle's writer threads (cycle.py).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from specserver_operator.core import conditions as cond
from specserver_operator.core import ownstatus
from specserver_operator.core.desired import PassPlan, desired
from specserver_operator.core.observed import Observed
from specserver_operator.core.passcache import PassCache
from specserver_operator.kube.cachedclient import PassClient
from specserver_operator.metrics import registry as opmetrics
from specserver_operator.reconcile.apply import apply_plan
from specserver_operator.reconcile.observe import observe, read_configs
from specserver_operator.reconcile.runsettings import Settings, read_settings
from specserver_operator.reconcile.signals import SignalCache

__all__ = [
    "DEFAULT",
    "Outcome",
    "Settings",
    "clear_caches",
    "read_configs",
    "reconcile",
    "writes_anything",
]


@dataclass
class Outcome:
    """What a pass did, for handlers to report."""

    events: list[tuple[str, str, str]] = field(default_factory=list)  # (type, reason, message)
    wrote_children: int = 0
    wrote_status: bool = False
    retry: str | None = None
    #: a deferred pass (``reconcile(defer=True)``): its writes, still to be carried out
    rest: Callable[[], Outcome] | None = None


#: The pass cache of callers that bring none (tests; the cycle owns its own).
DEFAULT = PassCache()


def clear_caches() -> None:
    """Forget everything the default pass cache holds (tests)."""
    DEFAULT.clear()


def reconcile(
    client: PassClient,
    body: dict[str, Any],
    now: str,
    settings: Settings | None = None,
    signals: SignalCache | None = None,
    now_ts: float | None = None,
    memo: PassCache | None = None,
    defer: bool = False,
) -> Outcome:
    """Bring one SpecServer's children and status in line with its spec (and the policy).

    ``defer``: when the plan writes anything, write nothing yet and return the writes as
    ``Outcome.rest`` (the caller runs it, under the same per-object lock, on another thread).
    """
    settings = read_settings() if settings is None else settings
    memo = DEFAULT if memo is None else memo
    now_ts = time.time() if now_ts is None else now_ts
    observed, restore = _trusted(observe(client, body, now, now_ts, settings, signals, memo))
    plan = desired(observed, settings, memo)
    plan.restore = restore
    if plan.evaluated_at is not None:
        memo.last_evaluation[body["metadata"]["uid"]] = plan.evaluated_at
    if plan.evaluated_sample is not None:
        memo.evaluated_sample[body["metadata"]["uid"]] = plan.evaluated_sample

    def rest() -> Outcome:
        applied, final = apply_plan(client, observed, plan, memo)
        _record_metrics(body["metadata"], final)
        return Outcome(
            events=final.status_events + applied.events + final.events,
            wrote_children=applied.written,
            wrote_status=applied.wrote_status,
            retry=applied.retry,
        )

    if defer and writes_anything(plan):
        return Outcome(rest=rest)
    return rest()


def _trusted(observed: Observed) -> tuple[Observed, dict[str, Any]]:
    """``observed`` deciding from the operator's own record of status.switch/policyState, and
    what to write back where someone else changed them (ownstatus.py)."""
    status, restore = ownstatus.trusted(observed.current, observed.own_status)
    if not restore:
        return observed, {}
    meta = {k: v for k, v in observed.meta.items() if k != "resourceVersion"}  # not stored
    body = {**observed.body, "metadata": meta, "status": status}
    return dataclasses.replace(observed, body=body), restore


def writes_anything(plan: PassPlan) -> bool:
    """Whether carrying out ``plan`` writes to the API (a child, a status, an event)."""
    return bool(
        plan.restore
        or plan.intent
        or plan.writes
        or plan.deletions
        or plan.patch
        or plan.status_events
        or plan.events
    )


def _record_metrics(meta: dict[str, Any], plan: PassPlan) -> None:
    """The operator's own metrics for this pass (the policy's decision, mode, readiness)."""
    ns, name = meta["namespace"], meta["name"]
    step = plan.decided.step
    if step is not None:
        opmetrics.EVALUATION.observe(plan.evaluation_s)
        if step.decision is not None:
            d = step.decision
            opmetrics.DECISIONS.labels(ns, name, d.action, d.reason).inc()
        if step.switch_result:
            opmetrics.SWITCHES.labels(ns, name, step.switch_result).inc()
    status = plan.status
    mode = status.speculation_mode.value if status.speculation_mode else None
    opmetrics.MODE.labels(ns, name).set(opmetrics.mode_value(mode))
    ready = next((c for c in status.conditions if c.type == cond.READY), None)
    opmetrics.READY.labels(ns, name).set(1 if ready and ready.status == "True" else 0)
    blocked = next((c for c in status.conditions if c.type == cond.SWITCH_BLOCKED), None)
    on = blocked is not None and blocked.status == "True"
    opmetrics.set_blocked(ns, name, blocked.reason if blocked is not None and on else None)
