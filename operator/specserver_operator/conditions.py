"""SpecServer status conditions and the one rule for updating them (pure).

Condition types (``status.conditions``, a list keyed by ``type``):

- ``Ready``: True when the engine Deployment has all replicas ready; False while it starts or
  when the spec is invalid; Unknown before the first reconcile.
- ``ConfigValid``: True when the advisor finds nothing that stops SGLang from starting; False
  with the advisor's rule code as reason (e.g. SPEC002); Unknown when a model config could not
  be read (the reason says which).
- ``Progressing``: True while the engine rolls out a new template; False when it is done.
- ``SpeculationActive``: True when the engine runs with speculative flags; False otherwise.
- ``MetricsAvailable`` (mode Auto): True when fresh signals were read; False (reason
  NoPrometheusURL, PrometheusUnavailable, NoSeries or Stale) when the policy holds the mode
  for lack of them.
- ``AutoscalerPresent``: True when an HPA or KEDA ScaledObject targets the engine Deployment
  (they coexist, but replica changes and speculation switches interact; the message says how).
"""

from __future__ import annotations

from typing import Any

READY = "Ready"
CONFIG_VALID = "ConfigValid"
PROGRESSING = "Progressing"
SPECULATION_ACTIVE = "SpeculationActive"
METRICS_AVAILABLE = "MetricsAvailable"
AUTOSCALER_PRESENT = "AutoscalerPresent"
TYPES = (
    READY,
    CONFIG_VALID,
    PROGRESSING,
    SPECULATION_ACTIVE,
    METRICS_AVAILABLE,
    AUTOSCALER_PRESENT,
)
#: Written on the first visit; MetricsAvailable only exists in mode Auto.
INITIAL_TYPES = TYPES[:4]


def condition(
    type_: str, status: str, reason: str, message: str, generation: int | None, now: str
) -> dict[str, Any]:
    """A condition dict in the API's camelCase."""
    return {
        "type": type_,
        "status": status,
        "reason": reason or "Unknown",
        "message": message or reason or "-",
        "observedGeneration": generation,
        "lastTransitionTime": now,
    }


def set_condition(
    conditions: list[dict[str, Any]], new: dict[str, Any], now: str
) -> list[dict[str, Any]]:
    """Replace the condition of ``new['type']``; ``lastTransitionTime`` moves only on a flip.

    Returns a new list (input untouched), in the order of ``TYPES`` then any others.
    """
    out = [dict(c) for c in conditions if c.get("type") != new["type"]]
    old = next((c for c in conditions if c.get("type") == new["type"]), None)
    merged = dict(new)
    if old is not None and old.get("status") == new["status"]:
        merged["lastTransitionTime"] = old.get("lastTransitionTime", now)
    else:
        merged["lastTransitionTime"] = now
    out.append(merged)
    order = {t: i for i, t in enumerate(TYPES)}
    return sorted(out, key=lambda c: order.get(c["type"], len(TYPES)))


def initial_conditions(generation: int | None, now: str) -> list[dict[str, Any]]:
    """All types as Unknown, for the first visit."""
    return [
        condition(t, "Unknown", "Reconciling", "first reconcile", generation, now)
        for t in INITIAL_TYPES
    ]


def get_condition(conditions: list[dict[str, Any]], type_: str) -> dict[str, Any] | None:
    """The condition of a type, if present."""
    return next((c for c in conditions if c.get("type") == type_), None)
