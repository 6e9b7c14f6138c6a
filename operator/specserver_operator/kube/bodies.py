"""What the operator sends to the Kubernetes API (pure): the bodies of its writes (apply, Lease,
Secret, webhook caBundle, Event); the content hashes they carry are ``hashes``."""

from __future__ import annotations

import base64
import json
from typing import Any

from specserver_advisor.models import GROUP, KIND, VERSION
from specserver_operator.core.hashes import HASH_ANNOTATION

LEASE_TYPE = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease"}
#: Longest Event message sent (the API server refuses longer ones).
EVENT_MESSAGE_MAX = 1000


def apply_body(obj: dict[str, Any], desired_hash: str) -> dict[str, Any]:
    """A copy of ``obj`` stamped with its content hash, to server-side apply."""
    body: dict[str, Any] = json.loads(json.dumps(obj))
    body["metadata"].setdefault("annotations", {})[HASH_ANNOTATION] = desired_hash
    return body


def lease_body(lease: dict[str, Any]) -> dict[str, Any]:
    """A Lease (metadata and spec as leader.py builds them) with its apiVersion and kind."""
    return {**LEASE_TYPE, **lease}


def tls_secret(
    namespace: str, name: str, data: dict[str, str], labels: dict[str, str]
) -> dict[str, Any]:
    """A ``kubernetes.io/tls`` Secret holding ``data`` (values base64-encoded)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "type": "kubernetes.io/tls",
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    }


def decoded_secret_data(secret: dict[str, Any]) -> dict[str, str]:
    """A Secret's data, base64-decoded."""
    return {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}


def ca_bundle_patch(configuration: dict[str, Any], ca_pem: str) -> dict[str, Any] | None:
    """The merge patch that sets every webhook's caBundle of a ValidatingWebhookConfiguration
    to ``ca_pem`` (carrying the resourceVersion read), or None when all already have it."""
    bundle = base64.b64encode(ca_pem.encode()).decode()
    hooks = [dict(h) for h in configuration.get("webhooks") or []]
    if all((h.get("clientConfig") or {}).get("caBundle") == bundle for h in hooks):
        return None
    for hook in hooks:
        hook["clientConfig"] = {**(hook.get("clientConfig") or {}), "caBundle": bundle}
    return {
        "metadata": {"resourceVersion": configuration["metadata"]["resourceVersion"]},
        "webhooks": hooks,
    }


def event(
    involved: dict[str, Any], type_: str, reason: str, message: str, now: str
) -> dict[str, Any]:
    """A core/v1 Event about the SpecServer ``involved``."""
    meta = involved["metadata"]
    return {
        "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
        "involvedObject": {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": KIND,
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta.get("uid"),
        },
        "type": type_,
        "reason": reason,
        "message": message[:EVENT_MESSAGE_MAX],
        "source": {"component": "specserver-operator"},
        "reportingComponent": "specserver-operator",
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
