"""``kubectl apply -f crds/ && kubectl apply -k manifests/`` is the whole install."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from stack import REPO, KubeHandle

pytestmark = pytest.mark.cluster


@pytest.fixture(autouse=True)
def _no_webhook_left(kube: KubeHandle) -> Iterator[None]:
    """Nothing serves the installed webhook here: later tests must not go through it."""
    yield
    kube.kubectl("delete", "validatingwebhookconfiguration", "specserver-validation", check=False)


def test_install_and_least_privilege(kube: KubeHandle) -> None:
    kube.kubectl("apply", "-f", str(REPO / "crds"))
    done = kube.kubectl("apply", "-k", str(REPO / "manifests"))
    assert "deployment.apps/specserver-operator" in done.stdout
    sa = "system:serviceaccount:specserver-system:specserver-operator"

    def can(verb: str, resource: str, ns: str = "llm") -> bool:
        out = kube.kubectl("auth", "can-i", verb, resource, "--as", sa, "-n", ns, check=False)
        return out.stdout.strip() == "yes"

    assert can("patch", "specservers.specserver.io")
    assert can("patch", "specservers.specserver.io/status")
    assert can("create", "deployments.apps") and can("patch", "services")
    assert can("create", "events") and can("get", "configmaps")
    # No Secrets; of Pods only `list`, for SwitchBlocked (docs/security.md; test_tenant_isolation.py
    # snapshots the rest): no single pod read, no watch, no logs, no exec, nothing written.
    assert not can("get", "secrets") and not can("list", "secrets")
    assert can("list", "pods")
    assert not can("get", "pods") and not can("watch", "pods") and not can("delete", "pods")
    assert not can("get", "pods/log") and not can("create", "pods/exec")
    assert not can("create", "clusterroles.rbac.authorization.k8s.io")
    assert not can("create", "pods") and not can("update", "configmaps")
    assert can("create", "leases.coordination.k8s.io", "specserver-system")
    assert can("update", "leases.coordination.k8s.io/specserver-operator", "specserver-system")
    assert not can("update", "leases.coordination.k8s.io/other", "specserver-system")
    assert not can("create", "leases.coordination.k8s.io", "llm")
    deploy = kube.kubectl(
        "get",
        "deploy",
        "specserver-operator",
        "-n",
        "specserver-system",
        "-o",
        "jsonpath={.spec.template.spec.containers[0].securityContext}",
    )
    assert '"readOnlyRootFilesystem":true' in deploy.stdout


def test_install_registers_the_webhook_and_lets_the_operator_keep_its_ca(kube: KubeHandle) -> None:
    kube.kubectl("apply", "-f", str(REPO / "crds"))
    kube.kubectl("apply", "-k", str(REPO / "manifests"))
    got = kube.kubectl(
        "get", "validatingwebhookconfiguration", "specserver-validation", "-o",
        "jsonpath={.webhooks[0].failurePolicy} {.webhooks[0].clientConfig.service.name}",
    )  # fmt: skip
    assert got.stdout == "Fail specserver-operator-webhook"  # admission does not fail open
    sa = "system:serviceaccount:specserver-system:specserver-operator"

    def can(*args: str) -> bool:
        out = kube.kubectl("auth", "can-i", *args, "--as", sa, check=False)
        return out.stdout.strip() == "yes"

    hook = "validatingwebhookconfigurations.admissionregistration.k8s.io"
    assert can("patch", f"{hook}/specserver-validation")
    assert not can("patch", f"{hook}/someone-else")
    tls = "secrets/specserver-webhook-tls"
    assert can("patch", tls, "-n", "specserver-system") and can(
        "create", "secrets", "-n", "specserver-system"
    )
    assert not can("create", "secrets", "-n", "llm")
