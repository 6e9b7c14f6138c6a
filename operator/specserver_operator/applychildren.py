"""Writing one SpecServer's planned children (the thin apply step after the decisions).

Called by controller.reconcile with the plan of children.py. A child is written when its
content hash changed, or when a hand edit changed a field the operator owns (drift.py: repaired
with a ``DriftRepaired`` event; replicas are left to an HPA or ScaledObject that targets the
Deployment). A child that belongs to someone else is never taken over: it is reported as a
conflict.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from specserver_operator import children
from specserver_operator.client import ApiError, KubeClient, NotFoundError, applied_hash
from specserver_operator.drift import drift
from specserver_operator.drift import replicas as live_replicas
from specserver_operator.passcache import PassCache

log = logging.getLogger("specserver.controller")
#: How often a namespace's HPAs and ScaledObjects are listed.
AUTOSCALER_REFRESH_S = 60.0


@dataclass
class Applied:
    """What applying a plan did."""

    written: int = 0
    conflicts: list[str] = field(default_factory=list)  # "Kind name" of others' objects
    events: list[tuple[str, str, str]] = field(default_factory=list)


def apply_children(
    client: KubeClient,
    plan: children.Children,
    namespace: str,
    uid: str,
    now_ts: float,
    memo: PassCache,
) -> Applied:
    """Write the children of ``plan`` that are missing, changed or edited by hand."""
    out = Applied()
    for child in plan.apply:
        found = client.get(child.kind, namespace, child.name)
        repair = None
        if applied_hash(found) == child.digest:
            repair = _drift(client, namespace, child, found, now_ts, memo)
            if repair is None:
                continue
        if found is not None and not children.owned(found, uid):
            out.conflicts.append(f"{child.kind} {child.name}")  # never take over another's
            continue
        if client.apply(plan.object(child), child.digest, force=repair is not None):
            out.written += 1
            if repair is not None:
                log.info("%s: repaired %s %s (%s)", namespace, child.kind, child.name, repair)
                message = f"{child.kind} {child.name} was edited ({repair}); restored"
                out.events.append(("Normal", "DriftRepaired", message))
    return out


def _drift(
    client: KubeClient,
    namespace: str,
    child: children.Child,
    found: dict[str, Any] | None,
    now_ts: float,
    memo: PassCache,
) -> str | None:
    """What a hand edit changed in an owned field of ``found`` (None: nothing)."""
    what = drift(child.kind, found, child.owned, child.replicas, autoscaled=True)
    replicas_differ = child.kind == "Deployment" and live_replicas(found) != child.replicas
    if what is None and not replicas_differ:
        return None
    scalers = autoscalers(client, namespace, now_ts, memo) or []
    scaled = any(tk == "Deployment" and target == child.name for _, _, tk, target in scalers)
    return drift(child.kind, found, child.owned, child.replicas, autoscaled=scaled)


def autoscalers(
    client: KubeClient, namespace: str, now_ts: float, memo: PassCache
) -> list[tuple[str, str, str, str]] | None:
    """HPAs/ScaledObjects of a namespace, listed at most once a minute (None if unreadable)."""
    cached = memo.autoscalers.get(namespace)
    if cached and now_ts - cached[0] < AUTOSCALER_REFRESH_S:
        return cached[1]
    try:
        found = client.list_autoscalers(namespace)
    except (ApiError, NotFoundError):
        return cached[1] if cached else None
    memo.autoscalers[namespace] = (now_ts, found)
    return found
