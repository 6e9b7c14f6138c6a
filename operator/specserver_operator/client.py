"""The only module that talks to the Kubernetes API (kubernetes client, synchronous).

Handlers and the controller receive a ``KubeClient`` so tests can pass their own. Children are
written with server-side apply under the field manager ``specserver`` (so fields other managers
own are never overwritten) and only when their content hash changed (a resync writes nothing).
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from specserver_advisor.models import GROUP, KIND, PLURAL, VERSION
from specserver_operator.opmetrics import API_WRITES

FIELD_MANAGER = "specserver"
#: Every child carries this label (render.labels); the cycle lists children by it.
MANAGED_SELECTOR = "app.kubernetes.io/managed-by=specserver"
HASH_ANNOTATION = "specserver.io/applied-hash"
CONFLICT_RETRIES = 5


class NotFoundError(LookupError):
    """The object does not exist."""


class ApiError(RuntimeError):
    """The API server refused a request; the message carries its reason."""


def load_config() -> None:
    """In-cluster config when running in a pod, else the kubeconfig."""
    try:
        k8s_config.load_incluster_config()  # type: ignore[no-untyped-call]
    except k8s_config.ConfigException:
        k8s_config.load_kube_config()  # type: ignore[no-untyped-call]


def object_hash(obj: dict[str, Any]) -> str:
    """Content hash of a desired object (without the hash annotation itself)."""
    clean = json.loads(json.dumps(obj))
    clean.get("metadata", {}).get("annotations", {}).pop(HASH_ANNOTATION, None)
    return hashlib.sha256(json.dumps(clean, sort_keys=True).encode()).hexdigest()[:16]


class KubeClient:
    """Typed, minimal access to what the operator reads and writes."""

    def __init__(self, api: k8s.ApiClient | None = None) -> None:
        self.api = api or k8s.ApiClient()
        self.core = k8s.CoreV1Api(self.api)
        self.apps = k8s.AppsV1Api(self.api)
        self.custom = k8s.CustomObjectsApi(self.api)
        self.writes = 0  # API writes sent (for the scale benchmark and tests)

    def _dict(self, obj: Any) -> dict[str, Any]:
        data: dict[str, Any] = self.api.sanitize_for_serialization(obj)  # type: ignore[no-untyped-call]
        return data

    def get_configmap_data(self, namespace: str, name: str) -> dict[str, str]:
        try:
            cm = self.core.read_namespaced_config_map(name, namespace)
        except ApiException as exc:
            raise _error(exc, f"ConfigMap {namespace}/{name}") from exc
        return dict(cm.data or {})

    def get_secret_value(self, namespace: str, name: str, key: str) -> str:
        import base64

        try:
            secret = self.core.read_namespaced_secret(name, namespace)
        except ApiException as exc:
            raise _error(exc, f"Secret {namespace}/{name}") from exc
        raw = (secret.data or {}).get(key)
        if raw is None:
            raise NotFoundError(f"Secret {namespace}/{name} has no key {key}")
        return base64.b64decode(raw).decode()

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        """A Deployment or Service as a dict, or None."""
        try:
            if kind == "Deployment":
                return self._dict(self.apps.read_namespaced_deployment(name, namespace))
            if kind == "Service":
                return self._dict(self.core.read_namespaced_service(name, namespace))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise _error(exc, f"{kind} {namespace}/{name}") from exc
        raise ValueError(f"unsupported kind {kind}")

    def apply(self, obj: dict[str, Any], desired_hash: str | None = None) -> bool:
        """Server-side apply ``obj`` unless its content hash is already there; True if written."""
        meta = obj["metadata"]
        current = self.get(obj["kind"], meta["namespace"], meta["name"])
        return self.apply_over(obj, current, desired_hash) is not None

    def apply_over(
        self, obj: dict[str, Any], current: dict[str, Any] | None, desired_hash: str | None = None
    ) -> dict[str, Any] | None:
        """Apply ``obj`` unless ``current`` already carries its hash; the written object or None."""
        kind, meta = obj["kind"], obj["metadata"]
        desired_hash = desired_hash or object_hash(obj)
        if (
            current
            and (current["metadata"].get("annotations") or {}).get(HASH_ANNOTATION) == desired_hash
        ):
            return None
        body = json.loads(json.dumps(obj))
        body["metadata"].setdefault("annotations", {})[HASH_ANNOTATION] = desired_hash
        patch = {
            "Deployment": self.apps.patch_namespaced_deployment,
            "Service": self.core.patch_namespaced_service,
        }[kind]
        for attempt in range(CONFLICT_RETRIES):
            try:
                written = patch(
                    meta["name"],
                    meta["namespace"],
                    body,
                    field_manager=FIELD_MANAGER,
                    force=True,
                    _content_type="application/apply-patch+yaml",
                )
                self._wrote()
                return self._dict(written)
            except ApiException as exc:
                if exc.status == 409 and attempt < CONFLICT_RETRIES - 1:
                    time.sleep(0.2 * (attempt + 1))
                    continue
                raise _error(exc, f"{kind} {meta['namespace']}/{meta['name']}") from exc
        return None

    def _wrote(self) -> None:
        self.writes += 1
        API_WRITES.inc()

    def delete(self, kind: str, namespace: str, name: str) -> None:
        """Delete a child this operator owns (a Deployment another strategy left behind)."""
        remove = {
            "Deployment": self.apps.delete_namespaced_deployment,
            "Service": self.core.delete_namespaced_service,
        }[kind]
        try:
            remove(name, namespace)
            self._wrote()
        except ApiException as exc:
            if exc.status != 404:
                raise _error(exc, f"{kind} {namespace}/{name}") from exc

    def list_specservers(self, namespaces: list[str]) -> list[dict[str, Any]]:
        """Every SpecServer (of ``namespaces``, or of the cluster when empty): one LIST each."""
        items: list[dict[str, Any]] = []
        try:
            if not namespaces:
                data: dict[str, Any] = self.custom.list_cluster_custom_object(  # type: ignore[assignment]
                    GROUP, VERSION, PLURAL
                )
                return list(data.get("items", []))
            for ns in namespaces:
                data = self.custom.list_namespaced_custom_object(  # type: ignore[assignment]
                    GROUP, VERSION, ns, PLURAL
                )
                items += data.get("items", [])
        except ApiException as exc:
            raise _error(exc, "SpecServers") from exc
        return items

    def list_children(self, namespaces: list[str]) -> dict[tuple[str, str, str], dict[str, Any]]:
        """Deployments and Services this operator manages, by (kind, namespace, name).

        Read as raw JSON (no client model objects): at a thousand SpecServers the model
        deserialisation would cost more CPU than everything else in a cycle.
        """
        out: dict[tuple[str, str, str], dict[str, Any]] = {}
        calls: list[tuple[str, Any, Any]] = [
            (
                "Deployment",
                self.apps.list_deployment_for_all_namespaces,
                self.apps.list_namespaced_deployment,
            ),
            (
                "Service",
                self.core.list_service_for_all_namespaces,
                self.core.list_namespaced_service,
            ),
        ]
        for kind, cluster_wide, namespaced in calls:
            responses = (
                [cluster_wide(label_selector=MANAGED_SELECTOR, _preload_content=False)]
                if not namespaces
                else [
                    namespaced(ns, label_selector=MANAGED_SELECTOR, _preload_content=False)
                    for ns in namespaces
                ]
            )
            for response in responses:
                for item in json.loads(response.data).get("items", []):
                    meta = item["metadata"]
                    out[(kind, meta["namespace"], meta["name"])] = item
        return out

    def patch_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        """Merge-patch the SpecServer status through the status subresource."""
        for attempt in range(CONFLICT_RETRIES):
            try:
                self.custom.patch_namespaced_custom_object_status(
                    GROUP, VERSION, namespace, PLURAL, name, {"status": status}
                )
                self._wrote()
                return
            except ApiException as exc:
                if exc.status == 409 and attempt < CONFLICT_RETRIES - 1:
                    time.sleep(0.2 * (attempt + 1))
                    continue
                raise _error(exc, f"SpecServer {namespace}/{name} status") from exc

    def list_autoscalers(self, namespace: str) -> list[tuple[str, str, str, str]]:
        """(kind, name, target kind, target name) of HPAs and KEDA ScaledObjects."""
        out: list[tuple[str, str, str, str]] = []
        try:
            hpas = k8s.AutoscalingV1Api(self.api).list_namespaced_horizontal_pod_autoscaler(
                namespace
            )
        except ApiException as exc:
            raise _error(exc, f"HorizontalPodAutoscalers in {namespace}") from exc
        for hpa in hpas.items:
            target = hpa.spec.scale_target_ref
            out.append(
                (
                    "HorizontalPodAutoscaler",
                    str(hpa.metadata.name if hpa.metadata else ""),
                    str(target.kind),
                    str(target.name),
                )
            )
        try:
            scaled: dict[str, Any] = self.custom.list_namespaced_custom_object(  # type: ignore[assignment]
                "keda.sh", "v1alpha1", namespace, "scaledobjects"
            )
        except ApiException as exc:
            if exc.status in (403, 404):
                return out  # KEDA not installed (or not visible): nothing to coexist with
            raise _error(exc, f"ScaledObjects in {namespace}") from exc
        for item in scaled.get("items", []):
            keda_ref: dict[str, Any] = (item.get("spec") or {}).get("scaleTargetRef") or {}
            out.append(
                (
                    "ScaledObject",
                    str(item["metadata"]["name"]),
                    str(keda_ref.get("kind", "Deployment")),
                    str(keda_ref.get("name", "")),
                )
            )
        return out

    def get_specserver(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            data: dict[str, Any] = self.custom.get_namespaced_custom_object(  # type: ignore[assignment]
                GROUP, VERSION, namespace, PLURAL, name
            )
            return data
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise _error(exc, f"SpecServer {namespace}/{name}") from exc

    def post_event(
        self, involved: dict[str, Any], type_: str, reason: str, message: str, now: str
    ) -> None:
        """A core/v1 Event about a SpecServer (best effort: a refused event is not an error)."""
        meta = involved["metadata"]
        event: Any = {
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
        try:
            self.core.create_namespaced_event(meta["namespace"], event, _preload_content=False)
            self._wrote()
        except ApiException:
            pass


def _error(exc: ApiException, what: str) -> Exception:
    if exc.status == 404:
        return NotFoundError(f"{what} not found")
    try:
        message = json.loads(exc.body or "{}").get("message") or exc.reason
    except json.JSONDecodeError:
        message = exc.reason
    return ApiError(f"{what}: {exc.status} {message}")
