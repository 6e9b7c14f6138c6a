"""A switch's deadline and what happens at it (pure): cancel, fall back to Recreate, or fail.

Every switch (an Auto speculation switch, or a ``resources.nodes`` change between one node and
several) has a deadline in ``status.switch.deadline``, fixed when it starts from
``switchcost.switch_deadline_s`` (``switchTimeoutSeconds``, or derived from the modelled
start-up). While the new engine is not Ready the switch is followed; at
the deadline ``at_deadline`` chooses:

- ``FALL_BACK``: the new engine is blocked for want of GPUs (``Blocked.scarce``: the scheduler
  found no node, the quota refused its pods, Kueue holds it), the spec allows
  ``blockedSwitchFallback: Recreate``, the strategy kept the old engine serving (so freeing its
  GPUs can help) and the hourly switch budget has room: the switch is retried freeing the old
  engine's GPUs first (``status.switch.fallback``/``fallbackAt``, a second deadline), with the
  downtime of a Recreate;
- ``BLOCKED``: a scarcity cause and no fallback: cancelled, the old engine keeps serving
  (ledger ``SwitchBlocked`` with the cause and the seconds waited; Auto backs off);
- ``FAILED``: no cause known, a cause that is not scarcity (an image pull, a crash loop), or a
  fallback that is not Ready by its own deadline: rolled back (``SwitchFailed``).

Called by autopilot.py (speculation switches); nodeschange.py (``resources.nodes``) shares its
times and cause text and keeps its own rule (no switch budget: a spec change is the tenant's).
"""

from __future__ import annotations

import datetime
from enum import StrEnum

from specserver_advisor.models import AutoSpeculation, SwitchInProgress
from specserver_advisor.policy.model import PolicyState, Reason
from specserver_advisor.policy.switchcost import recreate_fallback_allowed, switch_keeps_serving
from specserver_operator.core.blocked import Blocked

RECREATE = "Recreate"


class DeadlineEnd(StrEnum):
    """What a switch past its deadline comes to (the ledger's reasons)."""

    FALL_BACK = Reason.SWITCH_FELL_BACK.value
    BLOCKED = Reason.SWITCH_BLOCKED.value
    FAILED = Reason.SWITCH_FAILED.value


def parse_time(text: str) -> float:
    return (
        datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")
        .replace(tzinfo=datetime.UTC)
        .timestamp()
    )


def iso(ts: float) -> str:
    return datetime.datetime.fromtimestamp(ts, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def deadline_of(switch: SwitchInProgress, default_s: float) -> float:
    """The switch's deadline (a record from before deadlines were written: start + default)."""
    if switch.deadline:
        return parse_time(switch.deadline)
    return parse_time(switch.started_at) + default_s


def at_deadline(
    switch: SwitchInProgress,
    blocked: Blocked | None,
    policy: AutoSpeculation,
    state: PolicyState,
    now: float,
) -> DeadlineEnd:
    """What the switch comes to past its deadline (see the module docstring); ``state``: the
    policy state whose ``switch_times`` the hourly budget counts."""
    if switch.fallback is not None:
        return DeadlineEnd.FAILED  # the fallback itself was not Ready by its deadline
    if blocked is None or not blocked.scarce:
        return DeadlineEnd.FAILED
    if switch_keeps_serving(policy) and recreate_fallback_allowed(policy, state, now):
        return DeadlineEnd.FALL_BACK
    return DeadlineEnd.BLOCKED


def cause_text(blocked: Blocked | None) -> str:
    """The cause in the scheduler's (or the quota's, or Kueue's) own words, for a message."""
    if blocked is None:
        return "no cause reported"
    return f"{blocked.reason}: {blocked.message}"


def fallen_back(switch: SwitchInProgress, now: float, deadline: float) -> dict[str, object]:
    """``status.switch`` once it falls back to Recreate at ``now`` (a second deadline)."""
    record = switch.model_dump(by_alias=True, exclude_none=True, mode="json")
    record.update({"fallback": RECREATE, "fallbackAt": iso(now), "deadline": iso(deadline)})
    return record
