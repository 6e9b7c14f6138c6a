"""The only module that talks to the Kubernetes API: a small synchronous REST client.

Handlers, the cycle and the controller receive a ``KubeClient`` so tests can pass their own.
It speaks plain JSON over one urllib3 connection pool with the credentials kopf logged in with
(``Connection.from_kopf``), not the official client library: at a thousand SpecServers that
library's import and model objects were most of the operator's memory and CPU. Children are
written with server-side apply under the field manager ``specserver`` (so fields other managers
own are never overwritten) and only when their content hash changed (a resync writes nothing).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import ssl
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from sys import intern
from typing import Any
from urllib.parse import quote, urlencode

import urllib3

from specserver_advisor.models import GROUP, KIND, PLURAL, VERSION
from specserver_operator import calldeadline
from specserver_operator.drift import DIGEST_KEY, owned_digest
from specserver_operator.opmetrics import API_WRITES

FIELD_MANAGER = "specserver"
#: Every child carries this label (render.labels); the cycle lists children by it.
MANAGED_SELECTOR = "app.kubernetes.io/managed-by=specserver"
#: Objects per LIST page (bounds the memory a cycle's reads take at once).
LIST_PAGE = 250
#: Connections kept open to the API server (more at once are opened and then closed).
POOL_CONNECTIONS = 12
HASH_ANNOTATION = "specserver.io/applied-hash"
CONFLICT_RETRIES = 5
#: Total seconds one API call may take (connect, TLS, request, headers and body together;
#: urllib3's own timeouts are per socket operation): calldeadline.py.
CALL_DEADLINE_S = 60.0
TOKEN_REREAD_S = 60.0
SPECSERVERS = f"/apis/{GROUP}/{VERSION}"
PATHS = {
    "Deployment": ("/apis/apps/v1", "deployments"),
    "Service": ("/api/v1", "services"),
    "ConfigMap": ("/api/v1", "configmaps"),
    "Secret": ("/api/v1", "secrets"),
    "Event": ("/api/v1", "events"),
    "Lease": ("/apis/coordination.k8s.io/v1", "leases"),
    "HorizontalPodAutoscaler": ("/apis/autoscaling/v1", "horizontalpodautoscalers"),
    "ScaledObject": ("/apis/keda.sh/v1alpha1", "scaledobjects"),
    KIND: (SPECSERVERS, PLURAL),
}


class NotFoundError(LookupError):
    """The object does not exist."""


class InvalidNameError(NotFoundError):
    """A name no Kubernetes object can have (so none is asked for: no traversal, no query)."""


class ApiError(RuntimeError):
    """The API server refused a request (or could not be reached); the message says why."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Connection:
    """Where the API server is and how to authenticate (from kopf's login)."""

    server: str
    token: str | None = None
    token_file: str | None = None
    ca_file: str | None = None
    ca_data: bytes | None = None
    insecure: bool = False
    cert_file: str | None = None
    key_file: str | None = None
    cert_data: bytes | None = None  # PEM given inline (kubeconfig client-certificate-data)
    key_data: bytes | None = None
    username: str | None = None
    password: str | None = None

    @classmethod
    def from_kopf(cls, info: Any) -> Connection:
        """From a ``kopf.ConnectionInfo`` (kubeconfig or service account login)."""
        ca_data = _b64(info.ca_data)
        sa_token = "/var/run/secrets/kubernetes.io/serviceaccount/token"
        in_pod = info.server == "https://kubernetes.default.svc" and os.path.exists(sa_token)
        return cls(
            server=str(info.server).rstrip("/"),
            token=info.token,
            token_file=sa_token if in_pod else None,
            ca_file=str(os.fspath(info.ca_path)) if info.ca_path else None,
            ca_data=ca_data,
            insecure=bool(info.insecure),
            cert_file=str(os.fspath(info.certificate_path)) if info.certificate_path else None,
            key_file=str(os.fspath(info.private_key_path)) if info.private_key_path else None,
            cert_data=None if info.certificate_path else _b64(info.certificate_data),
            key_data=None if info.private_key_path else _b64(info.private_key_data),
            username=info.username,
            password=info.password,
        )


def _b64(data: str | bytes | None) -> bytes | None:
    if not data:
        return None
    raw = data.encode() if isinstance(data, str) else data
    return raw if raw.lstrip().startswith(b"-----") else base64.b64decode(raw)


def load_client_cert(ctx: ssl.SSLContext, cert: bytes, key: bytes | None) -> None:
    """Load an inline client certificate: ``ssl`` reads only files, so the PEM goes to a private
    temporary directory that is removed as soon as the context holds the key."""
    with tempfile.TemporaryDirectory(prefix="specserver-cred-") as tmp:
        cert_path = os.path.join(tmp, "cert.pem")
        key_path = os.path.join(tmp, "key.pem") if key else None
        for path, data in ((cert_path, cert), (key_path, key)):
            if path and data:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
        ctx.load_cert_chain(cert_path, key_path)


def object_hash(obj: dict[str, Any]) -> str:
    """Content hash of a desired object (without the hash annotation itself)."""
    clean = json.loads(json.dumps(obj))
    clean.get("metadata", {}).get("annotations", {}).pop(HASH_ANNOTATION, None)
    return hashlib.sha256(json.dumps(clean, sort_keys=True).encode()).hexdigest()[:16]


def applied_hash(obj: dict[str, Any] | None) -> str | None:
    """The content hash this operator stamped on a child when it wrote it."""
    return ((obj or {}).get("metadata", {}).get("annotations") or {}).get(HASH_ANNOTATION)


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


def _scopes(namespaces: list[str]) -> list[str | None]:
    """The namespaces to list, or None for the whole cluster."""
    return [*namespaces] if namespaces else [None]


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


class KubeClient:
    """Typed, minimal access to what the operator reads and writes."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        ctx = ssl.create_default_context()
        if connection.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            # The kubeconfig asked for it (insecure-skip-tls-verify): say so once, not per call.
            urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
        elif connection.ca_file or connection.ca_data:
            ctx.load_verify_locations(
                cafile=connection.ca_file,
                cadata=connection.ca_data.decode() if connection.ca_data else None,
            )
        if connection.cert_file:
            ctx.load_cert_chain(connection.cert_file, connection.key_file)
        elif connection.cert_data:
            load_client_cert(ctx, connection.cert_data, connection.key_data)
        self.pool = urllib3.PoolManager(
            num_pools=2,
            # The cycle's writer threads (cycle.WRITERS), kopf's handler threads, the lease.
            maxsize=POOL_CONNECTIONS,
            ssl_context=ctx,
            retries=False,
            timeout=urllib3.Timeout(connect=5.0, read=CALL_DEADLINE_S),
        )
        self.pool.pool_classes_by_scheme = calldeadline.POOL_CLASSES
        self.deadline_s = CALL_DEADLINE_S
        self._token = connection.token
        self._token_read = time.monotonic()
        self._lock = threading.Lock()

    def _headers(self, content_type: str | None, accept: str | None = None) -> dict[str, str]:
        conn = self.connection
        if conn.token_file and time.monotonic() - self._token_read > TOKEN_REREAD_S:
            with self._lock, open(conn.token_file, encoding="utf-8") as f:
                self._token, self._token_read = f.read().strip(), time.monotonic()
        headers = {"Accept": accept or "application/json", "User-Agent": "specserver-operator"}
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        elif conn.username:
            raw = f"{conn.username}:{conn.password or ''}".encode()
            headers["Authorization"] = f"Basic {base64.b64encode(raw).decode()}"
        if content_type:
            headers["Content-Type"] = content_type
        return headers

    def request(
        self,
        method: str,
        path: str,
        what: str,
        params: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str | None = None,
        accept: str | None = None,
    ) -> Any:
        """One API call; the decoded JSON answer. 404 raises NotFoundError, the rest ApiError."""
        url = self.connection.server + path
        if params:
            url += "?" + urlencode({k: v for k, v in params.items() if v is not None})
        data = None if body is None else json.dumps(body).encode()
        headers = self._headers(content_type or ("application/json" if data else None), accept)
        with calldeadline.WATCHDOG.call(self.deadline_s) as call:
            try:
                resp = self.pool.request(method, url, body=data, headers=headers)
            except urllib3.exceptions.HTTPError as exc:
                if call.expired:
                    raise ApiError(
                        f"{what}: no complete answer within {round(call.budget_s, 1):g}s"
                    ) from exc
                raise ApiError(f"{what}: API server unreachable: {exc}") from exc
        if resp.status == 404:
            raise NotFoundError(f"{what} not found")
        if resp.status >= 400:
            try:
                message = json.loads(resp.data or b"{}").get("message") or resp.reason
            except ValueError:
                message = resp.reason
            raise ApiError(f"{what}: {resp.status} {message}", resp.status)
        return json.loads(resp.data) if resp.data else {}

    def _write(self, method: str, path: str, what: str, **kwargs: Any) -> Any:
        """A write, retried on a conflict."""
        for attempt in range(CONFLICT_RETRIES):
            try:
                answer = self.request(method, path, what, **kwargs)
                API_WRITES.inc()
                return answer
            except ApiError as exc:
                if exc.status == 409 and attempt < CONFLICT_RETRIES - 1:
                    time.sleep(0.2 * (attempt + 1))
                    continue
                raise
        return None

    def get_configmap_data(self, namespace: str, name: str) -> dict[str, str]:
        cm = self.request(
            "GET", object_path("ConfigMap", namespace, name), f"ConfigMap {namespace}/{name}"
        )
        return dict(cm.get("data") or {})

    def secret_exists(self, namespace: str, name: str) -> bool:
        """Whether a Secret exists, asked for its metadata only (no value reaches the operator).

        Needs ``get`` on Secrets in ``namespace``, which the default install does not grant:
        callers treat ApiError (403) as "unknown" (docs/security.md).
        """
        path = object_path("Secret", namespace, name)
        try:
            self.request(
                "GET",
                path,
                f"Secret {namespace}/{name}",
                accept="application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
            )
        except NotFoundError:
            return False
        return True

    # ----------------------------------------------------------- admission webhook (webhook.py)

    def review_access(self, review: dict[str, Any]) -> dict[str, Any]:
        """Create a SubjectAccessReview (nothing is stored); its ``status``."""
        path = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
        answer = self.request("POST", path, "SubjectAccessReview", body=review)
        return dict(answer.get("status") or {})

    def get_secret_data(self, namespace: str, name: str) -> dict[str, str] | None:
        """A Secret's decoded data, or None when there is no such Secret."""
        try:
            secret = self.request(
                "GET", object_path("Secret", namespace, name), f"Secret {namespace}/{name}"
            )
        except NotFoundError:
            return None
        return {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}

    def put_secret(
        self, namespace: str, name: str, data: dict[str, str], labels: dict[str, str]
    ) -> None:
        """Create the Secret, or replace its data when it exists (the operator owns it)."""
        body = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "type": "kubernetes.io/tls",
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
        }
        what = f"Secret {namespace}/{name}"
        try:
            self._write("POST", object_path("Secret", namespace), what, body=body)
        except ApiError as exc:
            if exc.status != 409:
                raise
            patch = {"metadata": {"labels": labels}, "data": body["data"]}
            self._write(
                "PATCH",
                object_path("Secret", namespace, name),
                what,
                body=patch,
                content_type="application/merge-patch+json",
            )

    def ensure_webhook_ca_bundle(self, name: str, ca_pem: str) -> bool | None:
        """Set every webhook's caBundle in the ValidatingWebhookConfiguration ``name``.

        Returns:
            True when it was patched, False when already current, None when it does not exist.
        """
        base = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
        path = f"{base}/{quote(name)}"
        what = f"ValidatingWebhookConfiguration {name}"
        try:
            current = self.request("GET", path, what)
        except NotFoundError:
            return None
        bundle = base64.b64encode(ca_pem.encode()).decode()
        hooks = current.get("webhooks") or []
        if all((h.get("clientConfig") or {}).get("caBundle") == bundle for h in hooks):
            return False
        for hook in hooks:
            hook.setdefault("clientConfig", {})["caBundle"] = bundle
        patch: dict[str, Any] = {
            "metadata": {"resourceVersion": current["metadata"]["resourceVersion"]},
            "webhooks": hooks,
        }
        self._write("PATCH", path, what, body=patch, content_type="application/merge-patch+json")
        return True

    def _get_or_none(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = self.request(
                "GET", object_path(kind, namespace, name), f"{kind} {namespace}/{name}"
            )
        except NotFoundError:
            return None
        return found

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        """A Deployment or Service as a dict, or None."""
        if kind not in ("Deployment", "Service"):
            raise ValueError(f"unsupported kind {kind}")
        return self._get_or_none(kind, namespace, name)

    def get_specserver(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._get_or_none(KIND, namespace, name)

    def apply(
        self, obj: dict[str, Any], desired_hash: str | None = None, force: bool = False
    ) -> bool:
        """Server-side apply ``obj`` unless its content hash is already there (``force``: even
        then, to repair a hand edit); True if written."""
        meta = obj["metadata"]
        current = None if force else self.get(obj["kind"], meta["namespace"], meta["name"])
        return self.apply_over(obj, current, desired_hash) is not None

    def apply_over(
        self, obj: dict[str, Any], current: dict[str, Any] | None, desired_hash: str | None = None
    ) -> dict[str, Any] | None:
        """Apply ``obj`` unless ``current`` already carries its hash; the written object or None."""
        kind, meta = obj["kind"], obj["metadata"]
        desired_hash = desired_hash or object_hash(obj)
        if applied_hash(current) == desired_hash:
            return None
        body = json.loads(json.dumps(obj))
        body["metadata"].setdefault("annotations", {})[HASH_ANNOTATION] = desired_hash
        written: dict[str, Any] = self._write(
            "PATCH",
            object_path(kind, meta["namespace"], meta["name"]),
            f"{kind} {meta['namespace']}/{meta['name']}",
            params={"fieldManager": FIELD_MANAGER, "force": "true"},
            body=body,
            content_type="application/apply-patch+yaml",
        )
        return written

    def delete(self, kind: str, namespace: str, name: str) -> None:
        """Delete a child this operator owns (a Deployment another strategy left behind)."""
        with contextlib.suppress(NotFoundError):
            self._write("DELETE", object_path(kind, namespace, name), f"{kind} {namespace}/{name}")

    def patch_status(self, namespace: str, name: str, status: dict[str, Any]) -> dict[str, Any]:
        """Merge-patch the SpecServer status through the status subresource; the new object."""
        answer: dict[str, Any] = self._write(
            "PATCH",
            object_path(KIND, namespace, name) + "/status",
            f"SpecServer {namespace}/{name} status",
            body={"status": status},
            content_type="application/merge-patch+json",
        )
        return answer

    def _pages(
        self, kind: str, namespace: str | None, selector: str | None = None
    ) -> Iterator[list[dict[str, Any]]]:
        """Every object of a kind, one page (LIST_PAGE objects) at a time: a caller that keeps
        only what it needs of each page never holds the whole list as parsed JSON."""
        token = None
        while True:
            data = self.request(
                "GET",
                object_path(kind, namespace),
                f"{kind} list" + (f" in {namespace}" if namespace else ""),
                params={"labelSelector": selector, "limit": LIST_PAGE, "continue": token},
            )
            yield data.get("items") or []
            token = (data.get("metadata") or {}).get("continue")
            if not token:
                return

    def _list(
        self, kind: str, namespace: str | None, selector: str | None = None
    ) -> list[dict[str, Any]]:
        """Every object of a kind (read in pages of LIST_PAGE)."""
        return [item for page in self._pages(kind, namespace, selector) for item in page]

    def get_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The operator's leader Lease (leader.py), or None."""
        return self._get_or_none("Lease", namespace, name)

    def create_lease(self, namespace: str, lease: dict[str, Any]) -> dict[str, Any]:
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", **lease}
        created: dict[str, Any] = self.request(
            "POST", object_path("Lease", namespace), f"Lease {namespace}", body=body
        )
        return created

    def replace_lease(self, namespace: str, lease: dict[str, Any]) -> dict[str, Any]:
        """PUT with the Lease's resourceVersion: 409 when another replica wrote in between."""
        name = lease["metadata"]["name"]
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", **lease}
        replaced: dict[str, Any] = self.request(
            "PUT", object_path("Lease", namespace, name), f"Lease {namespace}/{name}", body=body
        )
        return replaced

    def list_specservers(self, namespaces: list[str]) -> list[dict[str, Any]]:
        """Every SpecServer (of ``namespaces``, or of the cluster when empty), without
        managedFields and compacted page by page (a resync of a thousand never holds them all
        as parsed JSON: that copy was the operator's RSS peak every five minutes)."""
        items = []
        for ns in _scopes(namespaces):
            for page in self._pages(KIND, ns):
                for item in page:
                    item["metadata"].pop("managedFields", None)
                    items.append(compact(item))
        return items

    def list_children(self, namespaces: list[str]) -> dict[tuple[str, str, str], dict[str, Any]]:
        """Deployments and Services this operator manages, by (kind, namespace, name), slimmed
        to what a pass reads (``slim``)."""
        out: dict[tuple[str, str, str], dict[str, Any]] = {}
        for kind in ("Deployment", "Service"):
            for ns in _scopes(namespaces):
                for page in self._pages(kind, ns, MANAGED_SELECTOR):
                    for item in page:  # slimmed page by page: full pages are dropped at once
                        meta = item["metadata"]
                        out[(kind, meta["namespace"], meta["name"])] = compact(slim(kind, item))
        return out

    def list_autoscalers(self, namespace: str) -> list[tuple[str, str, str, str]]:
        """(kind, name, target kind, target name) of HPAs and KEDA ScaledObjects."""
        out: list[tuple[str, str, str, str]] = []
        for item in self._list("HorizontalPodAutoscaler", namespace):
            target = (item.get("spec") or {}).get("scaleTargetRef") or {}
            out.append(
                (
                    "HorizontalPodAutoscaler",
                    str(item["metadata"]["name"]),
                    str(target.get("kind", "")),
                    str(target.get("name", "")),
                )
            )
        try:
            scaled = self._list("ScaledObject", namespace)
        except NotFoundError:
            return out  # KEDA not installed: nothing to coexist with
        except ApiError as exc:
            if exc.status == 403:
                return out  # not visible to this operator
            raise
        for item in scaled:
            ref = (item.get("spec") or {}).get("scaleTargetRef") or {}
            out.append(
                (
                    "ScaledObject",
                    str(item["metadata"]["name"]),
                    str(ref.get("kind", "Deployment")),
                    str(ref.get("name", "")),
                )
            )
        return out

    def post_event(
        self, involved: dict[str, Any], type_: str, reason: str, message: str, now: str
    ) -> None:
        """A core/v1 Event about a SpecServer (best effort: a refused event is not an error)."""
        meta = involved["metadata"]
        event = {
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
            "message": message[:1000],
            "source": {"component": "specserver-operator"},
            "reportingComponent": "specserver-operator",
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        with contextlib.suppress(ApiError, NotFoundError):
            self._write("POST", object_path("Event", meta["namespace"]), "Event", body=event)
