"""What the operator keeps of the objects it reads from the Kubernetes API (pure): every string
interned, children slimmed to what a reconcile pass reads, autoscalers reduced to their targets.
"""

from __future__ import annotations

from sys import intern
from typing import Any

from specserver_operator.core.drift import DIGEST_KEY, SCALED_KINDS, owned_digest

#: (kind, name, target kind, target name) of an HPA or a KEDA ScaledObject.
AutoscalerRef = tuple[str, str, str, str]


def compact(value: Any) -> Any:
    """A copy of a JSON value with every string (key or value) interned: a thousand cached
    SpecServers repeat the same keys, reasons and messages, and keep one copy of each.

    Iterative (an explicit stack), so an object nested deeper than the interpreter's recursion
    limit is copied like any other instead of failing every cycle (issue 25)."""
    if not isinstance(value, dict | list):
        return intern(value) if type(value) is str else value
    top: Any = {} if isinstance(value, dict) else [None] * len(value)
    stack: list[tuple[Any, Any]] = [(value, top)]  # (a container, its copy being filled)
    while stack:
        source, copy = stack.pop()
        pairs = source.items() if isinstance(source, dict) else enumerate(source)
        for key, child in pairs:
            if type(key) is str:
                key = intern(key)
            if type(child) is str:
                copy[key] = intern(child)
            elif isinstance(child, dict):
                copy[key] = {}
                stack.append((child, copy[key]))
            elif isinstance(child, list):
                copy[key] = [None] * len(child)
                stack.append((child, copy[key]))
            else:
                copy[key] = child
    return top


#: The only annotations of a SpecServer a pass reads (autopilot.PAUSE_ANNOTATION and any later
#: one of ours): kubectl's last-applied-configuration (a copy of the whole spec, up to 256 KiB)
#: and kopf's bookkeeping are not kept.
READ_ANNOTATIONS = "specserver.io/"
KOPF_NOTES = ("last-handled-configuration", "kopf.zalando.org/touch-dummy")


def slim_specserver(obj: dict[str, Any]) -> dict[str, Any]:
    """What a pass reads of a SpecServer: everything but managedFields and the annotations of
    other tools (per-object memory is what the model needs, not the raw body)."""
    meta = {k: v for k, v in obj["metadata"].items() if k != "managedFields"}
    notes = meta.get("annotations") or {}
    meta["annotations"] = {
        k: v
        for k, v in notes.items()
        if k.startswith(READ_ANNOTATIONS) and not k.endswith(KOPF_NOTES)
    }
    return {**obj, "metadata": meta}


def slim(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    """What a reconcile pass reads of a child: metadata (no managedFields), replicas and
    selector, status, and a digest of the fields the operator owns in the pod template."""
    meta = {k: v for k, v in obj["metadata"].items() if k != "managedFields"}
    spec = obj.get("spec") or {}
    keep = ("replicas", "selector") if kind in SCALED_KINDS else ("selector",)
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


def slim_pod(pod: dict[str, Any]) -> dict[str, Any]:
    """What blocked.py reads of an engine pod: name, labels, deletion, scheduling gates,
    conditions and container states."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    st = pod.get("status") or {}
    return {
        "metadata": {k: meta[k] for k in ("name", "labels", "deletionTimestamp") if k in meta},
        "spec": {"schedulingGates": spec.get("schedulingGates") or []},
        "status": {
            k: st[k]
            for k in ("phase", "conditions", "initContainerStatuses", "containerStatuses")
            if k in st
        },
    }


def slim_event(event: dict[str, Any]) -> dict[str, Any]:
    """What blocked.py reads of an event: reason, message, what it is about and when."""
    keep = ("reason", "message", "type", "involvedObject", "lastTimestamp", "eventTime")
    return {k: event[k] for k in keep if k in event}
