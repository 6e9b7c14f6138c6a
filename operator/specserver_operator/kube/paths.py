"""Where things are on the Kubernetes API (pure): REST paths of the kinds the operator uses,
with every name checked before it becomes part of a path, and request URLs."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote, urlencode

from specserver_advisor.models import GROUP, KIND, PLURAL, VERSION
from specserver_operator.core import kinds
from specserver_operator.kube.errors import InvalidNameError

SPECSERVERS = f"/apis/{GROUP}/{VERSION}"
PATHS = {
    **{k.kind: (k.base_path, k.plural) for k in kinds.KINDS.values()},  # the workload kinds
    "Service": ("/api/v1", "services"),
    "ConfigMap": ("/api/v1", "configmaps"),
    "Secret": ("/api/v1", "secrets"),
    "Event": ("/api/v1", "events"),
    "Pod": ("/api/v1", "pods"),
    "Lease": ("/apis/coordination.k8s.io/v1", "leases"),
    "HorizontalPodAutoscaler": ("/apis/autoscaling/v1", "horizontalpodautoscalers"),
    "ScaledObject": ("/apis/keda.sh/v1alpha1", "scaledobjects"),
    KIND: (SPECSERVERS, PLURAL),
}
SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
WEBHOOK_CONFIGURATIONS = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"

#: DNS-1123 subdomain (object names) and label (namespaces); both at most 253/63 characters.
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _segment(value: str, label: bool, what: str) -> str:
    """``value`` path-encoded, after checking it is a name Kubernetes allows."""
    pattern, most = (_LABEL, 63) if label else (_SUBDOMAIN, 253)
    if not value or len(value) > most or not pattern.match(value):
        raise InvalidNameError(f"{what} {value[:80]!r} is not a valid Kubernetes name")
    return quote(value, safe="")


def object_path(kind: str, namespace: str | None, name: str | None = None) -> str:
    """The REST path of a kind's collection (all namespaces when None) or of one object.

    Names are checked (DNS-1123) and encoded with no safe characters, so a name such as
    ``../../victim/secrets/x`` raises InvalidNameError instead of reaching another path.
    """
    base, plural = PATHS[kind]
    if namespace is None:
        path = f"{base}/{plural}"
    else:
        path = f"{base}/namespaces/{_segment(namespace, True, 'namespace')}/{plural}"
    return f"{path}/{_segment(name, False, kind + ' name')}" if name is not None else path


def webhook_configuration_path(name: str) -> str:
    """The REST path of a ValidatingWebhookConfiguration (cluster-scoped)."""
    return f"{WEBHOOK_CONFIGURATIONS}/{quote(name)}"


def request_url(server: str, path: str, params: dict[str, Any] | None = None) -> str:
    """The URL of ``path`` on ``server`` with the query ``params`` that are not None."""
    url = server + path
    if params:
        url += "?" + urlencode({k: v for k, v in params.items() if v is not None})
    return url


def scopes(namespaces: list[str]) -> list[str | None]:
    """The namespaces to list, or None for the whole cluster."""
    return [*namespaces] if namespaces else [None]
