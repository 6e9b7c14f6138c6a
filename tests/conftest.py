"""Shared pytest fixtures: the real local control plane (session-scoped) and repo paths.

The control plane is started with the same code as ``scripts/devcluster`` (scripts/devcluster.py),
in a private state directory and on its own loopback ports, and stopped at the end of the session.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import urlparse

import pytest

from specserver_engine.ports import free_loopback_port

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"
TEST_BASE_PORT = int(os.environ.get("SPECSERVER_TEST_BASE_PORT", "26443"))


def load_script(name: str) -> ModuleType:
    """Import scripts/<name>.py (a script, not a package module) as the module ``name``."""
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_devcluster() -> ModuleType:
    """Import scripts/devcluster.py."""
    return load_script("devcluster")


def load_config(name: str) -> dict[str, Any]:
    """A bundled model config.json (advisor/specserver_advisor/data/configs)."""
    path = REPO / "advisor" / "specserver_advisor" / "data" / "configs" / f"{name}.json"
    data: dict[str, Any] = json.loads(path.read_text())
    return data


@dataclass
class KubeHandle:
    """How tests reach the local apiserver."""

    kubeconfig: Path
    server: str
    #: the CA of the client certificate the apiserver shows admission webhooks (devcluster.py)
    webhook_client_ca: Path | None = None

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["kubectl", "--kubeconfig", str(self.kubeconfig), *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed:\n{done.stderr}")
        return done

    def env(self) -> dict[str, str]:
        return dict(os.environ, KUBECONFIG=str(self.kubeconfig))


@pytest.fixture(scope="session")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeHandle]:
    """A real etcd + kube-apiserver + kube-controller-manager on loopback for this session."""
    devcluster = load_devcluster()
    state = tmp_path_factory.mktemp("devcluster")
    cluster = devcluster.Cluster(state, TEST_BASE_PORT)
    cluster.up()
    host = urlparse(cluster.server).hostname
    if host not in ("127.0.0.1", "localhost", "::1"):
        cluster.down()
        pytest.exit(f"refusing a non-loopback apiserver {cluster.server}", returncode=3)
    handle = KubeHandle(cluster.kubeconfig, cluster.server, cluster.webhook_client_ca)
    try:
        handle.kubectl("apply", "-f", str(REPO / "crds"))
        handle.kubectl(
            "wait", "--for=condition=Established", "--timeout=60s", "crd/specservers.specserver.io"
        )
        yield handle
    finally:
        cluster.down()


_NAMESPACE_COUNTER: list[int] = []


@pytest.fixture
def namespace(kube: KubeHandle, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace per test, deleted afterwards."""
    _NAMESPACE_COUNTER.append(1)
    stem = request.node.originalname.lower().replace("_", "-").removeprefix("test-")[:40]
    name = "".join(c for c in stem if c.isalnum() or c == "-").strip("-")
    name = f"t{len(_NAMESPACE_COUNTER)}-{name}"
    kube.kubectl("create", "namespace", name)
    yield name
    kube.kubectl("delete", "namespace", name, "--wait=false", check=False)


def load_devprom() -> ModuleType:
    """Import scripts/devprom.py."""
    return load_script("devprom")


@pytest.fixture(scope="session")
def prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A real Prometheus on loopback (scrape every second, file-based discovery)."""
    devprom = load_devprom()
    server = devprom.DevProm(
        tmp_path_factory.mktemp("prometheus"),
        int(os.environ.get("SPECSERVER_TEST_PROM_PORT", "29090")),
    )
    server.up()
    try:
        yield server
    finally:
        server.down()


QWEN_EAGLE3 = [
    "--model-path",
    "Qwen/Qwen3-8B",
    "--speculative-algorithm",
    "EAGLE3",
    "--speculative-draft-model-path",
    "Tengyunw/qwen3_8b_eagle3",
    "--speculative-num-steps",
    "3",
    "--speculative-eagle-topk",
    "1",
    "--speculative-num-draft-tokens",
    "4",
    "--mem-fraction-static",
    "0.85",
]


@dataclass
class Simulator:
    """A running ``specserver-engine simulate`` process."""

    url: str
    port: int
    process: subprocess.Popen[str]

    def wait_ready(self, timeout: float = 30.0) -> None:
        import time
        import urllib.error
        import urllib.request

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"simulator exited: {self.process.stdout.read()}")  # type: ignore[union-attr]
            try:
                with urllib.request.urlopen(f"{self.url}/ready", timeout=1) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        raise AssertionError("simulator not ready in time")


@pytest.fixture
def start_simulator() -> Iterator[Any]:
    """Factory: start simulators with given SGLang args; all are stopped after the test."""
    started: list[Simulator] = []

    def start(*args: str, wait: bool = True) -> Simulator:
        port = free_loopback_port()
        argv = [
            sys.executable,
            "-m",
            "specserver_engine.cli",
            "simulate",
            *args,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        sim = Simulator(f"http://127.0.0.1:{port}", port, proc)
        started.append(sim)
        if wait:
            sim.wait_ready()
        return sim

    yield start
    for sim in started:
        sim.process.terminate()
        try:
            sim.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            sim.process.kill()
            sim.process.wait()
        if sim.process.stdout:
            sim.process.stdout.close()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        help="rewrite tests/golden/*.yaml from the current renderer",
    )
