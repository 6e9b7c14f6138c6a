"""A ``resources.nodes`` change between one node and several, as a switch with a deadline (pure).

One node runs on a Deployment, several on a LeaderWorkerSet (render.workload_kind): changing
``spec.resources.nodes`` across that line places a workload of the other kind while the old one
keeps serving (children.py deletes it once the new one is Ready). Here that change is a switch
like Auto's (switching.py), recorded in ``status.switch`` (``kind: NodesChange``, from/to
nodes, the generation it rolls out) with a deadline from ``switchcost.switch_deadline_s`` (the
SpecServer's ``autoSpeculation``, its defaults when unset: every mode has it). The phases:

- FOLLOW: the new workload is starting, the old one serves (until the deadline);
- HELD: cancelled at the deadline: the new workload is deleted, the old one keeps serving and
  the change is not retried until ``heldUntil`` (a back-off doubling per attempt, at most an
  hour) or a new generation of the spec; Progressing False (``SwitchBlocked`` with the cause,
  or ``SwitchFailed``);
- RECREATE: blocked for want of GPUs with ``blockedSwitchFallback: Recreate``: the old kind is
  deleted first, the new one placed on the freed GPUs; the downtime is measured from
  ``fallbackAt`` to Ready and reported. A fallback not Ready by its own deadline is reported
  ``SwitchFailed`` and the record cleared (the old workload is gone: the new one keeps trying).

Every write is safe to interrupt: the record is written (intent) before the children change,
and each phase is a function of the record, the spec and what runs, so a restarted operator
resumes the same phase. Called by desired.py; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from specserver_advisor.models import (
    AutoSpeculation,
    BlockedSwitchFallback,
    SpecServer,
    SwitchInProgress,
    SwitchKind,
)
from specserver_advisor.policy.autocycle import backoff_s
from specserver_advisor.policy.model import Reason, SpecMode
from specserver_operator.core import render
from specserver_operator.core.blocked import Blocked
from specserver_operator.core.switching import cause_text, iso, parse_time

REASON = "NodesChanged"
Event = tuple[str, str, str]


class Phase(StrEnum):
    """What the children plan does for a nodes change (children.plan_children)."""

    FOLLOW = "Follow"
    HELD = "Held"
    RECREATE = "Recreate"


@dataclass(frozen=True)
class Seen:
    """What runs: the new kind's workload Ready, and the old kind's workload (None: none
    serving) with its nodes per replica."""

    new_ready: bool
    old: tuple[str, str] | None
    old_nodes: int = 1


@dataclass
class NodesStep:
    """This pass's part of a nodes change."""

    phase: Phase | None = None
    #: status.switch to write (``MISSING``: leave it)
    record: dict[str, Any] | str | None = "missing"
    #: write ``record`` before any child changes
    intent: bool = False
    events: list[Event] = field(default_factory=list)
    #: one ledger entry: (reason, message)
    entry: tuple[str, str] | None = None
    #: Progressing override: (status, reason, message)
    progressing: tuple[str, str, str] | None = None
    #: the new workload's name, for status and the blocked cause
    workload: str = ""

    @property
    def writes_record(self) -> bool:
        return self.record != MISSING


MISSING = "missing"


def nodes_of(obj: dict[str, Any] | None) -> int:
    """Nodes per replica of an engine workload (a LeaderWorkerSet's group size)."""
    if obj is None or obj.get("kind") != render.LEADER_WORKER_SET:
        return 1
    template = (obj.get("spec") or {}).get("leaderWorkerTemplate") or {}
    size = template.get("size")
    return size if isinstance(size, int) and size > 1 else 2


def step(
    record: SwitchInProgress | None,
    server: SpecServer,
    seen: Seen,
    policy: AutoSpeculation,
    deadline_s: float,
    mode: SpecMode,
    blocked: Blocked | None,
    now: float,
    startup_s: float,
) -> NodesStep:
    """This pass's nodes-change phase and status. ``record``: a stored NodesChange switch (None:
    none); ``mode``: the speculation state that runs (the record's target and previous);
    ``startup_s``: the new engine's modelled start-up (a fallback's modelled downtime)."""
    out = _step(record, server, seen, policy, deadline_s, mode, blocked, now, startup_s)
    if out.phase in (Phase.FOLLOW, Phase.RECREATE) and out.progressing is None:
        until = out.record if isinstance(out.record, dict) else _dump(record) if record else {}
        old = f"{seen.old[0]} {seen.old[1]} serves until then" if seen.old else "with downtime"
        out.progressing = (
            "True",
            "NodesChange",
            f"resources.nodes -> {server.spec.resources.nodes}: {out.workload} is starting "
            f"(deadline {until.get('deadline', '?')}); {old}",
        )
    return out


def _step(
    record: SwitchInProgress | None,
    server: SpecServer,
    seen: Seen,
    policy: AutoSpeculation,
    deadline_s: float,
    mode: SpecMode,
    blocked: Blocked | None,
    now: float,
    startup_s: float,
) -> NodesStep:
    generation = server.metadata.generation or 0
    nodes = server.spec.resources.nodes
    out = NodesStep(workload=render.workload_name(server))
    if record is None:
        if seen.new_ready or seen.old is None:
            return out  # no change under way (or nothing left to keep serving)
        out.phase, out.intent = Phase.FOLLOW, True
        out.record = _record(mode, seen.old_nodes, nodes, generation, now, deadline_s)
        out.events.append(
            (
                "Normal",
                REASON,
                f"resources.nodes {seen.old_nodes} -> {nodes}: {seen.old[0]} {seen.old[1]} "
                f"keeps serving until {out.workload} is Ready (deadline {deadline_s:.0f}s)",
            )
        )
        return out
    if record.to_nodes != nodes or record.generation != generation:
        return _respec(record, out, seen, mode, nodes, generation, now, deadline_s)
    if seen.new_ready:
        return _completed(record, out, now)
    if record.held_until is not None:
        if now < parse_time(record.held_until) and seen.old is not None:
            out.phase, out.progressing = Phase.HELD, held_progressing(record, out.workload)
            return out
        out.phase, out.intent = Phase.FOLLOW, True  # the back-off passed: try again
        again = {k: v for k, v in _dump(record).items() if k != "heldUntil"}
        out.record = dict(again, startedAt=iso(now), deadline=iso(now + deadline_s), reason=REASON)
        return out
    if now < parse_time(record.deadline or record.started_at):
        out.phase = Phase.RECREATE if record.fallback else Phase.FOLLOW
        return out
    return _at_deadline(record, out, seen, policy, deadline_s, blocked, now, startup_s)


def _record(
    mode: SpecMode, old: int, new: int, generation: int, now: float, deadline_s: float
) -> dict[str, Any]:
    return {
        "kind": str(SwitchKind.NODES_CHANGE),
        "target": str(mode.status),
        "previous": str(mode.status),
        "reason": REASON,
        "fromNodes": old,
        "toNodes": new,
        "generation": generation,
        "startedAt": iso(now),
        "deadline": iso(now + deadline_s),
    }


def _dump(record: SwitchInProgress) -> dict[str, Any]:
    return record.model_dump(by_alias=True, exclude_none=True, mode="json")


def _respec(
    record: SwitchInProgress,
    out: NodesStep,
    seen: Seen,
    mode: SpecMode,
    nodes: int,
    generation: int,
    now: float,
    deadline_s: float,
) -> NodesStep:
    """The spec changed under the record: back to the old nodes (the record ends: what runs
    is what the spec asks), or a new generation of the change (tried at once, afresh)."""
    if seen.old is None or seen.new_ready or nodes == record.from_nodes:
        out.record = None
        return out
    out.phase, out.intent = Phase.FOLLOW, True
    out.record = _record(mode, seen.old_nodes, nodes, generation, now, deadline_s)
    return out


def _completed(record: SwitchInProgress, out: NodesStep, now: float) -> NodesStep:
    out.record = None
    started = parse_time(record.started_at)
    message = (
        f"resources.nodes {record.from_nodes} -> {record.to_nodes}: {out.workload} Ready after "
        f"{now - started:.0f}s"
    )
    if record.fallback_at:
        down = now - parse_time(record.fallback_at)
        message += f"; fell back to Recreate: {down:.0f}s without a serving engine (measured)"
        out.entry = ("SwitchCompleted", message)
    out.events.append(("Normal", "SwitchCompleted", message))
    return out


def _at_deadline(
    record: SwitchInProgress,
    out: NodesStep,
    seen: Seen,
    policy: AutoSpeculation,
    deadline_s: float,
    blocked: Blocked | None,
    now: float,
    startup_s: float,
) -> NodesStep:
    what = f"resources.nodes {record.from_nodes} -> {record.to_nodes}"
    cause = cause_text(blocked)
    if record.fallback is not None or seen.old is None:
        waited = now - parse_time(record.fallback_at or record.started_at)
        message = f"{what}: {out.workload} not Ready within {waited:.0f}s ({cause})"
        out.record, out.entry = None, (str(Reason.SWITCH_FAILED), message)
        out.intent = True
        out.events.append(("Warning", str(Reason.SWITCH_FAILED), message))
        out.progressing = ("False", str(Reason.SWITCH_FAILED), message)
        return out
    waited = now - parse_time(record.started_at)
    scarce = blocked is not None and blocked.scarce
    if scarce and policy.blocked_switch_fallback == BlockedSwitchFallback.RECREATE:
        message = (
            f"{what}: waited {waited:.0f}s, retried as Recreate ({seen.old[0]} "
            f"{seen.old[1]} deleted first), modelled downtime {startup_s:.0f}s ({cause})"
        )
        out.phase, out.intent = Phase.RECREATE, True
        out.record = dict(
            _dump(record), fallback="Recreate", fallbackAt=iso(now), deadline=iso(now + deadline_s)
        )
        out.entry = (str(Reason.SWITCH_FELL_BACK), message)
        out.events.append(("Warning", str(Reason.SWITCH_FELL_BACK), message))
        return out
    attempts = (record.attempts or 0) + 1
    until = now + backoff_s(attempts, deadline_s)
    reason = str(Reason.SWITCH_BLOCKED if scarce else Reason.SWITCH_FAILED)
    message = (
        f"{what} cancelled after {waited:.0f}s ({seen.old[0]} {seen.old[1]} keeps serving; "
        f"retried at {iso(until)} or on a new spec generation): {out.workload} {cause}"
    )
    # Recorded before the new workload is deleted (its pods, and the cause, go with it).
    out.phase, out.intent = Phase.HELD, True
    out.record = dict(_dump(record), heldUntil=iso(until), attempts=attempts, reason=reason)
    out.entry = (reason, message)
    out.events.append(("Warning", reason, message))
    out.progressing = ("False", reason, message)
    return out


def held_progressing(record: SwitchInProgress, workload: str) -> tuple[str, str, str]:
    """Progressing while a cancelled change waits out its back-off."""
    return (
        "False",
        record.reason,
        f"resources.nodes {record.from_nodes} -> {record.to_nodes}: {workload} was not placed by "
        f"its deadline; the old workload keeps serving until {record.held_until} or a new spec "
        "generation",
    )
