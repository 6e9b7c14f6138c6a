"""The validating admission webhook on the real local apiserver, served by the real operator.

The operator creates its CA and serving certificate in a Secret, fills in the caBundle of a
ValidatingWebhookConfiguration (here one that dials it on loopback and applies only to this
test's namespace), and ``kubectl apply --dry-run=server`` of an invalid SpecServer is refused
with every problem and its SPEC code.
"""

from __future__ import annotations

import base64
import contextlib
import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from test_operator_e2e import EXAMPLE, get

from specserver_engine.ports import free_loopback_port
from stack import REPO, KubeHandle, Operator, http_ok, stop_shared_operators, wait_for

pytestmark = pytest.mark.cluster


def webhook_config(
    name: str,
    port: int,
    namespace: str,
    failure_policy: str = "Fail",
    label: str = "specserver-webhook-test",
) -> dict[str, Any]:
    """manifests/webhook.yaml's configuration dialling the operator on loopback, for the
    namespaces labelled ``label=namespace``; Fail by default (an unreachable webhook must fail
    the test; manifests/ has Ignore)."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": "validate.specservers.specserver.io",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "NoneOnDryRun",
                "failurePolicy": failure_policy,
                "timeoutSeconds": 10,
                "clientConfig": {"url": f"https://127.0.0.1:{port}/validate"},
                "namespaceSelector": {"matchLabels": {label: namespace}},
                "rules": [
                    {
                        "apiGroups": ["specserver.io"],
                        "apiVersions": ["v1alpha1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["specservers"],
                    }
                ],
            }
        ],
    }


@contextlib.contextmanager
def operator_webhook(kube: KubeHandle, namespace: str, **env: str) -> Iterator[tuple[str, int]]:
    """The operator serving the webhook for ``namespace`` (extra settings in ``env``), trusting
    the devcluster apiserver's webhook client CA; yields the configuration's name and port.
    An operator of the test's own (``-n namespace``), never the shared one (conftest.py): its
    webhook settings are the test's."""
    stop_shared_operators()  # its Lease is the shared operator's: this one must lead
    kube.kubectl("apply", "-f", str(REPO / "crds"))
    kube.kubectl("label", "namespace", namespace, f"specserver-webhook-test={namespace}")
    name = f"specserver-validation-{namespace}"
    port = free_loopback_port()
    config = webhook_config(name, port, namespace)
    kube.kubectl("apply", "-f", "-", input=json.dumps(config))
    assert kube.webhook_client_ca is not None and kube.webhook_client_ca.exists()
    op = Operator(
        kube,
        "-n",
        namespace,
        SPECSERVER_WEBHOOK_PORT=str(port),
        SPECSERVER_WEBHOOK_ADDRESS="127.0.0.1",
        SPECSERVER_WEBHOOK_SECRET=f"{namespace}/webhook-tls",
        SPECSERVER_WEBHOOK_CONFIG=name,
        SPECSERVER_WEBHOOK_DNS_NAMES="127.0.0.1",
        SPECSERVER_WEBHOOK_CLIENT_CA=str(kube.webhook_client_ca),
        SPECSERVER_WEBHOOK_CLIENT_NAMES="kube-apiserver",
        **env,
    )
    try:
        op.start()
        wait_for(lambda: ca_bundle(kube, name), 60, "the operator to set the caBundle")
        yield name, port
        assert op.running, "the operator exited"
        assert http_ok(f"http://127.0.0.1:{op.port}/healthz"), "/healthz failed"
    finally:
        kube.kubectl("delete", "validatingwebhookconfiguration", name, check=False)
        op.stop()


@pytest.fixture
def webhook(kube: KubeHandle, namespace: str) -> Iterator[str]:
    """The operator serving the webhook for ``namespace``; yields the configuration's name."""
    with operator_webhook(kube, namespace) as (name, _port):
        yield name


def ca_bundle(kube: KubeHandle, name: str) -> str:
    done = kube.kubectl(
        "get",
        "validatingwebhookconfiguration",
        name,
        "-o",
        "jsonpath={.webhooks[0].clientConfig.caBundle}",
        check=False,
    )
    return done.stdout.strip()


def dry_run(
    kube: KubeHandle, namespace: str, doc: dict[str, Any], user: str | None = None
) -> subprocess.CompletedProcess:  # type: ignore[type-arg]
    """``kubectl apply --dry-run=server`` of ``doc``, as ``user`` (impersonated) when given."""
    return kube.kubectl(
        "apply",
        "--dry-run=server",
        *([f"--as={user}"] if user else []),
        "-n",
        namespace,
        "-f",
        "-",
        input=json.dumps(doc),
        check=False,
    )


def example(**engine: Any) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    doc["spec"]["engine"].update(engine)
    doc["spec"]["engine"] = {k: v for k, v in doc["spec"]["engine"].items() if v is not None}
    return doc


def test_invalid_specservers_are_refused_at_apply_time_with_every_spec_code(
    kube: KubeHandle, namespace: str, webhook: str
) -> None:
    bundle = wait_for(lambda: ca_bundle(kube, webhook), 60, "the operator to set the caBundle")
    secret = get(kube, "secret", namespace, "webhook-tls")
    assert secret is not None
    assert secret["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "specserver"
    assert base64.b64decode(bundle) == base64.b64decode(secret["data"]["ca.crt"])

    bad = example(memFractionStatic=0.5, contextLength=100_000)
    done = dry_run(kube, namespace, bad)
    assert done.returncode != 0
    assert "denied the request" in done.stderr, done.stderr
    assert "SPEC002" in done.stderr and "SPEC016" in done.stderr, done.stderr

    # Not a dry run either: nothing is stored.
    stored = kube.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(bad), check=False)
    assert stored.returncode != 0 and get(kube, "sps", namespace, "qwen3-8b") is None

    # Schema-valid but refused by the models: all errors at once.
    two = example()
    two["spec"]["speculative"]["algorithm"] = "NGRAM"
    two["spec"]["draft"] = {"path": "Tengyunw/qwen3_8b_eagle3"}
    two["spec"]["engine"]["extraArgs"] = ["--max-running-requests", "3"]
    refused = dry_run(kube, namespace, two)
    assert refused.returncode != 0 and "OwnedFlagInExtraArgs" in refused.stderr, refused.stderr

    # The flagship without memFractionStatic is admitted (the operator computes one).
    ok = dry_run(kube, namespace, example(memFractionStatic=None))
    assert ok.returncode == 0, ok.stderr
    for path in sorted((REPO / "manifests" / "examples").glob("*.yaml")):
        admitted = kube.kubectl("apply", "--dry-run=server", "-n", namespace, "-f", str(path))
        assert admitted.returncode == 0


def test_only_authors_who_may_read_the_hf_token_secret_may_name_it(
    kube: KubeHandle, namespace: str, webhook: str
) -> None:
    """alice may get Secret hf-token, bob may not; both may write SpecServers (impersonated)."""
    rbac = f"""
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: specservers, namespace: {namespace}}}
rules:
  - {{apiGroups: [specserver.io], resources: [specservers], verbs: ["*"]}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: specservers, namespace: {namespace}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: specservers}}
subjects:
  - {{apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}}
  - {{apiGroup: rbac.authorization.k8s.io, kind: User, name: bob}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: hf-token-reader, namespace: {namespace}}}
rules:
  - {{apiGroups: [""], resources: [secrets], resourceNames: [hf-token], verbs: [get]}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: hf-token-reader, namespace: {namespace}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: hf-token-reader}}
subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}}]
"""
    kube.kubectl("apply", "-f", "-", input=rbac)
    wait_for(lambda: ca_bundle(kube, webhook), 60, "the operator to set the caBundle")

    doc = example(memFractionStatic=None)
    assert doc["spec"]["modelSource"]["hfTokenSecretRef"]["name"] == "hf-token"
    admitted = dry_run(kube, namespace, doc, "alice")
    assert admitted.returncode == 0, admitted.stderr
    refused = dry_run(kube, namespace, doc, "bob")
    assert refused.returncode != 0, refused.stdout
    assert (
        "SecretNotReadable: spec.modelSource.hfTokenSecretRef.name: bob may not get Secret "
        f"{namespace}/hf-token"
    ) in refused.stderr, refused.stderr
    # alice may read hf-token only.
    other = example(memFractionStatic=None)
    other["spec"]["modelSource"]["hfTokenSecretRef"]["name"] = "someone-elses-token"
    assert "alice may not get Secret" in dry_run(kube, namespace, other, "alice").stderr
    # A model-config override in extraArgs is refused at apply time too.
    override = example(
        memFractionStatic=None, extraArgs=["--json-model-override-args", '{"architectures": []}']
    )
    done = dry_run(kube, namespace, override, "alice")
    assert "OwnedFlagInExtraArgs: extraArgs may not set --json-model-override-args" in done.stderr
