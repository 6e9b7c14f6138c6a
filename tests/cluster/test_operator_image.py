"""The operator from its built image reconciles a SpecServer against the local apiserver.

``scripts/build-images`` builds operator/Dockerfile here (on a Debian root made with mmdebstrap,
no registry); the image runs under podman on the host network as the installed ServiceAccount
(manifests/rbac.yaml, a token kubeconfig), with a read-only root as manifests/operator.yaml
sets, and creates the engine Deployment and Service of a SpecServer. If the image cannot be
built the test fails naming why (imagepod.built_images).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from imagepod import ImageOperator, built_images
from test_operator_e2e import get

from specserver_engine.ports import free_loopback_port
from stack import REPO, KubeHandle, wait_for

pytestmark = pytest.mark.cluster


@pytest.fixture
def image_operator(kube: KubeHandle, tmp_path: Path) -> Iterator[ImageOperator]:
    image = built_images()["specserver-operator"]
    kube.kubectl(
        "apply",
        "-f",
        str(REPO / "manifests" / "namespace.yaml"),
        "-f",
        str(REPO / "manifests" / "rbac.yaml"),
    )
    op = ImageOperator(kube, image, tmp_path)
    yield op
    op.stop()


def test_the_operator_image_reconciles_a_specserver(
    kube: KubeHandle, namespace: str, image_operator: ImageOperator
) -> None:
    liveness = free_loopback_port()
    image_operator.start(
        ["-n", namespace, "--liveness", f"http://127.0.0.1:{liveness}/healthz"],
        {"SPECSERVER_CYCLE_SECONDS": "1"},
    )
    doc = {
        "apiVersion": "specserver.io/v1alpha1",
        "kind": "SpecServer",
        "metadata": {"name": "from-image"},
        "spec": {
            "model": {"path": "Qwen/Qwen3-8B"},
            "draft": {"path": "Tengyunw/qwen3_8b_eagle3"},
            "speculative": {
                "algorithm": "EAGLE3",
                "numSteps": 3,
                "eagleTopk": 1,
                "numDraftTokens": 4,
            },
            "mode": "Enabled",
            "engine": {"memFractionStatic": 0.85, "maxRunningRequests": 16},
            "resources": {"gpus": 1, "gpuType": "L4"},
        },
    }
    kube.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(doc))

    def deployed() -> bool:
        if not image_operator.running():
            raise AssertionError(f"the operator container exited:\n{image_operator.logs()}")
        return get(kube, "deployment", namespace, "from-image") is not None

    try:
        wait_for(deployed, 120, "the Deployment the operator in its image creates")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\noperator log:\n{image_operator.logs()}") from None
    deploy = get(kube, "deployment", namespace, "from-image")
    assert deploy is not None
    pod = deploy["spec"]["template"]["spec"]
    engine = next(c for c in pod["containers"] if c["name"] == "engine")
    env = {e["name"]: e.get("value") for e in engine["env"]}
    assert env["HOME"] == "/home/specserver"  # this checkout's renderer, from the image
    assert get(kube, "service", namespace, "from-image") is not None
    assert get(kube, "lease", "specserver-system", "specserver-operator") is not None
