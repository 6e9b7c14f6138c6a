"""Per-SpecServer fault isolation (pure): what one object's failure writes, and when to retry.

The cycle (cycle.py) runs every SpecServer's pass inside ``Faults.guard``-style handling: an
exception raised for one object becomes that object's ``Ready=False`` condition (reason
``ReconcileFailed``, the message naming what failed) and one Warning event, and the object is
retried with exponential backoff while every other SpecServer is reconciled as usual. A new
generation (the tenant fixed the spec) is retried at once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from specserver_operator.core import conditions as cond

#: Seconds before the n-th retry of a failing object (the last one repeats).
BACKOFF_S = (5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 300.0)
REASON = "ReconcileFailed"
#: Longest message kept in a condition or event.
MESSAGE_LIMIT = 600


@dataclass
class Fault:
    """The newest failure of one SpecServer."""

    message: str
    generation: int | None
    failures: int
    retry_at: float


@dataclass
class Faults:
    """Failing SpecServers by uid, owned by the cycle."""

    by_uid: dict[str, Fault] = field(default_factory=dict)

    def due(self, uid: str, generation: int | None, now: float) -> bool:
        """Whether a pass should run now (not failing, backoff over, or a new generation)."""
        fault = self.by_uid.get(uid)
        return fault is None or fault.generation != generation or now >= fault.retry_at

    def record(self, uid: str, generation: int | None, message: str, now: float) -> bool:
        """Note a failure; True when it is new (another message or generation): log it loudly."""
        old = self.by_uid.get(uid)
        new = old is None or old.message != message or old.generation != generation
        failures = 1 if old is None or old.generation != generation else old.failures + 1
        delay = BACKOFF_S[min(failures, len(BACKOFF_S)) - 1]
        self.by_uid[uid] = Fault(message, generation, failures, now + delay)
        return new

    def clear(self, uid: str) -> bool:
        """A pass succeeded; True when the object had been failing."""
        return self.by_uid.pop(uid, None) is not None

    def forget(self, live: set[str]) -> None:
        for uid in [u for u in self.by_uid if u not in live]:
            self.by_uid.pop(uid, None)


def describe(exc: BaseException) -> str:
    """One line saying what failed (no traceback; the log has that once)."""
    text = str(exc).strip().replace("\n", " ")
    if isinstance(exc, KeyError):
        text = f"missing key {text}"
    kind = type(exc).__name__
    return f"{kind}: {text}"[:MESSAGE_LIMIT] if text else kind


def fault_status(
    current: dict[str, Any], generation: int | None, message: str, now: str
) -> dict[str, Any]:
    """The status fields to write for a failed pass (only those that change)."""
    conds = cond.parse(current.get("conditions")) or cond.initial_conditions(generation, now)
    conds = cond.set_condition(
        conds, cond.condition(cond.READY, "False", REASON, message, generation, now), now
    )
    desired: dict[str, Any] = {"conditions": cond.as_api(conds), "observedGeneration": generation}
    return {k: v for k, v in desired.items() if _canonical(current.get(k)) != _canonical(v)}


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)
