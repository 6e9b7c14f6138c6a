"""The operator run from its built image (scripts/build-images) as a container on this machine,
the way a kubelet would run the operator pod: podman on the host network, the ServiceAccount's
token as its only credentials. Shared by test_operator_image.py and test_readme_install.py."""

from __future__ import annotations

import json
import secrets
import subprocess
from pathlib import Path
from typing import Any

import pytest
from tenancy import kubeconfig, sa_token

from stack import KubeHandle, load_script


def built_images() -> dict[str, str]:
    """The project's images, built now unless their inputs are unchanged (cached); a failure
    fails the test with the reason, never a skip."""
    buildimages = load_script("buildimages")
    try:
        tags: dict[str, str] = buildimages.build()
    except buildimages.BuildError as exc:
        pytest.fail(f"scripts/build-images could not build the images: {exc}", pytrace=False)
    return tags


class ImageOperator:
    """``specserver-operator`` in its image, as the installed ServiceAccount."""

    def __init__(self, kube: KubeHandle, image: str, workdir: Path) -> None:
        self.kube, self.image, self.workdir = kube, image, workdir
        self.name = f"specserver-operator-test-{secrets.token_hex(4)}"
        self.buildimages = load_script("buildimages")

    def start(self, args: list[str], env: dict[str, str]) -> None:
        token = sa_token(self.kube, "specserver-system", "specserver-operator")
        config = kubeconfig(self.workdir / "operator.kubeconfig", self.kube.server, token)
        config.chmod(0o644)  # read by the image's UID 10001
        # What the kubelet mounts from the ServiceAccount besides the token: the pod's namespace
        # (the operator keeps its leader Lease there, loop/leader.py).
        pod_namespace = self.workdir / "namespace"
        pod_namespace.write_text("specserver-system")
        pod_namespace.chmod(0o644)
        flags = [f"--env={k}={v}" for k, v in {**env, "KUBECONFIG": "/kubeconfig"}.items()]
        cmd = [
            *self.buildimages.podman_cmd(),
            "run",
            "--detach",
            "--name",
            self.name,
            "--network",
            "host",
            "--read-only",
            "--tmpfs",
            "/tmp",
            *self.buildimages.ulimits(),
            "--volume",
            f"{config}:/kubeconfig:ro",
            "--volume",
            f"{pod_namespace}:/var/run/secrets/kubernetes.io/serviceaccount/namespace:ro",
            *flags,
            self.image,
            *args,
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"podman run failed: {done.stderr}"

    def logs(self) -> str:
        done = subprocess.run(
            [*self.buildimages.podman_cmd(), "logs", self.name],
            capture_output=True,
            text=True,
            timeout=60,
        )
        return (done.stdout + done.stderr)[-4000:]

    def running(self) -> bool:
        done = subprocess.run(
            [*self.buildimages.podman_cmd(), "inspect", self.name],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if done.returncode != 0:
            return False
        state: dict[str, Any] = json.loads(done.stdout)[0]["State"]
        return bool(state.get("Running"))

    def stop(self) -> None:
        subprocess.run(
            [*self.buildimages.podman_cmd(), "rm", "--force", "--time", "10", self.name],
            capture_output=True,
            timeout=120,
        )
