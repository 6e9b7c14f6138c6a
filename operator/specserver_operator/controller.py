"""One reconcile pass for one SpecServer: observe, decide (pure), apply.

Called by cycle.py (each shared cycle, and kopf's create/update handlers). The pass is three
steps: ``observe.observe`` reads everything (children, autoscalers, model configs, the Secret
check, the signals the signal thread fetched) into an ``Observed`` snapshot; the pure core
``desired.desired`` turns it into a ``Plan`` (children to write and delete, typed status and
its patch, events); ``applychildren.apply_plan`` writes the plan. Returns the events to post
and, when a dependency (a ConfigMap, an endpoint) is not readable yet, why the next pass should
try again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from specserver_operator import conditions as cond
from specserver_operator import opmetrics
from specserver_operator.applychildren import apply_plan
from specserver_operator.client import KubeClient
from specserver_operator.desired import Plan, desired
from specserver_operator.observe import Settings, observe, read_configs
from specserver_operator.passcache import PassCache
from specserver_operator.signals import SignalCache

__all__ = ["DEFAULT", "Outcome", "Settings", "clear_caches", "read_configs", "reconcile"]


@dataclass
class Outcome:
    """What a pass did, for handlers to report."""

    events: list[tuple[str, str, str]] = field(default_factory=list)  # (type, reason, message)
    wrote_children: int = 0
    wrote_status: bool = False
    retry: str | None = None


#: The pass cache of callers that bring none (tests; the cycle owns its own).
DEFAULT = PassCache()


def clear_caches() -> None:
    """Forget everything the default pass cache holds (tests)."""
    DEFAULT.clear()


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
    observed = observe(client, body, now, now_ts, settings, signals, memo)
    plan = desired(observed, settings, memo)
    if plan.evaluated_at is not None:
        memo.last_evaluation[body["metadata"]["uid"]] = plan.evaluated_at
    applied, plan = apply_plan(client, observed, plan, memo)
    _record_metrics(body["metadata"], plan)
    return Outcome(
        events=plan.status_events + applied.events + plan.events,
        wrote_children=applied.written,
        wrote_status=applied.wrote_status,
        retry=applied.retry,
    )


def _record_metrics(meta: dict[str, Any], plan: Plan) -> None:
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
