"""Issue 25, finding 7 on the real local control plane: a tenant's write to ``status.switch`` or
``status.policyState`` (through the status subresource it may write) neither restarts its engine
nor resets the switch budget or dwell; the operator writes its own record back (ownstatus.py).
The operator runs as its ServiceAccount, the tenant has rights on SpecServers only."""

from __future__ import annotations

import datetime
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from tenancy import kubeconfig, sa_token, start_operator, stop, wait_cycles
from test_operator_e2e import EXAMPLE, get
from test_tenant_isolation import installed, tenant  # noqa: F401 (fixtures)

from specserver_engine.ports import free_loopback_port
from stack import KubeHandle, wait_for

pytestmark = pytest.mark.cluster


def _tenant(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["kubectl", "--kubeconfig", str(config), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )


def test_a_forged_switch_or_policy_state_changes_nothing(
    installed: KubeHandle,  # noqa: F811
    namespace: str,
    tenant: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    kube = installed
    doc: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    doc["metadata"]["name"] = "forged"
    doc["spec"].pop("modelSource")  # no Secret (no review approves one here)
    doc["spec"]["autoSpeculation"] = {"evaluationIntervalSeconds": 5, "minDwellSeconds": 3600}
    config = kubeconfig(
        tmp_path / "operator.kubeconfig",
        kube.server,
        sa_token(kube, "specserver-system", "specserver-operator"),
    )
    metrics_port = free_loopback_port()
    settings = {"SPECSERVER_METRICS_PORT": str(metrics_port)}
    proc = start_operator(config, namespace, settings, tmp_path / "operator.log")
    try:
        subprocess.run(
            ["kubectl", "--kubeconfig", str(tenant), "apply", "-n", namespace, "-f", "-"],
            input=json.dumps(doc),
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )

        def settled() -> tuple[dict[str, Any], dict[str, Any]] | None:
            sps, deploy = (
                get(kube, "sps", namespace, "forged"),
                get(kube, "deploy", namespace, "forged"),
            )
            state = ((sps or {}).get("status") or {}).get("policyState")
            return (sps, deploy) if state and deploy else None  # type: ignore[return-value]

        sps, engine = wait_for(settled, 90, "the engine and the policy state")
        assert engine["metadata"]["labels"]["specserver.io/mode"] == "on"
        genuine = sps["status"]["policyState"]

        def status_patch(status: dict[str, Any]) -> None:
            _tenant(
                tenant, "patch", "sps", "forged", "-n", namespace, "--subresource=status",
                "--type=merge", "-p", json.dumps({"status": status}),
            )  # fmt: skip

        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        status_patch(
            {"switch": {"target": "Off", "previous": "On", "startedAt": now, "reason": "Forged"}}
        )
        wait_for(
            lambda: "switch" not in ((get(kube, "sps", namespace, "forged") or {})["status"]),
            30,
            "the forged switch to be written back",
        )
        status_patch({"policyState": {**genuine, "mode": "Off", "modeSince": 0, "switchTimes": []}})
        wait_for(
            lambda: (
                (get(kube, "sps", namespace, "forged") or {})["status"]["policyState"] == genuine
            ),
            30,
            "the forged policy state to be written back",
        )
        wait_cycles(metrics_port, 3)  # several more whole cycles
        now_engine = get(kube, "deploy", namespace, "forged")
        assert now_engine is not None
        assert now_engine["metadata"]["labels"]["specserver.io/mode"] == "on"
        assert now_engine["metadata"]["generation"] == engine["metadata"]["generation"]
        assert now_engine["spec"]["template"] == engine["spec"]["template"]  # no restart
        events = kube.kubectl("get", "events", "-n", namespace, "-o", "json").stdout
        assert "StatusRestored" in events
    finally:
        stop(proc)
