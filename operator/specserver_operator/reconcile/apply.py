"""The thin apply step: write what the pure core (desired.py) planned, in its order.

First the switch intent (a new switch is in status before the engine is touched; if it cannot
be recorded, no child changes this pass), then the children the plan names (a hand edit is
force-applied, with a ``DriftRepaired`` event), then deletions of children another switch
strategy left; when any child changed, the children are read again (from the cache) and the
status is decided again for what runs now; last the status merge patch. Called by
controller.reconcile; decides nothing itself.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Any

from specserver_operator.core import children, ownstatus
from specserver_operator.core.desired import Event, PassPlan, status_of
from specserver_operator.core.observed import Observed
from specserver_operator.core.passcache import PassCache
from specserver_operator.kube.cachedclient import PassClient
from specserver_operator.kube.errors import ApiError, NotFoundError
from specserver_operator.reconcile.observe import note_template_write, observe_children

log = logging.getLogger("specserver.controller")


@dataclass
class Applied:
    """What applying a plan did."""

    written: int = 0
    wrote_status: bool = False
    events: list[Event] = field(default_factory=list)
    retry: str | None = None


def apply_plan(
    client: PassClient, observed: Observed, plan: PassPlan, memo: PassCache
) -> tuple[Applied, PassPlan]:
    """Write ``plan``; returns what was written and the plan as finally written (its status
    decided again when children changed)."""
    meta = observed.meta
    ns, name = meta["namespace"], meta["name"]
    out = Applied(retry=plan.retry)
    hold, again = False, False
    uid = meta["uid"]

    def write_status(patch: dict[str, Any]) -> None:
        answer = client.patch_status(ns, name, patch)
        memo.own_status[uid] = ownstatus.after_write(memo.own_status.get(uid), patch, answer)
        out.wrote_status = True

    if plan.restore:
        try:
            write_status(plan.restore)
            log.warning("%s/%s: %s", ns, name, ownstatus.forged_message(plan.restore))
            out.events.append(("Warning", ownstatus.REASON, ownstatus.forged_message(plan.restore)))
        except (ApiError, NotFoundError) as exc:
            out.retry, hold = f"status written by another not restored: {exc}", True
    if plan.intent is not None and not hold:
        try:
            write_status(plan.intent)
            stored = {**observed.current, **plan.intent}
            meta = {k: v for k, v in observed.meta.items() if k != "resourceVersion"}
            body = {**observed.body, "metadata": meta, "status": stored}  # not a stored version
            observed = dataclasses.replace(observed, body=body)
            again = True  # the rest of the status is patched over what is stored now
        except (ApiError, NotFoundError) as exc:
            out.retry, hold = f"switch not recorded, engine left as it is: {exc}", True
    if plan.rendered is not None and not hold:
        for write in plan.writes:
            obj = plan.rendered.object(write.child)
            kind, child = write.child.kind, write.child.name
            try:
                applied = client.apply(obj, write.child.digest, force=write.repair is not None)
            except NotFoundError as exc:  # a LeaderWorkerSet without its CRD (installed later?)
                out.retry = f"{kind} {child} not written: {exc}"
                continue
            if applied:
                out.written += 1
                before = observed.child(kind, child)
                note_template_write(memo, before, applied, kind, ns, child)
                if write.repair is not None:
                    log.info("%s: repaired %s %s (%s)", ns, kind, child, write.repair)
                    message = f"{kind} {child} was edited ({write.repair}); restored"
                    out.events.append(("Normal", "DriftRepaired", message))
        for kind, left in plan.deletions:
            client.delete(kind, ns, left)
            out.events.append(
                ("Normal", "ChildRemoved", f"{kind} {left} left by another switch strategy")
            )
        if out.written or plan.deletions:
            found, scalers = observe_children(client, ns, name, observed.now_ts, memo)
            observed = dataclasses.replace(observed, children=found, autoscalers=scalers)
            again = True
    if again:  # status describes what runs after the writes
        deployment = (
            observed.child(*plan.decided.serving)
            if plan.decided.serving is not None
            else children.serving_workload(
                observed.child, name, observed.blue_green, observed.workload_kind
            )
        )
        status, patch, events = status_of(observed, plan.decided, deployment, memo)
        plan = dataclasses.replace(plan, status=status, patch=patch, status_events=events)
    if plan.patch:
        log.debug("%s/%s: status fields changed: %s", ns, name, ", ".join(sorted(plan.patch)))
        try:
            write_status(plan.patch)
        except (ApiError, NotFoundError) as exc:
            out.retry = str(exc)
    return out, plan
