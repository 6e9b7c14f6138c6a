"""Shared pytest fixtures and hooks: the real local control plane (session-scoped), Prometheus,
simulated engines. The control plane is started with the same code as ``scripts/devcluster``
(scripts/devcluster.py), in a private state directory and on its own loopback ports, and stopped
at the end of the session. Plain helpers and constants live in ``stack.py``; tests never import
this file as a module.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse

import pytest

from specserver_engine.ports import free_loopback_port
from stack import (
    CLUSTER_FIXTURES,
    REPO,
    RESTRICTED,
    TEST_BASE_PORT,
    TEST_PROM_PORT,
    KubeHandle,
    Simulator,
    load_devcluster,
    load_devprom,
)


@pytest.fixture(scope="session")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeHandle]:
    """A real control plane on loopback for this session (etcd, kube-apiserver,
    kube-controller-manager, kube-scheduler, LeaderWorkerSet's controller); its kubectl first on
    PATH for the session, so every ``kubectl`` a test runs matches the apiserver."""
    devcluster = load_devcluster()
    state = tmp_path_factory.mktemp("devcluster")
    cluster = devcluster.Cluster(state, TEST_BASE_PORT)
    # Stopped whatever happens from here: a start-up that fails half-way (a component that
    # exits, a CRD that is not Established) must not leave processes holding the session's
    # ports for the next run.
    try:
        cluster.up()
        os.environ["PATH"] = f"{devcluster.BIN_DIR}{os.pathsep}{os.environ.get('PATH', '')}"
        host = urlparse(cluster.server).hostname
        if host not in ("127.0.0.1", "localhost", "::1"):
            pytest.exit(f"refusing a non-loopback apiserver {cluster.server}", returncode=3)
        handle = KubeHandle(cluster.kubeconfig, cluster.server, cluster.webhook_client_ca)
        handle.kubectl("apply", "-f", str(REPO / "crds"))
        cluster.wait_established("crd/specservers.specserver.io")
        yield handle
    finally:
        cluster.down()


_NAMESPACE_COUNTER: list[int] = []


@pytest.fixture
def namespace(kube: KubeHandle, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace per test, deleted afterwards; the apiserver's Pod Security admission
    enforces "restricted" on it (RESTRICTED)."""
    _NAMESPACE_COUNTER.append(1)
    stem = request.node.originalname.lower().replace("_", "-").removeprefix("test-")[:40]
    name = "".join(c for c in stem if c.isalnum() or c == "-").strip("-")
    name = f"t{len(_NAMESPACE_COUNTER)}-{name}"
    kube.kubectl("create", "namespace", name)
    kube.kubectl("label", "namespace", name, *(f"{k}={v}" for k, v in RESTRICTED.items()))
    yield name
    kube.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture(scope="session")
def prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A real Prometheus on loopback (scrape every second, file-based discovery)."""
    devprom = load_devprom()
    server = devprom.DevProm(
        tmp_path_factory.mktemp("prometheus"),
        TEST_PROM_PORT,
    )
    server.up()
    try:
        yield server
    finally:
        server.down()


BIND_ATTEMPTS = 5


def _launch_simulator(args: tuple[str, ...]) -> Simulator:
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
    return Simulator(f"http://127.0.0.1:{port}", port, proc)


@pytest.fixture
def start_simulator() -> Iterator[Any]:
    """Factory: start simulators with given SGLang args; all are stopped after the test."""
    started: list[Simulator] = []

    def start(*args: str, wait: bool = True) -> Simulator:
        # The OS may hand the port just picked to another worker's connection before the
        # simulator binds it: a bind refused that way is retried on a new port, nothing else is.
        for attempt in range(BIND_ATTEMPTS):
            sim = _launch_simulator(args)
            started.append(sim)
            if not wait:
                return sim
            try:
                sim.wait_ready()
            except AssertionError as exc:
                if "address already in use" not in str(exc) or attempt == BIND_ATTEMPTS - 1:
                    raise
                continue
            return sim
        raise AssertionError("unreachable")

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


def pytest_configure(config: pytest.Config) -> None:
    """Draw this run's oracle seed (tests/oracle: a rotating sample of generated launches) once,
    in the process that starts the xdist workers, so every worker and the header agree."""
    if not os.environ.get("SPECSERVER_ORACLE_SEED"):
        os.environ["SPECSERVER_ORACLE_SEED"] = str(int.from_bytes(os.urandom(4), "big"))


def pytest_report_header(config: pytest.Config) -> str:
    seed = os.environ["SPECSERVER_ORACLE_SEED"]
    cases = os.environ.get("SPECSERVER_ORACLE_CASES", "1000")
    return (
        f"oracle sample: {cases} generated launches, seed {seed} "
        f"(SPECSERVER_ORACLE_SEED={seed} SPECSERVER_ORACLE_CASES={cases} reproduces it)"
    )


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        help="rewrite tests/golden/*.yaml from the current renderer",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``cluster`` every test that uses the control plane or Prometheus, directly or
    through another fixture (``namespace``, a module's own), so ``-m "not cluster"`` is the
    fast tier whatever a file declares (each such file also says ``pytestmark``)."""
    for item in items:
        if CLUSTER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.cluster)
