"""Leader election on the real local control plane, as the ServiceAccount of manifests/rbac.yaml:
an operator that may not touch its Lease says so once (which Lease, which namespace, which verb),
shows it on ``/healthz`` and ``/metrics``, and stays passive."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest
from tenancy import install, kubeconfig, sa_token, start_operator, stop
from test_operator_e2e import apply, example, get

from specserver_engine.ports import free_loopback_port
from stack import KubeHandle, counted, scrape, wait_for

pytestmark = pytest.mark.cluster


def _get(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return str(resp.read().decode())
    except OSError:
        return ""


def test_a_service_account_without_lease_rights_says_so_once_and_writes_nothing(
    kube: KubeHandle, namespace: str, tmp_path: Path
) -> None:
    install(kube)
    token = sa_token(kube, "specserver-system", "specserver-operator")
    config = kubeconfig(tmp_path / "operator.kubeconfig", kube.server, token)
    metrics_port = free_loopback_port()
    log_path = tmp_path / "operator.log"
    # The Role granting Leases is in specserver-system only: here every Lease request is 403.
    settings = {
        "SPECSERVER_LEASE_NAMESPACE": namespace,
        "SPECSERVER_METRICS_PORT": str(metrics_port),
    }
    proc = start_operator(config, namespace, settings, log_path)
    liveness = proc.args[proc.args.index("--liveness") + 1]  # type: ignore[union-attr]
    try:
        apply(kube, namespace, example())
        wait_for(
            lambda: (
                "specserver_lease_forbidden 1.0" in _get(f"http://127.0.0.1:{metrics_port}/metrics")
            ),
            180,  # a backstop: the operator starts slowly on a loaded machine
            "the forbidden-Lease gauge",
        )
        # Five more election rounds (one a second, no cycle runs): each would log and write.
        url = f"http://127.0.0.1:{metrics_port}/metrics"
        counted(lambda: scrape(url, "specserver_election_rounds_total"), 5, 60, "Lease rounds")
        health = json.loads(_get(liveness) or "{}")
        assert "forbidden" in str(health.get("leader")), health
        assert get(kube, "deployment", namespace, "qwen3-8b") is None
        status = (get(kube, "sps", namespace, "qwen3-8b") or {}).get("status")
        assert not status, status
    finally:
        stop(proc)
    log = log_path.read_text(errors="replace")
    lines = [line for line in log.splitlines() if "Lease 'specserver-operator'" in line]
    assert len(lines) == 1, log[-3000:]
    assert f"cannot get the Lease 'specserver-operator' in namespace '{namespace}'" in lines[0]
    assert "lacks 'get' on leases.coordination.k8s.io" in lines[0]
    assert "Traceback" not in log
