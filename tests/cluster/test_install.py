"""``kubectl apply -f crds/ && kubectl apply -k manifests/`` is the whole install."""

from __future__ import annotations

from conftest import REPO, KubeHandle


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
    assert can("create", "deployments.apps") and can("create", "services")
    assert can("create", "events") and can("get", "secrets") and can("list", "pods")
    assert not can("list", "secrets") and not can("delete", "pods")
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
