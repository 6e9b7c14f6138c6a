"""What the operator keeps of the objects it reads from the Kubernetes API (pure): every string
interned, children slimmed to what a reconcile pass reads, autoscalers reduced to their targets.
"""

from __future__ import annotations

from sys import intern
from typing import Any

from specserver_operator.drift import DIGEST_KEY, owned_digest

#: (kind, name, target kind, target name) of an HPA or a KEDA ScaledObject.
AutoscalerRef = tuple[str, str, str, str]


def compact(value: Any) -> Any:
    """A copy of a JSON value with every string (key or value) interned: a thousand cached
    SpecServers repeat the same keys, reasons and messages, and keep one copy of each."""
    if isinstance(value, dict):
        return {intern(k) if type(k) is str else k: compact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [compact(v) for v in value]
    return intern(value) if type(value) is str else value


def slim(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    """What a reconcile pass reads of a child: metadata (no managedFields), replicas and
    selector, status, and a digest of the fields the operator owns in the pod template."""
    meta = {k: v for k, v in obj["metadata"].items() if k != "managedFields"}
    spec = obj.get("spec") or {}
    keep = ("replicas", "selector") if kind == "Deployment" else ("selector",)
    return {
        "kind": kind,
        "metadata": meta,
        "spec": {k: spec[k] for k in keep if k in spec},
        "status": obj.get("status") or {},
        DIGEST_KEY: owned_digest(kind, obj),  # what drift repair compares (drift.py)
    }


def autoscaler_ref(kind: str, item: dict[str, Any], default_target: str = "") -> AutoscalerRef:
    """An autoscaler (``kind``) as (kind, name, target kind, target name); a target without a
    kind is a ``default_target`` (KEDA scales a Deployment unless told otherwise)."""
    target = (item.get("spec") or {}).get("scaleTargetRef") or {}
    return (
        kind,
        str(item["metadata"]["name"]),
        str(target.get("kind", default_target)),
        str(target.get("name", "")),
    )
