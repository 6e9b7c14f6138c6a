"""May the author of a SpecServer name its hfTokenSecretRef? Asked only for the API server.

Called by admission.py for CREATE and for any UPDATE that changes the spec (an
``hfEndpoint`` change could send the token elsewhere), not for metadata-only updates. The
engine pod mounts the Secret, so the requesting user must be allowed to ``get`` it themselves:
the one question asked of the API server is a SubjectAccessReview (the ``ReviewAccess``
callable the webhook passes in), which the operator makes with its own rights. So it is asked
only when the review came from the API server, authenticated by its TLS client certificate
(``Caller``, server.py; the admin's ``SPECSERVER_WEBHOOK_CLIENT_CA``): anyone else who
reaches the webhook port would otherwise learn whether any user may read any Secret. Without a
client CA a SpecServer naming a Secret is refused, saying which setting is missing, unless the
admin opted out (``SPECSERVER_WEBHOOK_TRUST_UNAUTHENTICATED``, docs/security.md: for clusters
whose apiserver cannot present a client certificate, at that risk).

A review that allowed the Secret yields a ``Grant`` only when it came from the API server
(with ``SPECSERVER_WEBHOOK_TRUST_UNAUTHENTICATED`` an unauthenticated review may still be
answered, but it approves no Secret): admission.py records it (``RecordGrant``) only when the
whole verdict is allowed and the request is not a dry run.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

WHERE = "spec.modelSource.hfTokenSecretRef.name"
_TRUE = ("1", "true", "yes")

#: Creates a SubjectAccessReview and returns its ``status`` (``allowed``, ``reason``,
#: ``evaluationError``); the webhook's I/O edge.
ReviewAccess = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Grant:
    """The author seen allowed to get ``secret`` for this object's uid and generation."""

    namespace: str
    name: str
    uid: str
    generation: int
    secret: str
    user: str


#: Records a Grant where the tenant cannot write (engineer C's seam: secretgrants).
RecordGrant = Callable[[str, str, str, int, str, str], None]


@dataclass(frozen=True)
class Caller:
    """Who sent the review: ``authenticated`` when its TLS client certificate is the API
    server's (verified against the admin's client CA); ``who`` says what was seen."""

    authenticated: bool
    who: str


@dataclass(frozen=True)
class AccessSettings:
    """The admin's settings for whom Secret access is checked."""

    client_ca: str | None = None
    trust_unauthenticated: bool = False

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> AccessSettings:
        env = os.environ if env is None else env
        return cls(
            env.get("SPECSERVER_WEBHOOK_CLIENT_CA") or None,
            env.get("SPECSERVER_WEBHOOK_TRUST_UNAUTHENTICATED", "").lower() in _TRUE,
        )


def secret_ref_name(obj: dict[str, Any]) -> str | None:
    """The Secret ``spec.modelSource.hfTokenSecretRef`` names, when it names one."""
    spec = obj.get("spec")
    source = spec.get("modelSource") if isinstance(spec, dict) else None
    ref = source.get("hfTokenSecretRef") if isinstance(source, dict) else None
    name = ref.get("name") if isinstance(ref, dict) else None
    return name if isinstance(name, str) and name else None


def secret_access_review(user: dict[str, Any], namespace: str, secret: str) -> dict[str, Any]:
    """The SubjectAccessReview asking whether ``user`` (AdmissionReview userInfo) may get
    ``namespace/secret``."""
    spec: dict[str, Any] = {
        "user": str(user.get("username") or ""),
        "groups": [str(g) for g in user.get("groups") or []],
        "resourceAttributes": {
            "namespace": namespace,
            "verb": "get",
            "group": "",
            "version": "v1",
            "resource": "secrets",
            "name": secret,
        },
    }
    if user.get("uid"):
        spec["uid"] = str(user["uid"])
    if isinstance(user.get("extra"), dict):
        spec["extra"] = {str(k): [str(v) for v in vs] for k, vs in user["extra"].items()}
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}


def _unauthenticated(caller: Caller, access: AccessSettings) -> str:
    if access.client_ca is None:
        why = (
            "the webhook has no client CA (SPECSERVER_WEBHOOK_CLIENT_CA) to tell the API "
            "server's reviews from anyone else's"
        )
    else:
        why = f"this review did not come from the API server ({caller.who})"
    return (
        f"{WHERE}: Secret access is checked only for reviews from the API server, and {why}; "
        "the engine pod would receive the Secret as HF_TOKEN"
    )


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def secret_check(
    request: dict[str, Any],
    review_access: ReviewAccess,
    caller: Caller,
    access: AccessSettings,
) -> tuple[str | None, Grant | None]:
    """(why the requesting user may not name this hfTokenSecretRef (None: may), the Grant to
    record when a SubjectAccessReview allowed it)."""
    obj = request.get("object") or {}
    secret = secret_ref_name(obj)
    if secret is None:
        return None, None
    old = request.get("oldObject")
    if (
        request.get("operation") == "UPDATE"
        and isinstance(old, dict)
        and old.get("spec") == obj.get("spec")
    ):
        return None, None  # metadata only (finalizers, labels): nothing new reaches the pod
    if not (caller.authenticated or access.trust_unauthenticated):
        return _unauthenticated(caller, access), None
    meta: dict[str, Any] = _mapping(obj.get("metadata"))
    namespace = str(request.get("namespace") or meta.get("namespace"))
    user = _mapping(request.get("userInfo"))
    who = str(user.get("username") or "the requesting user")
    status = review_access(secret_access_review(user, namespace, secret))
    if status.get("allowed") is True:
        if not caller.authenticated:
            # SPECSERVER_WEBHOOK_TRUST_UNAUTHENTICATED: anyone who reaches the webhook port may
            # have written this review and its userInfo, so it approves nothing: no grant, and
            # the operator does not render the Secret (SecretNotApproved; docs/security.md).
            return None, None
        generation = meta.get("generation")
        grant = Grant(
            namespace,
            str(meta.get("name") or request.get("name") or ""),
            str(meta.get("uid") or ""),
            generation if isinstance(generation, int) else 0,
            secret,
            who,
        )
        return None, grant
    if status.get("evaluationError") and not status.get("reason"):
        return (
            f"{WHERE}: could not check that {who} may get Secret {namespace}/{secret} "
            f"({status['evaluationError']}); the engine pod would receive it as HF_TOKEN"
        ), None
    return (
        f"{WHERE}: {who} may not get Secret {namespace}/{secret}, and the engine pod would "
        "receive it as HF_TOKEN; name a Secret you can read (or ask for get on this one)"
    ), None
