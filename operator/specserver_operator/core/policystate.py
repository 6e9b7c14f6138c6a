"""``status.policyState``: read into the policy's ``PolicyState`` and written back (pure).

The CRD stores the policy state as a typed object (``models.AutoPolicyState``, in the API's
camelCase, the mode as On/Off like ``speculationMode``, a band's ``n`` as ``samples``). The
operator reads it once per pass, where it reads the SpecServer (``parse``, by observe.py), carries
the advisor's typed ``PolicyState`` through the decision (``autocycle.evaluate``, the call
``specserver-advisor replay`` makes too) and writes it once, when the status fields are built
(``to_status``). Both directions are exact, so an evaluation that changes nothing material
returns the state it was given, which writes the object stored, and costs no write.

Objects written by the previous version hold a JSON string (the advisor's snake_case form):
``parse`` reads it too, and the next status write stores the structured form (migration on
first visit, ``migrated``).
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import ValidationError

from specserver_advisor import bounded
from specserver_advisor.models import (
    MAX_POLICY_BANDS,
    MAX_SWITCH_TIMES,
    AutoPolicyState,
)
from specserver_advisor.policy.model import PolicyState, SpecMode

#: Containers inside containers of a policy state (bands -> mode -> score is 3).
POLICY_DEPTH = 8


def _finite(value: Any) -> Any:
    """``value`` with non-finite floats dropped (JSON and the API have no NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [v for v in (_finite(v) for v in value) if v is not None]
    return value


def parse(stored: Any) -> PolicyState | None:
    """The policy state ``status.policyState`` holds: the object, or the previous version's
    JSON string (None when absent or unreadable: the policy then starts afresh)."""
    record = _validated(stored)
    if record is None:
        return None
    return PolicyState(
        mode=SpecMode.from_status(record.mode),
        mode_since=record.mode_since,
        last_switch=record.last_switch,
        switch_times=list(record.switch_times),
        disable_breaches=record.disable_breaches,
        enable_passes=record.enable_passes,
        queue_growth=record.queue_growth,
        last_queued=record.last_queued,
        last_accept=record.last_accept,
        exploring=record.exploring,
        last_band=record.last_band,
        band_streak=record.band_streak,
        bands={
            band: {
                mode: {"score": e.score, "n": e.samples, "at": e.at}  # type: ignore[dict-item]
                for mode, e in modes.items()
            }
            for band, modes in record.bands.items()
        },
        bands_saved_at=record.bands_saved_at,
        blocked_until=record.blocked_until,
        blocked_attempts=record.blocked_attempts,
        blocked_mode=(
            None if record.blocked_mode is None else SpecMode.from_status(record.blocked_mode)
        ),
    )


def to_status(state: PolicyState | None) -> dict[str, Any] | None:
    """The object to store in ``status.policyState`` for ``state`` (None: none)."""
    if state is None:
        return None
    record = _validated(state.to_json())
    return (
        None if record is None else record.model_dump(mode="json", by_alias=True, exclude_none=True)
    )


def migrated(current: dict[str, Any]) -> dict[str, Any]:
    """The status fields that move a stored status off the previous version's form (empty:
    none). Until they are written the API server refuses any other write of the object."""
    stored = current.get("policyState")
    if stored is None or isinstance(stored, dict):
        return {}
    return {"policyState": to_status(parse(stored))}


def _validated(stored: Any) -> AutoPolicyState | None:
    """The API model of a stored state (either form), or of the advisor's JSON form."""
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
    mode = SpecMode.parse(known.get("mode"))
    if mode is not None:
        known["mode"] = mode.status
    if "blocked_mode" in known:
        blocked = SpecMode.parse(known["blocked_mode"])
        known["blocked_mode"] = None if blocked is None else blocked.status
    known = {k: v for k, v in known.items() if v is not None}
    try:
        return AutoPolicyState.model_validate(known)
    except ValidationError:
        return None


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
