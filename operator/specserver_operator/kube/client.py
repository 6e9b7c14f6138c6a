"""The only module that talks to the Kubernetes API: a small synchronous REST client.

Handlers, the cycle and the controller receive a ``KubeClient`` so tests can pass their own.
It speaks plain JSON over one urllib3 connection pool with the credentials kopf logged in with
(``Connection.from_kopf``), not the official client library: at a thousand SpecServers that
library's import and model objects were most of the operator's memory and CPU. Children are
written with server-side apply under the field manager ``specserver`` (so fields other managers
own are never overwritten) and only when their content hash changed (a resync writes nothing).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import urllib3

from specserver_advisor.models import KIND
from specserver_operator.core import kinds
from specserver_operator.core.hashes import applied_hash, object_hash
from specserver_operator.kube import bodies as apibodies
from specserver_operator.kube import deadline as calldeadline
from specserver_operator.kube import decode as apidecode
from specserver_operator.kube import secretgrants
from specserver_operator.kube.connection import Connection, headers, ssl_context
from specserver_operator.kube.errors import (
    ApiError,
    NotFoundError,
    answer_error,
    conflict_backoff_s,
    no_answer,
)
from specserver_operator.kube.objects import (
    AutoscalerRef,
    autoscaler_ref,
    compact,
    slim,
    slim_event,
    slim_pod,
    slim_specserver,
)
from specserver_operator.kube.paths import (
    SUBJECT_ACCESS_REVIEWS,
    object_path,
    request_url,
    scopes,
    webhook_configuration_path,
)
from specserver_operator.metrics.registry import API_WRITES

# The names imported "as" themselves above are where callers have always found them (the
# errors, hashes, paths and connection live in the pure modules apierrors, apibodies, apiobjects,
# apipaths and kubeconnection).

FIELD_MANAGER = "specserver"
#: Every child carries this label (render.labels); the cycle lists children by it.
MANAGED_SELECTOR = "app.kubernetes.io/managed-by=specserver"
#: Objects per LIST page (bounds the memory a cycle's reads take at once).
LIST_PAGE = 250
#: Pages of engine pods one scheduling read takes (pods labelled by anyone who can create pods
#: in the namespace: bounded, as every LIST of theirs is).
SCHEDULING_PAGES = 8
#: Connections kept open to the API server (more at once are opened and then closed).
POOL_CONNECTIONS = 12
#: Total seconds one API call may take (connect, TLS, request, headers and body together;
#: urllib3's own timeouts are per socket operation): deadline.py.
CALL_DEADLINE_S = 60.0
#: Seconds a TCP connect and TLS handshake may take together (at most the call's budget).
CONNECT_S = 5.0
TOKEN_REREAD_S = 60.0
MERGE_PATCH = "application/merge-patch+json"


log = logging.getLogger("specserver.client")


def kept(items: list[Any]) -> list[Any]:
    """A LIST page without the objects no reconcile pass could hold (``apidecode.too_deep``):
    each is logged (rate-limited) and skipped, the rest of the page is served."""
    out = []
    for item in items:
        if apidecode.too_deep(item):
            who = apidecode.identity(item)
            if apidecode.SKIPS.due(who, time.monotonic()):
                log.error("%s: %s", who, apidecode.SKIP_REASON)
            continue
        out.append(item)
    return out


#: The kinds of the children a SpecServer may own: the workload kinds (kinds.py) and its
#: Service.
CHILD_KINDS = (*kinds.WORKLOAD_KINDS, "Service")
#: Child kinds that are CustomResources: a cluster without their CRD answers 404 to a LIST.
OPTIONAL_KINDS = kinds.OPTIONAL_KINDS


def name_selector(names: list[str] | None) -> str:
    """The label selector of the engine pods of ``names`` (None: of every SpecServer)."""
    if names is None:
        return "specserver.io/name"
    return f"specserver.io/name in ({','.join(names)})"


class KubeClient:
    """Typed, minimal access to what the operator reads and writes."""

    #: Optional child kinds whose LIST answered 404 last (their CRD is not installed).
    absent_kinds: frozenset[str] = frozenset()

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        ctx = ssl_context(connection)
        self.pool = urllib3.PoolManager(
            num_pools=2,
            # The cycle's writer threads (cycle.WRITERS), kopf's handler threads, the lease.
            maxsize=POOL_CONNECTIONS,
            ssl_context=ctx,
            retries=False,
            timeout=urllib3.Timeout(connect=CONNECT_S, read=CALL_DEADLINE_S),
        )
        self.pool.pool_classes_by_scheme = calldeadline.POOL_CLASSES
        self.deadline_s = CALL_DEADLINE_S
        self._token = connection.token
        self._token_read = time.monotonic()
        self._lock = threading.Lock()

    def _token_now(self) -> str | None:
        """The bearer token, re-read from the pod's token file once a minute (it is rotated)."""
        token_file = self.connection.token_file
        if token_file and time.monotonic() - self._token_read > TOKEN_REREAD_S:
            with self._lock, open(token_file, encoding="utf-8") as f:
                self._token, self._token_read = f.read().strip(), time.monotonic()
        return self._token

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
        url = request_url(self.connection.server, path, params)
        data = None if body is None else json.dumps(body).encode()
        content_type = content_type or ("application/json" if data else None)
        sent = headers(self.connection, self._token_now(), content_type, accept)
        with calldeadline.WATCHDOG.call(self.deadline_s) as call:
            # The watchdog cannot cut a TLS handshake (ssl detaches the socket it would shut);
            # the handshake runs under the connect timeout, so that never outlasts the call.
            connect_s = max(0.01, min(CONNECT_S, call.budget_s))
            timeout = urllib3.Timeout(connect=connect_s, read=CALL_DEADLINE_S)
            try:
                resp = self.pool.request(method, url, body=data, headers=sent, timeout=timeout)
            except urllib3.exceptions.HTTPError as exc:
                expired = call.expired or time.monotonic() >= call.deadline
                raise no_answer(what, exc, expired, call.budget_s) from exc
        error = answer_error(what, resp.status, resp.data, resp.reason)
        if error is not None:
            raise error
        return apidecode.loads(resp.data, what) if resp.data else {}

    def _write(self, method: str, path: str, what: str, **kwargs: Any) -> Any:
        """A write, retried on a conflict."""
        attempt = 0
        while True:
            try:
                answer = self.request(method, path, what, **kwargs)
            except ApiError as exc:
                wait_s = conflict_backoff_s(exc, attempt)
                if wait_s is None:
                    raise
                time.sleep(wait_s)
                attempt += 1
                continue
            API_WRITES.inc()
            return answer

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

    # ------------------------------------------- Secret grants (secretgrants.py), own namespace

    def get_secret_grant(
        self, namespace: str, uid: str, generation: int | None = None
    ) -> dict[str, str] | None:
        """The data of a SpecServer uid's grant ConfigMap, or None when there is none (read
        fresh: ``generation``, the one the caller needs, matters only to the cycle's cache)."""
        found = self._get_or_none("ConfigMap", namespace, secretgrants.grant_name(uid))
        return None if found is None else dict(found.get("data") or {})

    def list_secret_grants(self, namespace: str) -> dict[str, tuple[dict[str, str], float]]:
        """Every grant: SpecServer uid -> (data, creation time), one LIST by label."""
        out: dict[str, tuple[dict[str, str], float]] = {}
        for page in self._pages("ConfigMap", namespace, secretgrants.SELECTOR):
            for item in page:
                meta, data = item.get("metadata") or {}, dict(item.get("data") or {})
                name = str(meta.get("name") or "")
                if name.startswith(secretgrants.PREFIX):
                    uid = name[len(secretgrants.PREFIX) :]
                    out[uid] = (data, secretgrants.created_at(meta))
        return out

    def put_secret_grant(
        self, namespace: str, uid: str, patch: dict[str, str | None], labels: dict[str, str]
    ) -> None:
        """Create the grant ConfigMap, or merge ``patch`` into its data when it exists."""
        name = secretgrants.grant_name(uid)
        what = f"ConfigMap {namespace}/{name}"
        data = {k: v for k, v in patch.items() if v is not None}
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "data": data,
        }
        try:
            self._write("POST", object_path("ConfigMap", namespace), what, body=body)
        except ApiError as exc:
            if exc.status != 409:
                raise
            self._write(
                "PATCH",
                object_path("ConfigMap", namespace, name),
                what,
                body={"metadata": {"labels": labels}, "data": patch},
                content_type=MERGE_PATCH,
            )

    def delete_secret_grant(self, namespace: str, uid: str) -> None:
        """Delete a grant whose SpecServer is gone."""
        name = secretgrants.grant_name(uid)
        with contextlib.suppress(NotFoundError):
            self._write(
                "DELETE", object_path("ConfigMap", namespace, name), f"ConfigMap {namespace}/{name}"
            )

    # ------------------------------------------------------- admission webhook (webhook/service.py)

    def review_access(self, review: dict[str, Any]) -> dict[str, Any]:
        """Create a SubjectAccessReview (nothing is stored); its ``status``."""
        answer = self.request("POST", SUBJECT_ACCESS_REVIEWS, "SubjectAccessReview", body=review)
        return dict(answer.get("status") or {})

    def get_secret_data(self, namespace: str, name: str) -> dict[str, str] | None:
        """A Secret's decoded data, or None when there is no such Secret."""
        try:
            secret = self.request(
                "GET", object_path("Secret", namespace, name), f"Secret {namespace}/{name}"
            )
        except NotFoundError:
            return None
        return apibodies.decoded_secret_data(secret)

    def put_secret(
        self, namespace: str, name: str, data: dict[str, str], labels: dict[str, str]
    ) -> None:
        """Create the Secret, or replace its data when it exists (the operator owns it)."""
        body = apibodies.tls_secret(namespace, name, data, labels)
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
                content_type=MERGE_PATCH,
            )

    def ensure_webhook_ca_bundle(self, name: str, ca_pem: str) -> bool | None:
        """Set every webhook's caBundle in the ValidatingWebhookConfiguration ``name``.

        Returns:
            True when it was patched, False when already current, None when it does not exist.
        """
        path = webhook_configuration_path(name)
        what = f"ValidatingWebhookConfiguration {name}"
        try:
            current = self.request("GET", path, what)
        except NotFoundError:
            return None
        patch = apibodies.ca_bundle_patch(current, ca_pem)
        if patch is None:
            return False
        self._write("PATCH", path, what, body=patch, content_type=MERGE_PATCH)
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
        """A Deployment, LeaderWorkerSet or Service as a dict, or None (also when the
        LeaderWorkerSet CRD is not installed: the API answers 404 alike)."""
        if kind not in CHILD_KINDS:
            raise ValueError(f"unsupported kind {kind}")
        return self._get_or_none(kind, namespace, name)

    def get_specserver(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._get_or_none(KIND, namespace, name)

    def apply(
        self, obj: dict[str, Any], desired_hash: str | None = None, force: bool = False
    ) -> dict[str, Any] | None:
        """Server-side apply ``obj`` unless its content hash is already there (``force``: even
        then, to repair a hand edit); the written object (the API's answer), None if nothing
        was written."""
        meta = obj["metadata"]
        current = None if force else self.get(obj["kind"], meta["namespace"], meta["name"])
        return self.apply_over(obj, current, desired_hash)

    def apply_over(
        self, obj: dict[str, Any], current: dict[str, Any] | None, desired_hash: str | None = None
    ) -> dict[str, Any] | None:
        """Apply ``obj`` unless ``current`` already carries its hash; the written object or None."""
        kind, meta = obj["kind"], obj["metadata"]
        desired_hash = desired_hash or object_hash(obj)
        if applied_hash(current) == desired_hash:
            return None
        body = apibodies.apply_body(obj, desired_hash)
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
            content_type=MERGE_PATCH,
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
            yield kept(data.get("items") or [])
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
        body = apibodies.lease_body(lease)
        created: dict[str, Any] = self.request(
            "POST", object_path("Lease", namespace), f"Lease {namespace}", body=body
        )
        return created

    def replace_lease(self, namespace: str, lease: dict[str, Any]) -> dict[str, Any]:
        """PUT with the Lease's resourceVersion: 409 when another replica wrote in between."""
        name = lease["metadata"]["name"]
        body = apibodies.lease_body(lease)
        replaced: dict[str, Any] = self.request(
            "PUT", object_path("Lease", namespace, name), f"Lease {namespace}/{name}", body=body
        )
        return replaced

    def list_specservers(self, namespaces: list[str]) -> list[dict[str, Any]]:
        """Every SpecServer (of ``namespaces``, or of the cluster when empty), slimmed
        (``slim_specserver``) and compacted page by page (a resync of a thousand never holds
        them all as parsed JSON: that copy was the operator's RSS peak every five minutes)."""
        items: list[dict[str, Any]] = []
        for ns in scopes(namespaces):
            for page in self._pages(KIND, ns):
                items.extend(compact(slim_specserver(item)) for item in page)
        return items

    def list_children(self, namespaces: list[str]) -> dict[tuple[str, str, str], dict[str, Any]]:
        """Deployments, LeaderWorkerSets and Services this operator manages, by (kind,
        namespace, name), slimmed to what a pass reads (``slim``). A LeaderWorkerSet LIST that
        answers 404 (no LeaderWorkerSet CRD in the cluster) lists none and is noted in
        ``absent_kinds``: single-node SpecServers are not affected."""
        out: dict[tuple[str, str, str], dict[str, Any]] = {}
        absent = set()
        for kind in CHILD_KINDS:
            try:
                for ns in scopes(namespaces):
                    for page in self._pages(kind, ns, MANAGED_SELECTOR):
                        for item in page:  # slimmed page by page: full pages dropped at once
                            meta = item["metadata"]
                            out[(kind, meta["namespace"], meta["name"])] = compact(slim(kind, item))
            except NotFoundError:
                if kind not in OPTIONAL_KINDS:
                    raise
                absent.add(kind)
        self.absent_kinds = frozenset(absent)
        return out

    def list_scheduling(
        self, namespace: str, names: list[str] | None = None
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """What says why engine workloads of a namespace are not Ready: the engine pods of the
        SpecServers ``names`` (label ``specserver.io/name`` in them; None: every engine pod
        of the namespace; at most SCHEDULING_PAGES pages), slimmed to their names, labels,
        gates, conditions and container states (``slim_pod``), and its ``FailedCreate``
        events (a quota refusal of a StatefulSet's pods: blocked.py; one page, LIST_PAGE:
        bounded). One read serves every SpecServer of the namespace (observe.scheduling)."""
        pods = [
            compact(slim_pod(p))
            for page in itertools.islice(
                self._pages("Pod", namespace, name_selector(names)), SCHEDULING_PAGES
            )
            for p in page
        ]
        events = self.request(
            "GET",
            object_path("Event", namespace),
            f"Event list in {namespace}",
            params={"fieldSelector": "reason=FailedCreate", "limit": LIST_PAGE},
        )
        return pods, [compact(slim_event(e)) for e in kept(events.get("items") or [])]

    def list_autoscalers(self, namespace: str) -> list[AutoscalerRef]:
        """(kind, name, target kind, target name) of HPAs and KEDA ScaledObjects."""
        hpas = self._list("HorizontalPodAutoscaler", namespace)
        out = [autoscaler_ref("HorizontalPodAutoscaler", item) for item in hpas]
        try:
            scaled = self._list("ScaledObject", namespace)
        except NotFoundError:
            return out  # KEDA not installed: nothing to coexist with
        except ApiError as exc:
            if exc.status == 403:
                return out  # not visible to this operator
            raise
        return out + [autoscaler_ref("ScaledObject", item, "Deployment") for item in scaled]

    def post_event(
        self, involved: dict[str, Any], type_: str, reason: str, message: str, now: str
    ) -> None:
        """A core/v1 Event about a SpecServer (best effort: a refused event is not an error)."""
        event = apibodies.event(involved, type_, reason, message, now)
        with contextlib.suppress(ApiError, NotFoundError):
            namespace = involved["metadata"]["namespace"]
            self._write("POST", object_path("Event", namespace), "Event", body=event)
