"""What the operator owns in a child, as one comparable digest (pure).

A child is repaired when its live copy differs from the desired one in a field the operator
owns: replicas (unless an HPA or ScaledObject scales it), and each container's image, command,
args, env, resources and probes (the Service: its selector and ports; a LeaderWorkerSet: the
containers of its leader and worker templates, the group size, the restart policy and the
rollout's surge). The applied-hash
annotation alone cannot see a hand edit (``kubectl scale``, ``kubectl patch`` of the args), so
the cache keeps this digest of every child it sees, and the controller compares it with the
digest of the rendered object.

Both sides go through the same projection, which fills in what the API server defaults
(probe timings, requests from limits, an empty env value, quantities in canonical form), so a
child nobody touched compares equal and costs no write.
"""

from __future__ import annotations

import hashlib
import json
import re
from decimal import Decimal, InvalidOperation
from typing import Any

from specserver_operator.core import kinds

#: Key under which the cache's slim copy of a child keeps its digest.
DIGEST_KEY = "ownedDigest"
_SUFFIX: dict[str, Decimal | int] = {
    "": 1, "m": Decimal("0.001"), "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
    "P": 10**15, "E": 10**18, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40,
    "Pi": 2**50, "Ei": 2**60,
}  # fmt: skip
_QUANTITY = re.compile(r"([+-]?[0-9.]+)([eE][-+]?[0-9]+|[a-zA-Z]*)")
PROBE_DEFAULTS = {
    "periodSeconds": 10,
    "timeoutSeconds": 1,
    "successThreshold": 1,
    "failureThreshold": 3,
    "initialDelaySeconds": 0,
}


def quantity(value: Any) -> str:
    """A Kubernetes quantity in one canonical form ("1000m" and "1" are the same)."""
    text = str(value)
    match = _QUANTITY.fullmatch(text)
    if not match:
        return text
    number, suffix = match.groups()
    try:
        if suffix[:1] in ("e", "E") and len(suffix) > 1:
            amount = Decimal(number) * Decimal(10) ** int(suffix[1:])
        elif suffix in _SUFFIX:
            amount = Decimal(number) * Decimal(_SUFFIX[suffix])
        else:
            return text
    except (InvalidOperation, ValueError):
        return text
    return format(amount.normalize(), "f")


def _probe(probe: dict[str, Any] | None) -> dict[str, Any] | None:
    if not probe:
        return None
    out = {**PROBE_DEFAULTS, **{k: v for k, v in probe.items() if k in PROBE_DEFAULTS}}
    for action in ("httpGet", "tcpSocket", "exec", "grpc"):
        if action in probe:
            out[action] = dict(probe[action])
    if "httpGet" in out:
        out["httpGet"].setdefault("scheme", "HTTP")
    return out


def _resources(res: dict[str, Any] | None) -> dict[str, Any]:
    res = res or {}
    limits = {k: quantity(v) for k, v in (res.get("limits") or {}).items()}
    requests = {k: quantity(v) for k, v in (res.get("requests") or {}).items()}
    return {"limits": limits, "requests": {**limits, **requests}}  # requests default to limits


def _env(env: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    out = []
    for item in env or []:
        entry = {"name": item.get("name"), "value": item.get("value") or ""}
        if item.get("valueFrom"):
            entry["valueFrom"] = item["valueFrom"]
        out.append(entry)
    return out


def _container(c: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": c.get("name"),
        "image": c.get("image"),
        "command": c.get("command") or [],
        "args": c.get("args") or [],
        "env": _env(c.get("env")),
        "resources": _resources(c.get("resources")),
        "probes": [_probe(c.get(p)) for p in ("startupProbe", "readinessProbe", "livenessProbe")],
    }


def owned_view(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    """The fields of ``obj`` the operator owns, with API server defaults filled in."""
    spec = obj.get("spec") or {}
    if kind == "Service":
        ports = [
            {
                "name": p.get("name"),
                "port": p.get("port"),
                "targetPort": p.get("targetPort", p.get("port")),
                "protocol": p.get("protocol", "TCP"),
            }
            for p in spec.get("ports") or []
        ]
        return {"selector": spec.get("selector") or {}, "ports": ports}
    return kinds.KINDS.get(kind, kinds.DEPLOYMENT_KIND).owned_view(spec, _pod)


def _pod(pod: dict[str, Any] | None) -> dict[str, Any]:
    pod = pod or {}
    return {  # replicas are compared on their own (an autoscaler may own them)
        "initContainers": [_container(c) for c in pod.get("initContainers") or []],
        "containers": [_container(c) for c in pod.get("containers") or []],
    }


def owned_digest(kind: str, obj: dict[str, Any]) -> str:
    """A short digest of ``owned_view`` (what the cache keeps of a live child)."""
    if DIGEST_KEY in obj:
        return str(obj[DIGEST_KEY])
    text = json.dumps(owned_view(kind, obj), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


#: Kinds whose spec.replicas the operator owns (engine workloads: kinds.py).
SCALED_KINDS = kinds.SCALED_KINDS


def replicas(obj: dict[str, Any] | None) -> int | None:
    """A Deployment's (or LeaderWorkerSet's: groups) spec.replicas (the cache's slim copy
    keeps it)."""
    value = ((obj or {}).get("spec") or {}).get("replicas", 1)
    return value if isinstance(value, int) else None


_OWNED_PARTS = {k.kind: k.owned_parts for k in kinds.KINDS.values()}


def drift(
    kind: str,
    live: dict[str, Any] | None,
    desired: dict[str, Any] | str,
    desired_replicas: int | None,
    autoscaled: bool = False,
) -> str | None:
    """What differs between a live child and the desired one in the fields the operator owns
    (None: nothing). ``desired`` is the rendered object or its ``owned_digest``; replicas are
    left to an autoscaler that targets the child."""
    if live is None:
        return None
    want = desired if isinstance(desired, str) else owned_digest(kind, desired)
    what = []
    if owned_digest(kind, live) != want:
        what.append(_OWNED_PARTS.get(kind, "selector or ports"))
    if kind in SCALED_KINDS and not autoscaled and replicas(live) != desired_replicas:
        what.append(f"replicas {replicas(live)} (want {desired_replicas})")
    return ", ".join(what) or None
