"""SwitchBlocked on the real control plane: a namespace whose ResourceQuota allows no
``nvidia.com/gpu`` and a SpecServer that needs one. The apiserver's quota admission refuses the
ReplicaSet's pods, the ReplicaSet and Deployment controllers report it (``ReplicaFailure``), and
the operator says so: Ready=False and SwitchBlocked=True with reason QuotaExceeded and the
apiserver's own words."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from stack import REPO, KubeHandle, Operator, events, wait_for

pytestmark = pytest.mark.cluster

EXAMPLE = REPO / "manifests" / "examples" / "qwen3-8b-eagle3-l4.yaml"


def get(kube: KubeHandle, kind: str, ns: str, name: str) -> dict[str, Any] | None:
    done = kube.kubectl("get", kind, name, "-n", ns, "-o", "json", check=False)
    return json.loads(done.stdout) if done.returncode == 0 else None


def condition(obj: dict[str, Any] | None, type_: str) -> dict[str, Any] | None:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == type_:
            return dict(c)
    return None


def test_a_gpu_quota_refusal_is_the_reported_cause(
    kube: KubeHandle, namespace: str, operator: Operator
) -> None:
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "no-gpus", "namespace": namespace},
        "spec": {"hard": {"requests.nvidia.com/gpu": "0"}},
    }
    kube.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(quota))
    wait_for(  # the quota controller has computed it: admission now refuses, not "unknown"
        lambda: ((get(kube, "resourcequota", namespace, "no-gpus") or {}).get("status") or {}).get(
            "hard"
        ),
        60,
        "ResourceQuota status",
    )
    doc: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    doc["spec"]["mode"] = "Enabled"
    name = doc["metadata"]["name"]
    kube.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(doc))

    def blocked() -> dict[str, Any] | None:
        found = condition(get(kube, "sps", namespace, name), "SwitchBlocked")
        return found if found and found["status"] == "True" else None

    cause = wait_for(blocked, 120, "SwitchBlocked=True")
    assert cause["reason"] == "QuotaExceeded"
    assert "exceeded quota: no-gpus" in cause["message"]
    assert "requests.nvidia.com/gpu" in cause["message"]
    ready = condition(get(kube, "sps", namespace, name), "Ready")
    assert ready is not None and ready["status"] == "False"
    assert ready["reason"] == "QuotaExceeded" and "exceeded quota: no-gpus" in ready["message"]

    def warnings() -> list[dict[str, Any]]:
        found = events(kube, namespace, "SwitchBlocked")
        return [e for e in found if e["involvedObject"].get("name") == name]

    # The pass that sets the condition posts its event after its status patch (loop/cycle.py's
    # _report), so the event follows SwitchBlocked=True, not with it.
    warned = wait_for(warnings, 30, "the SwitchBlocked event")
    assert len(warned) == 1 and "exceeded quota" in warned[0]["message"]
