"""The SpecServer status as the typed model, and the merge patch that writes it (pure).

``typed_status`` builds ``models.SpecServerStatus`` from the stored status and the fields a pass
decided; ``status_patch`` serialises it as the CRD expects (camelCase, no nulls) and returns the
merge patch from what is stored: changed fields, and null for a field the model no longer holds
(a finished switch, a metric that went away, a field the schema does not know). The stored
``policyState`` is not parsed here: the pass's fields carry the one the policy wrote, or the
caller hands over the one it read (``read_policy``: observe.py's, parsed once per snapshot); a
previous version's JSON-string form is so rewritten structured. Used by the pure core
(desired.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from specserver_advisor.models import SpecServerStatus
from specserver_advisor.policy.model import PolicyState
from specserver_operator.core import policystate
from specserver_operator.core.passcache import PassCache
from specserver_operator.core.status import status_changes

#: Fields a stored status may hold in a form the model refuses; dropped (and so rewritten).
_MAX_DROPS = 8


ReadPolicy = Callable[[], PolicyState | None]


def readable(current: dict[str, Any], read_policy: ReadPolicy | None) -> dict[str, Any]:
    """The stored status, as far as the model can read it (unreadable fields left out), with
    the policy state ``read_policy`` returns (None: the caller writes its own)."""
    out = {k: v for k, v in current.items() if v is not None}
    if "policyState" in out:
        record = policystate.to_status(read_policy()) if read_policy else None
        if record is None:
            out.pop("policyState")
        else:
            out["policyState"] = record
    for _ in range(_MAX_DROPS):
        try:
            SpecServerStatus.model_validate(out)
            return out
        except ValidationError as exc:
            bad = {str(err["loc"][0]) for err in exc.errors() if err["loc"]}
            if not bad & set(out):
                break
            for key in bad:
                out.pop(key, None)
    return {}


def typed_status(
    current: dict[str, Any], fields: dict[str, Any], read_policy: ReadPolicy
) -> SpecServerStatus:
    """The status to show: the stored one with ``fields`` (a None value clears a field).
    ``read_policy``: the stored policy state, parsed (asked only when ``fields`` has none)."""
    merged = {**readable(current, None if "policyState" in fields else read_policy), **fields}
    return SpecServerStatus.model_validate({k: v for k, v in merged.items() if v is not None})


def status_plan(
    current: dict[str, Any],
    fields: dict[str, Any],
    uid: str,
    version: str | None,
    memo: PassCache,
    read_policy: ReadPolicy,
) -> tuple[SpecServerStatus, dict[str, Any]]:
    """The typed status and its merge patch. A stored status (at ``version``) already found
    canonical, whose fields all match ``fields``, is not merged, serialised and compared again:
    it is read as it is (the memo keeps its version, not the model: ~15 KB a SpecServer)."""
    if version and memo.statuses.get(uid) == version and not status_changes(current, fields):
        try:
            return SpecServerStatus.model_validate(current), {}
        except ValidationError:
            pass  # not canonical after all: build it
    status = typed_status(current, fields, read_policy)
    patch = status_patch(current, status)
    if version and not patch:
        memo.statuses[uid] = version
    return status, patch


def serialized(status: SpecServerStatus) -> dict[str, Any]:
    """``status`` as the API stores it."""
    out = status.model_dump(mode="json", by_alias=True, exclude_none=True)
    if not out.get("decisions"):
        out.pop("decisions", None)  # no ledger until the first decision
    return out


def status_patch(current: dict[str, Any], status: SpecServerStatus) -> dict[str, Any]:
    """The merge patch that turns the stored ``current`` into ``status`` (empty: write nothing)."""
    want = serialized(status)
    patch = status_changes(current, want)
    patch.update({k: None for k, v in current.items() if k not in want and v is not None})
    return patch
