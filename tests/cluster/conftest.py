"""The cluster tier: tests against the real local stack (etcd, kube-apiserver,
kube-controller-manager on loopback, started by scripts/devcluster's code; a real Prometheus),
the operator run as a process, and simulated engines. Every test here is marked ``cluster``
(tests/conftest.py marks it from the fixtures it uses; tests/test_markers.py checks it), and
scripts/test runs this tier in its own process beside the fast tier. The session fixtures
(``kube``, ``prom``) live in tests/conftest.py: one control plane and Prometheus per pytest-xdist
worker, on that worker's ports (stack.TEST_BASE_PORT). Here: the operator the tests share
(``operator``), operators of a test's own (``own_operator``), and Kueue's real controller for the
tests that ask (``kueue``, ``kueue_namespace``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import ModuleType

import pytest

from stack import (
    DRIP_PORT,
    SHARED_OPERATORS,
    TARPIT_PORT,
    TEST_BASE_PORT,
    KubeHandle,
    Operator,
    load_devcluster,
    stop_shared_operators,
)


@pytest.fixture(scope="session")
def shared_operator(kube: KubeHandle) -> Iterator[Operator]:
    """The shared operator's process handle (not started here: ``operator`` starts it)."""
    # The ports test_operator_faults_e2e.py's tarpit Prometheus and dripping HF endpoint take,
    # allowed (issue 13's allow-lists); no other test names them.
    # Cycles every 2 s (as the closed-loop stack's): what the tests wait for is counted in
    # cycles, so a shorter cycle is a shorter test, not a weaker one.
    op = Operator(
        kube,
        SPECSERVER_CYCLE_SECONDS="2",
        SPECSERVER_PROMETHEUS_ALLOWED_URLS=f"http://127.0.0.1:{TARPIT_PORT}",
        SPECSERVER_HF_ALLOWED_ENDPOINTS=f"http://127.0.0.1:{DRIP_PORT}",
    )
    SHARED_OPERATORS.append(op)
    try:
        yield op
    finally:
        SHARED_OPERATORS.remove(op)
        op.stop()


@pytest.fixture
def operator(shared_operator: Operator) -> Operator:
    """The one operator of the cluster tests: a ``specserver-operator`` process over every
    namespace, as the cluster's admin, with the default settings but 2 s cycles (no
    Prometheus; the tarpit's and the drip's ports allowed), run until a test that does not ask
    for it.

    What the scopes share: the process is the session's (one per control plane, so one per
    xdist worker), started at the first test that asks for it and kept across every following
    test and module that asks for it too; each test has its own namespace (``namespace``),
    which is the only isolation between them: they see each other's SpecServers in the cycle
    and in the operator's /metrics, its Lease (``default/specserver-operator``) and its log.
    A test may stop and start it (a restart: new ports, a new log); it is started again if a
    test left it stopped. A test that does not ask for it runs with no operator at all (it is
    stopped before that test: ``_only_the_operators_a_test_asks_for``), as such tests expect:
    they start their own (``own_operator``, or as another identity: tenancy.py) or none."""
    if not shared_operator.running:
        shared_operator.stop()  # a process that exited: its log closed, its handle dropped
        shared_operator.start()
    return shared_operator


@pytest.fixture(autouse=True)
def _only_the_operators_a_test_asks_for(request: pytest.FixtureRequest) -> None:
    """Stop the shared operator before a test that does not use it: two operators over the
    same namespace (or a leader it would keep from its own) would each act."""
    if "operator" not in request.fixturenames:
        stop_shared_operators()


@pytest.fixture
def own_operator(kube: KubeHandle) -> Iterator[Callable[..., Operator]]:
    """Factory: a fresh operator process of the test's own, with settings ``env`` (started
    unless ``start=False``); stopped after the test. Nothing of it is shared: for a test that
    measures the process itself (its memory from start), or runs it with other settings (a
    Prometheus, faster cycles, a relayed apiserver), or as a second replica."""
    started: list[Operator] = []

    def make(*, start: bool = True, **env: str) -> Operator:
        op = Operator(kube, **env)
        started.append(op)
        if start:
            op.start()
        return op

    try:
        yield make
    finally:
        for op in started:
            op.stop()


@pytest.fixture(scope="module")
def kueue(kube: KubeHandle) -> Iterator[ModuleType]:
    """Kueue's real manager (scripts/devcluster.py ``Cluster.start_kueue``; built first when it
    is not cached) on this worker's control plane, for the tests of one module; stopped after it,
    with its webhook configurations deleted, so no other test passes through Kueue or waits for
    it. It manages only namespaces that ``kueue_namespace`` labels. Yields scripts/devcluster.py
    (its KUEUE_* names)."""
    devcluster = load_devcluster()
    cluster = devcluster.Cluster(kube.kubeconfig.parent, TEST_BASE_PORT)
    cluster.start_kueue()
    try:
        yield devcluster
    finally:
        cluster.stop_kueue()


@pytest.fixture
def kueue_namespace(kueue: ModuleType, namespace: str, kube: KubeHandle) -> str:
    """The test's namespace, labelled so that Kueue manages its workloads."""
    kube.kubectl("label", "namespace", namespace, f"{kueue.KUEUE_NAMESPACE_LABEL}=enabled")
    return namespace
