"""A switch's deadline and what happens at it (pure): cancel, fall back to Recreate, or fail.

Every switch (an Auto speculation switch, or a ``resources.nodes`` change between one node and
several) has a deadline in ``status.switch.deadline``, fixed when it starts from
``switchcost.switch_deadline_s``. While the new engine is not Ready the switch is followed; at
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

Called by autopilot.py (speculation switches) and nodeschange.py (``resources.nodes``).
"""

from __future__ import annotations

import datetime
from enum import StrEnum

from specserver_advisor.models import AutoSpeculation, SwitchInProgress, SwitchStrategy
from specserver_advisor.policy.model import ON, PolicyContext, PolicyState, SpecMode
from specserver_advisor.policy.switchcost import restart_seconds
from specserver_operator.core.blocked import Blocked

RECREATE = "Recreate"
HOUR_S = 3600.0


class Outcome(StrEnum):
    """What a switch past its deadline comes to."""

    FALL_BACK = "SwitchFellBack"
    BLOCKED = "SwitchBlocked"
    FAILED = "SwitchFailed"


def parse_time(text: str) -> float:
    return (
        datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")
        .replace(tzinfo=datetime.UTC)
        .timestamp()
    )


def iso(ts: float) -> str:
    return datetime.datetime.fromtimestamp(ts, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- the advisor's policy part (advisor43): stand-ins until it merges ------------------------


def deadline_s(policy: AutoSpeculation, ctx: PolicyContext | None) -> float:
    """Seconds a switch waits for its new engine (``switchcost.switch_deadline_s``)."""
    del ctx
    return float(policy.switch_timeout_seconds)


def fallback_allowed(policy: AutoSpeculation) -> bool:
    """``blockedSwitchFallback: Recreate``."""
    return str(getattr(policy, "blocked_switch_fallback", "Cancel")) == RECREATE


def modelled_downtime_s(ctx: PolicyContext | None) -> float:
    """The downtime a Recreate fallback is modelled to take: the new engine's start-up."""
    extra = ctx.restart_extra_s if ctx is not None else 0.0
    return restart_seconds(0.0) + max(0.0, extra)


def record_blocked(
    stored: PolicyState | None,
    running: SpecMode | None,
    target: SpecMode,
    now: float,
    policy: AutoSpeculation,
    ctx: PolicyContext,
) -> PolicyState:
    """The policy state after a blocked switch was cancelled (``autocycle.record_blocked``)."""
    del target, policy, ctx
    state = stored.copied() if stored is not None else PolicyState(mode=running or ON)
    state.mode = running or state.mode
    state.mode_since = now
    return state


# ---------------------------------------------------------------------------------------------


def deadline_of(switch: SwitchInProgress, default_s: float) -> float:
    """The switch's deadline (a record from before deadlines were written: start + default)."""
    if switch.deadline:
        return parse_time(switch.deadline)
    return parse_time(switch.started_at) + default_s


def budget_allows(stored: PolicyState | None, now: float, policy: AutoSpeculation) -> bool:
    """Whether the hourly switch budget has room for one more switch (the fallback's)."""
    times = stored.switch_times if stored is not None else []
    return sum(1 for t in times if now - t < HOUR_S) < policy.max_switches_per_hour


def old_keeps_serving(policy: AutoSpeculation) -> bool:
    """The strategy starts the new engine beside the old one (so freeing the old one's GPUs
    first is a different switch): BlueGreen, and RollingUpdate with a surge."""
    if policy.switch_strategy == SwitchStrategy.BLUE_GREEN:
        return True
    return policy.switch_strategy == SwitchStrategy.ROLLING_UPDATE and bool(policy.max_surge)


def at_deadline(
    switch: SwitchInProgress,
    blocked: Blocked | None,
    policy: AutoSpeculation,
    budget: bool,
    keeps_serving: bool,
) -> Outcome:
    """What the switch comes to past its deadline (see the module docstring). ``budget``:
    the hourly switch budget has room; ``keeps_serving``: the old engine still serves beside
    the new one (freeing its GPUs first is possible)."""
    if switch.fallback is not None:
        return Outcome.FAILED  # the fallback itself was not Ready by its deadline
    if blocked is None or not blocked.scarce:
        return Outcome.FAILED
    if keeps_serving and budget and fallback_allowed(policy):
        return Outcome.FALL_BACK
    return Outcome.BLOCKED


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
