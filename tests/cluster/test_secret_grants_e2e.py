"""Issue 25, finding 3's Secret half, on the real local control plane: a SpecServer admitted while
the webhook did not answer (failurePolicy Ignore) never gets its Secret into a pod; the same
SpecServer written, while the webhook answers, by a user who may read the Secret renders it.

The operator runs as the ServiceAccount of manifests/rbac.yaml (its grants live in
specserver-system, which the tenant cannot write); the tenant has rights on SpecServers only
(test_tenant_isolation.py's fixture); ``alice`` (impersonated) may also get the Secret.
"""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from tenancy import kubeconfig, sa_token, start_operator, stop, wait_cycles
from test_operator_e2e import condition, get
from test_tenant_isolation import installed, tenant  # noqa: F401 (fixtures)
from test_webhook import ca_bundle, webhook_config

from specserver_engine.ports import free_loopback_port
from stack import REPO, KubeHandle, wait_for

pytestmark = pytest.mark.cluster

CONFIG = "specserver-validation"  # the one the ServiceAccount may patch (manifests/rbac.yaml)


def _specserver() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(
        (REPO / "manifests" / "examples" / "qwen3-8b-eagle3-l4.yaml").read_text()
    )
    doc["metadata"]["name"] = "stolen"
    doc["spec"]["mode"] = "Enabled"
    doc["spec"]["modelSource"]["hfTokenSecretRef"] = {"name": "db-creds", "key": "password"}
    return doc


def _secret_refs(deployment: dict[str, Any] | None) -> list[str]:
    spec = ((deployment or {}).get("spec") or {}).get("template", {}).get("spec", {})
    return [
        e["valueFrom"]["secretKeyRef"]["name"]
        for c in [*spec.get("containers", []), *spec.get("initContainers", [])]
        for e in c.get("env") or []
        if "secretKeyRef" in (e.get("valueFrom") or {})
    ]


def listening(port: int) -> bool:
    """Whether something accepts connections on loopback ``port`` now."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def test_a_secret_admitted_without_review_never_reaches_a_pod(
    installed: KubeHandle,  # noqa: F811
    namespace: str,
    tenant: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    kube = installed
    kube.kubectl(
        "create", "secret", "generic", "db-creds", "-n", namespace, "--from-literal=password=x"
    )
    kube.kubectl("label", "namespace", namespace, f"specserver-grants-test={namespace}")
    alice = f"""
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: alice, namespace: {namespace}}}
rules:
  - {{apiGroups: [specserver.io], resources: [specservers], verbs: ["*"]}}
  - {{apiGroups: [""], resources: [secrets], resourceNames: [db-creds], verbs: [get]}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: alice, namespace: {namespace}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: alice}}
subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}}]
"""
    kube.kubectl("apply", "-f", "-", input=alice)
    port = free_loopback_port()
    kube.kubectl(
        "apply",
        "-f",
        "-",
        input=json.dumps(
            webhook_config(CONFIG, port, namespace, "Ignore", "specserver-grants-test")
        ),
    )
    op_config = kubeconfig(
        tmp_path / "operator.kubeconfig",
        kube.server,
        sa_token(kube, "specserver-system", "specserver-operator"),
    )
    webhook = {
        "SPECSERVER_WEBHOOK_PORT": str(port),
        "SPECSERVER_WEBHOOK_ADDRESS": "127.0.0.1",
        "SPECSERVER_WEBHOOK_DNS_NAMES": "127.0.0.1",
        "SPECSERVER_WEBHOOK_CONFIG": CONFIG,
        # Only the API server's reviews (its client certificate) get SubjectAccessReviews.
        "SPECSERVER_WEBHOOK_CLIENT_CA": str(kube.webhook_client_ca),
    }

    def deployment() -> dict[str, Any] | None:
        return get(kube, "deploy", namespace, "stolen")

    def valid() -> tuple[str, str, str] | None:
        c = condition(get(kube, "sps", namespace, "stolen"), "ConfigValid")
        return (c["status"], c["reason"], c["message"]) if c else None

    # 1. The webhook does not answer (nothing listens; Ignore admits): the tenant, who may not
    #    read db-creds, names it.
    metrics_port = free_loopback_port()
    metrics = {"SPECSERVER_METRICS_PORT": str(metrics_port)}
    proc = start_operator(op_config, namespace, metrics, tmp_path / "first.log")
    try:
        subprocess.run(
            ["kubectl", "--kubeconfig", str(tenant), "apply", "-n", namespace, "-f", "-"],
            input=json.dumps(_specserver()),
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        refused = wait_for(
            lambda: (v := valid()) and v[1] == "SecretNotApproved" and v, 90, "SecretNotApproved"
        )
        assert refused[0] == "False"
        assert f"Secret {namespace}/db-creds for generation 1" in refused[2]
        wait_cycles(metrics_port, 3)  # several more whole cycles
        assert deployment() is None
    finally:
        stop(proc)
    assert deployment() is None

    # 2. The webhook answers: alice, who may read it, changes the spec; it renders.
    proc = start_operator(op_config, namespace, webhook, tmp_path / "second.log")
    try:
        wait_for(lambda: ca_bundle(kube, CONFIG), 60, "the operator to set the caBundle")
        # The server starts once its certificate is loaded: then it accepts connections.
        wait_for(lambda: listening(port), 60, f"the webhook listening on port {port}")
        refused_tenant = subprocess.run(
            [
                "kubectl",
                "--kubeconfig",
                str(tenant),
                "patch",
                "sps",
                "stolen",
                "-n",
                namespace,
                "--type=merge",
                "-p",
                '{"spec": {"replicas": 2}}',
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert refused_tenant.returncode != 0 and "SecretNotReadable" in refused_tenant.stderr
        assert deployment() is None
        kube.kubectl(
            "patch",
            "sps",
            "stolen",
            "-n",
            namespace,
            "--as=alice",
            "--type=merge",
            "-p",
            '{"spec": {"replicas": 1, "engine": {"maxRunningRequests": 15}}}',
        )
        rendered = wait_for(deployment, 90, "the engine Deployment after alice's approval")
        assert set(_secret_refs(rendered)) == {"db-creds"}
        sps = get(kube, "sps", namespace, "stolen")
        assert sps is not None
        uid, generation = sps["metadata"]["uid"], sps["metadata"]["generation"]
        grant = get(kube, "configmap", "specserver-system", f"specserver-grant-{uid}")
        assert grant is not None
        record = json.loads(grant["data"][f"generation-{generation}"])
        assert record == {"secret": "db-creds", "user": "alice"}
        assert wait_for(lambda: (v := valid()) and v[0] == "True" and v, 30, "ConfigValid")

        # 3. Deleting the SpecServer removes its grant.
        kube.kubectl("delete", "sps", "stolen", "-n", namespace)
        wait_for(
            lambda: get(kube, "configmap", "specserver-system", f"specserver-grant-{uid}") is None,
            60,
            "the grant of the deleted SpecServer to go",
        )
    finally:
        stop(proc)
        # Nothing serves it after this test (manifests/' own is failurePolicy Fail).
        kube.kubectl("delete", "validatingwebhookconfiguration", CONFIG, check=False)
    log_text = (tmp_path / "second.log").read_text(errors="replace")
    assert "is forbidden" not in log_text  # the ServiceAccount's rights were enough
