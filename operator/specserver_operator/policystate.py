"""``status.policyState`` as a structured object, and the advisor's JSON form (pure).

The advisor's ``autocycle.evaluate`` (also behind ``specserver-advisor replay``) keeps the policy
state as a JSON string; the CRD stores it as a typed object (``models.AutoPolicyState``, in the
API's camelCase, the mode as On/Off like ``speculationMode``). ``to_advisor`` turns what status
holds into the string the advisor reads, and ``to_status`` turns the advisor's answer back into
the object to store. Both directions are exact, so an evaluation that changes nothing material
returns the same string, converts to the same object, and costs no write.

Objects written by the previous version hold the JSON string itself: ``to_advisor`` reads it as
it is, and the next status write stores the structured form (migration on first visit).
"""

from __future__ import annotations

import functools
import json
import math
from typing import Any

from pydantic import ValidationError

from specserver_advisor.loaders import bounded
from specserver_advisor.models import (
    MAX_POLICY_BANDS,
    MAX_SWITCH_TIMES,
    AutoPolicyState,
    SpeculationState,
)
from specserver_advisor.policy import OFF, ON

#: Conversions remembered (by their input's JSON): a steady evaluation converts nothing again.
CONVERSIONS_KEPT = 1024
#: Containers inside containers of a policy state (bands -> mode -> score is 3).
POLICY_DEPTH = 8
_TO_STATUS_MODE = {ON: SpeculationState.ON, OFF: SpeculationState.OFF}
_TO_ADVISOR_MODE = {SpeculationState.ON: ON, SpeculationState.OFF: OFF}


def _finite(value: Any) -> Any:
    """``value`` with non-finite floats dropped (JSON and the API have no NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [v for v in (_finite(v) for v in value) if v is not None]
    return value


def parse(stored: Any) -> AutoPolicyState | None:
    """The typed state from what status holds: the object, or the previous version's JSON
    string (None when absent or unreadable: the policy then starts afresh)."""
    if not stored:
        return None
    data: Any = stored
    if isinstance(stored, str):
        try:  # the previous version's string (or a tenant's): bounded, never a RecursionError
            data = bounded.json_value(stored, "status.policyState", max_depth=POLICY_DEPTH)
        except bounded.InputLimitError:
            return None
    if not isinstance(data, dict):
        return None
    fields = AutoPolicyState.model_fields
    known = {}
    for key, value in data.items():
        name = key if key in fields else _snake(key)
        if name in fields:
            known[name] = _finite(value)
    if isinstance(known.get("bands"), dict):
        known["bands"] = _newest(_bands(known["bands"], {"n": "samples"}))
    if isinstance(known.get("switch_times"), list):
        known["switch_times"] = known["switch_times"][-MAX_SWITCH_TIMES:]
    mode = known.get("mode")
    if isinstance(mode, str) and mode.lower() in _TO_STATUS_MODE:
        known["mode"] = _TO_STATUS_MODE[mode.lower()]
    known = {k: v for k, v in known.items() if v is not None}
    try:
        return AutoPolicyState.model_validate(known)
    except ValidationError:
        return None


def mode_of(stored: Any) -> SpeculationState | None:
    """The speculation state the stored policy holds (None: no usable state)."""
    advisor = to_advisor(stored)
    return None if advisor is None else _TO_STATUS_MODE[json.loads(advisor)["mode"]]


def to_advisor(stored: Any) -> str | None:
    """The JSON string ``autocycle.evaluate`` reads (None: no usable state)."""
    if not stored:
        return None
    if isinstance(stored, str):
        return _advisor_json(stored)
    try:
        key = json.dumps(stored, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        return None
    return _advisor_json(key)


@functools.lru_cache(maxsize=CONVERSIONS_KEPT)
def _advisor_json(stored: str) -> str | None:
    state = parse(stored)
    if state is None:
        return None
    data = state.model_dump(mode="json")  # every field, as the advisor writes them
    data["bands"] = _bands(data["bands"], {"samples": "n"})
    if data.get("bands_saved_at") is None:
        data.pop("bands_saved_at", None)  # the advisor's own bookkeeping: absent, never null
    data["mode"] = _TO_ADVISOR_MODE[state.mode]
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def migrated(current: dict[str, Any]) -> dict[str, Any]:
    """The status fields that move a stored status off the previous version's form (empty:
    none). Until they are written the API server refuses any other write of the object."""
    stored = current.get("policyState")
    if stored is None or isinstance(stored, dict):
        return {}
    return {"policyState": to_status(to_advisor(stored))}


def to_status(advisor_json: str | None) -> dict[str, Any] | None:
    """The object to store in ``status.policyState`` for the advisor's JSON string."""
    if not advisor_json:
        return None
    record = _status_json(advisor_json)
    return None if record is None else json.loads(record)


@functools.lru_cache(maxsize=CONVERSIONS_KEPT)
def _status_json(advisor_json: str) -> str | None:
    state = parse(advisor_json)
    if state is None:
        return None
    return json.dumps(state.model_dump(mode="json", by_alias=True, exclude_none=True))


def _bands(bands: dict[str, Any], rename: dict[str, str]) -> dict[str, Any]:
    """Band scores with their keys renamed (the advisor's ``n`` is ``samples`` in status)."""
    return {
        band: {
            mode: {rename.get(k, k): v for k, v in entry.items()}
            if isinstance(entry, dict)
            else entry
            for mode, entry in modes.items()
        }
        if isinstance(modes, dict)
        else modes
        for band, modes in bands.items()
    }


def _newest(bands: dict[str, Any]) -> dict[str, Any]:
    """The ``MAX_POLICY_BANDS`` bands seen most recently (the CRD stores no more)."""
    if len(bands) <= MAX_POLICY_BANDS:
        return bands

    def seen(item: tuple[str, Any]) -> float:
        entries = item[1].values() if isinstance(item[1], dict) else ()
        times = [e.get("at") for e in entries if isinstance(e, dict)]
        return max((t for t in times if isinstance(t, int | float)), default=0.0)

    kept = sorted(bands.items(), key=seen)[-MAX_POLICY_BANDS:]
    return dict(kept)


def _snake(camel: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)
