"""Status only the operator writes: ``status.switch`` and ``status.policyState`` (pure).

Anyone with ``specservers/status`` rights (a tenant usually has them) can write any status
field. Two of them steer the engine: a ``switch`` is carried out (the engine restarts in the
target mode, outside the switch budget and dwell the policy keeps), and ``policyState`` holds
the mode, the switch times the budget counts and the dwell clock. So the operator keeps its own
record of what it last wrote there (``PassCache.own_status``, set from the API's answer to each
of its status writes) and decides from that record, not from what is stored; a stored value
that differs from the record was written by someone else and is written back
(``restore``, with a ``StatusRestored`` warning event). Called by controller.reconcile (before
the pure core decides) and applychildren (after each status write).

The record starts from what is stored when this process first sees the SpecServer (start-up,
or taking over the lead): a value forged while no operator was watching is trusted once
(docs/security.md, residual risks).
"""

from __future__ import annotations

import copy
from typing import Any

#: Status fields that steer the engine and that only the operator may change.
GUARDED = ("switch", "policyState")
REASON = "StatusRestored"


def guarded(status: dict[str, Any] | None) -> dict[str, Any]:
    """The guarded fields of ``status`` (None where absent; the values themselves, not copies:
    stored objects are never changed in place, so the record shares the cache's)."""
    status = status or {}
    return {f: status.get(f) for f in GUARDED}


def seen(record: dict[str, Any] | None, stored: dict[str, Any]) -> dict[str, Any]:
    """The record for a pass over ``stored``: what is stored when there is none yet (first
    sight); else the record, sharing the stored values equal to it (one copy in memory)."""
    if record is None:
        return guarded(stored)
    out = dict(record)
    for f in GUARDED:
        value = stored.get(f)
        if out.get(f) is not value and out.get(f) == value:
            out[f] = value
    return out


def trusted(
    stored: dict[str, Any], record: dict[str, Any] | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The status to decide from (``stored`` with the record's guarded fields) and the merge
    patch that writes the record back over what someone else stored (empty: nothing forged)."""
    if record is None:
        return stored, {}
    restore = {f: record.get(f) for f in GUARDED if stored.get(f) != record.get(f)}
    if not restore:
        return stored, {}
    status = {k: v for k, v in {**stored, **restore}.items() if v is not None}
    return status, restore


def after_write(
    record: dict[str, Any] | None, patch: dict[str, Any], answer: Any
) -> dict[str, Any]:
    """The record after the operator's status write ``patch``: the guarded fields of the API's
    answer (what is stored now, defaults included), else ``patch`` merged into the record."""
    if isinstance(answer, dict) and isinstance(answer.get("status"), dict):
        return guarded(answer["status"])
    out = copy.deepcopy(record) if record is not None else guarded({})
    for f in GUARDED:
        if f in patch:
            out[f] = _merged(out.get(f), patch[f])
    return out


def _merged(target: Any, patch: Any) -> Any:
    """RFC 7386 merge of ``patch`` into ``target``."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merged(out.get(key), value)
    return out


def forged_message(restore: dict[str, Any]) -> str:
    """The event saying which fields were written back."""
    fields = ", ".join(f"status.{f}" for f in sorted(restore))
    return (
        f"{fields} changed by someone other than the operator; ignored and restored (only the "
        "operator starts switches and keeps the policy state)"
    )
