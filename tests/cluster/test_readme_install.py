"""README.md's "Install on a cluster", word for word, on the local control plane.

The commands of the section's first ``sh`` block run one by one, exactly as written, in the
repository root with KUBECONFIG pointing at the local apiserver. What a cluster does and this
control plane has no component for is played by the test, nothing more: as soon as the
installed Deployment ``specserver-operator`` exists, its pod runs, as a kubelet would start it,
from the operator image ``scripts/build-images`` built (the manifest names the published
image; this machine has no registry), as the installed ServiceAccount, with the template's own
arguments and environment, its ports moved to free loopback ones; and, as kube-proxy would, the
webhook Service's traffic reaches that pod (the ValidatingWebhookConfiguration dials it on
loopback). Then the first SpecServer is admitted through the operator's webhook and the operator
creates its engine Deployment.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from imagepod import ImageOperator, built_images
from test_operator_e2e import get

from specserver_engine.ports import free_loopback_port
from stack import REPO, KubeHandle, wait_for

pytestmark = pytest.mark.cluster

SYSTEM = "specserver-system"


def install_commands() -> list[str]:
    """The command lines of README.md's first ``sh`` block under "## Install on a cluster"."""
    text = (REPO / "README.md").read_text()
    section = text.split("\n## Install on a cluster\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert block, "README's install section has no sh block"
    lines = [ln for ln in block.group(1).splitlines() if ln.strip() and not ln.startswith("#")]
    assert lines
    return lines


def test_the_install_section_has_what_a_first_day_needs() -> None:
    lines = install_commands()
    assert lines[0].startswith("kubectl apply -f crds/ && kubectl apply -k manifests/")
    applied = [
        REPO / m for ln in lines for m in re.findall(r"-f (manifests/examples/\S+\.yaml)", ln)
    ]
    assert applied, "the install applies a first SpecServer"
    for path in applied:
        source = yaml.safe_load(path.read_text())["spec"].get("modelSource") or {}
        # admitted on a default install: no Secret (needs the webhook client certificate or
        # the trust setting), no volume nobody created
        assert "hfTokenSecretRef" not in source and "volume" not in source


def _pod_env(template: dict[str, Any], ports: dict[str, int]) -> dict[str, str]:
    """The operator container's environment as a kubelet would give it, on this machine's
    loopback and free ports (``ports``)."""
    (container,) = template["spec"]["containers"]
    env: dict[str, str] = {}
    for item in container.get("env") or []:
        if "value" in item:
            env[item["name"]] = item["value"]
        elif item.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "status.podIP":
            env[item["name"]] = "127.0.0.1"
    env.update(
        SPECSERVER_METRICS_PORT=str(ports["metrics"]),
        SPECSERVER_METRICS_ADDRESS="127.0.0.1",
        SPECSERVER_WEBHOOK_PORT=str(ports["webhook"]),
        SPECSERVER_WEBHOOK_ADDRESS="127.0.0.1",
        SPECSERVER_WEBHOOK_DNS_NAMES="specserver-operator-webhook.specserver-system.svc,127.0.0.1",
    )
    return env


def _pod_args(template: dict[str, Any], health: int) -> list[str]:
    (container,) = template["spec"]["containers"]
    args = [str(a) for a in container.get("args") or []]
    return [re.sub(r"http://0\.0\.0\.0:8080/", f"http://127.0.0.1:{health}/", a) for a in args]


class Node:
    """Starts the operator's pod once its Deployment exists and routes the webhook to it."""

    def __init__(self, kube: KubeHandle, image: str, workdir: Path) -> None:
        self.kube = kube
        self.operator = ImageOperator(kube, image, workdir)
        self.started = False

    def step(self) -> None:
        if self.started:
            return
        deploy = get(self.kube, "deployment", SYSTEM, "specserver-operator")
        if deploy is None:
            return
        template = deploy["spec"]["template"]
        ports = {"metrics": free_loopback_port(), "webhook": free_loopback_port()}
        health = free_loopback_port()
        self.operator.start(_pod_args(template, health), _pod_env(template, ports))
        self.started = True
        self._route_webhook(ports["webhook"])
        wait_for(lambda: self._serving(health), 120, "the operator pod's liveness")

    def _route_webhook(self, port: int) -> None:
        url = f"https://127.0.0.1:{port}/validate"
        patch = [
            {"op": "remove", "path": "/webhooks/0/clientConfig/service"},
            {"op": "add", "path": "/webhooks/0/clientConfig/url", "value": url},
        ]
        self.kube.kubectl(
            "patch",
            "validatingwebhookconfiguration",
            "specserver-validation",
            "--type=json",
            "-p",
            json.dumps(patch),
        )

        def ca_bundle() -> bool:
            got = self.kube.kubectl(
                "get",
                "validatingwebhookconfiguration",
                "specserver-validation",
                "-o",
                "jsonpath={.webhooks[0].clientConfig.caBundle}",
                check=False,
            )
            return bool(got.stdout.strip())

        wait_for(ca_bundle, 120, "the operator to fill in the webhook's caBundle")

    def _serving(self, health: int) -> bool:
        if not self.operator.running():
            raise AssertionError(f"the operator pod exited:\n{self.operator.logs()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{health}/healthz", timeout=2) as r:
                return bool(r.status == 200)
        except (OSError, urllib.error.URLError):
            return False


@pytest.fixture
def node(kube: KubeHandle, tmp_path: Path) -> Iterator[Node]:
    image = built_images()["specserver-operator"]
    node = Node(kube, image, tmp_path)
    yield node
    node.operator.stop()
    kube.kubectl("delete", "namespace", "llm", "--wait=false", check=False)
    # Nothing serves the installed webhook after this test: later tests must not go through it.
    kube.kubectl("delete", "validatingwebhookconfiguration", "specserver-validation", check=False)


def test_the_readme_install_admits_and_deploys_the_first_specserver(
    kube: KubeHandle, node: Node
) -> None:
    assert shutil.which("kubectl")
    env = dict(os.environ, KUBECONFIG=str(kube.kubeconfig))
    # Every line applies with zero errors on the current control plane (the PodDisruptionBudget
    # is part of `apply -k manifests/`; the engine NetworkPolicy uses endPort).
    for line in install_commands():
        done = subprocess.run(
            ["bash", "-eo", "pipefail", "-c", line],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        log = node.operator.logs() if node.started else "(the operator pod has not started)"
        assert done.returncode == 0, f"README: `{line}` failed:\n{done.stderr}\n{log}"
        assert "error" not in done.stderr.lower(), f"README: `{line}`:\n{done.stderr}"
        node.step()
    assert node.started, "the install never created the operator's Deployment"
    pdb = get(kube, "poddisruptionbudget", "specserver-system", "specserver-operator")
    assert pdb is not None and pdb["spec"]["minAvailable"] == 1, "apply -k installs the PDB"
    (name,) = [
        doc["metadata"]["name"]
        for ln in install_commands()
        for m in re.findall(r"-f (manifests/examples/\S+\.yaml)", ln)
        for doc in [yaml.safe_load((REPO / m).read_text())]
    ]

    def deployed() -> bool:
        return get(kube, "deployment", "llm", name) is not None

    try:
        wait_for(deployed, 120, f"the engine Deployment llm/{name}")
    except AssertionError as exc:
        sps = kube.kubectl("get", "sps", "-n", "llm", "-o", "yaml", check=False).stdout
        raise AssertionError(f"{exc}\n{sps}\n{node.operator.logs()}") from None
    server = get(kube, "specserver", "llm", name)
    assert server is not None
    # The webhook the install registered reviews SpecServers (it is not failing open): a copy
    # setting a variable the operator owns is refused at apply, with the field.
    (path,) = [
        m for ln in install_commands() for m in re.findall(r"-f (manifests/examples/\S+\.yaml)", ln)
    ]
    bad = yaml.safe_load((REPO / path).read_text())
    bad["metadata"]["name"] = f"{name}-bad"
    bad["spec"]["engine"]["env"] = [{"name": "HF_TOKEN", "value": "x"}]
    refused = kube.kubectl(
        "apply", "--dry-run=server", "-n", "llm", "-f", "-", input=json.dumps(bad), check=False
    )
    assert refused.returncode != 0
    assert "spec.engine.env[0].name: HF_TOKEN is set by the operator" in refused.stderr
