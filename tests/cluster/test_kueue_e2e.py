"""Kueue's real controller (v0.17.0, scripts/devcluster.py ``start_kueue``) holds what its quota
cannot admit, on the real scheduler and the node agent's GPU nodes: a Deployment and a
LeaderWorkerSet labelled ``kueue.x-k8s.io/queue-name`` for a ClusterQueue with no
``nvidia.com/gpu`` quota get pods that carry the ``kueue.x-k8s.io/admission`` scheduling gate and
a Workload that Kueue says it cannot fit; raising the quota admits it and the pods schedule and
run. These are the states the operator reads as ``NotAdmitted`` (issue 43): a SpecServer with
``spec.scheduling.queueName`` whose engine Kueue holds is reported Ready=False, reason
``NotAdmitted`` ("held by Kueue: ..."), not as a failing engine, and Ready once admitted.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from specdocs import eagle3_auto
from test_multinode_e2e import EXAMPLE as MULTINODE_EXAMPLE
from test_multinode_e2e import claim_weights
from test_operator_e2e import condition, get

from stack import REPO, KubeHandle, Operator, wait_for

pytestmark = pytest.mark.cluster

QUEUE = "gpus"
GATE = "kueue.x-k8s.io/admission"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
RESTRICTED_SECURITY = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "runAsUser": 65534,
    "seccompProfile": {"type": "RuntimeDefault"},
}


@pytest.fixture
def gpu_nodes(kube: KubeHandle, tmp_path: Path) -> Iterator[None]:
    """The node agent with two 8-GPU nodes: bound pods are reported Running, engines run."""
    log = open(tmp_path / "agent.log", "ab")  # noqa: SIM115
    proc = subprocess.Popen(
        [
            sys.executable,
            str(REPO / "scripts" / "nodeagent.py"),
            "--kubeconfig",
            str(kube.kubeconfig),
            "--state-dir",
            str(tmp_path / "agent"),
            "--nodes",
            "2",
        ],
        env=kube.env(),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log.close()
    try:
        yield
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def _apply(kube: KubeHandle, namespace: str, *objs: dict[str, Any]) -> None:
    items = {"apiVersion": "v1", "kind": "List", "items": list(objs)}
    kube.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(items))


def _queues(namespace: str, gpus: int) -> list[dict[str, Any]]:
    """A ResourceFlavor, a ClusterQueue (``gpus`` nvidia.com/gpu, ample CPU and memory) for
    ``namespace`` only, and its LocalQueue QUEUE; named after the namespace (cluster-scoped
    names are shared by every test of the worker)."""
    return [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": namespace},
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": namespace},
            "spec": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                        "flavors": [
                            {
                                "name": namespace,
                                "resources": [
                                    {"name": "cpu", "nominalQuota": "64"},
                                    {"name": "memory", "nominalQuota": "512Gi"},
                                    {"name": "nvidia.com/gpu", "nominalQuota": str(gpus)},
                                ],
                            }
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": QUEUE, "namespace": namespace},
            "spec": {"clusterQueue": namespace},
        },
    ]


def _set_gpu_quota(kube: KubeHandle, namespace: str, gpus: int) -> None:
    patch = [
        {
            "op": "replace",
            "path": "/spec/resourceGroups/0/flavors/0/resources/2/nominalQuota",
            "value": str(gpus),
        }
    ]
    kube.kubectl("patch", "clusterqueue", namespace, "--type=json", "-p", json.dumps(patch))


def _pod_spec(gpus: int) -> dict[str, Any]:
    return {
        "automountServiceAccountToken": False,
        "containers": [
            {
                "name": "main",
                "image": "busybox:1",
                "resources": {
                    "requests": {"cpu": "1", "memory": "1Gi"},
                    "limits": {"nvidia.com/gpu": str(gpus)},
                },
                "securityContext": RESTRICTED_SECURITY,
            }
        ],
    }


def _deployment(name: str) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": {QUEUE_LABEL: QUEUE}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": _pod_spec(1)},
        },
    }


def _leaderworkerset(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "labels": {QUEUE_LABEL: QUEUE}},
        "spec": {
            "replicas": 1,
            "leaderWorkerTemplate": {
                "size": 2,
                "workerTemplate": {"metadata": {"labels": {"app": name}}, "spec": _pod_spec(1)},
            },
        },
    }


def _list(kube: KubeHandle, namespace: str, kind: str, *args: str) -> list[dict[str, Any]]:
    done = kube.kubectl("get", kind, "-n", namespace, "-o", "json", *args)
    items: list[dict[str, Any]] = json.loads(done.stdout)["items"]
    return items


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in obj.get("status", {}).get("conditions", []) if c["type"] == kind), None)


def _held(kube: KubeHandle, namespace: str, pods: int) -> list[dict[str, Any]]:
    """The workloads once ``pods`` pods exist, every one gated by Kueue and bound to no node,
    and every Workload has Kueue's verdict that it does not fit (QuotaReserved False,
    Pending); [] before."""
    found = _list(kube, namespace, "pods")
    if len(found) < pods:
        return []
    for pod in found:
        gates = [g["name"] for g in pod["spec"].get("schedulingGates", [])]
        assert GATE in gates, f"{pod['metadata']['name']} is not gated by Kueue: {gates}"
        assert not pod["spec"].get("nodeName"), f"{pod['metadata']['name']} was scheduled"
    workloads = _list(kube, namespace, "workloads.kueue.x-k8s.io")
    verdicts = [_condition(w, "QuotaReserved") for w in workloads]
    if not workloads or not all(v and v["status"] == "False" for v in verdicts):
        return []
    return workloads


def _admitted_and_running(kube: KubeHandle, namespace: str, pods: int) -> bool:
    found = _list(kube, namespace, "pods")
    return len(found) == pods and all(
        not p["spec"].get("schedulingGates")
        and p["spec"].get("nodeName")
        and p.get("status", {}).get("phase") == "Running"
        for p in found
    )


@pytest.mark.parametrize(
    ("make", "pods"),
    [(_deployment, 1), (_leaderworkerset, 2)],
    ids=["deployment", "leaderworkerset"],
)
def test_kueue_holds_a_workload_without_gpu_quota_until_the_quota_is_raised(
    kube: KubeHandle, kueue_namespace: str, gpu_nodes: None, make: Any, pods: int
) -> None:
    ns = kueue_namespace
    _apply(kube, ns, *_queues(ns, gpus=0))
    _apply(kube, ns, make("held"))

    workloads = wait_for(lambda: _held(kube, ns, pods), 120, "Kueue holding the workload")
    for workload in workloads:
        verdict = _condition(workload, "QuotaReserved")
        assert verdict is not None
        assert verdict["reason"] == "Pending"
        # Kueue's own words name the resource that does not fit.
        assert "nvidia.com/gpu" in verdict["message"], verdict
        assert (_condition(workload, "Admitted") or {}).get("status") != "True"
    # Held, not failed: the scheduler never saw the pods (no PodScheduled verdict).
    for pod in _list(kube, ns, "pods"):
        scheduled = _condition(pod, "PodScheduled") or {"reason": "SchedulingGated"}
        assert scheduled["reason"] == "SchedulingGated", pod["status"]

    _set_gpu_quota(kube, ns, 8)
    wait_for(
        lambda: _admitted_and_running(kube, ns, pods),
        120,
        "the workload admitted, its pods scheduled and running",
    )
    for workload in _list(kube, ns, "workloads.kueue.x-k8s.io"):
        admitted = _condition(workload, "Admitted")
        assert admitted is not None and admitted["status"] == "True", workload["status"]


def _ready(kube: KubeHandle, namespace: str, name: str) -> dict[str, Any] | None:
    return condition(get(kube, "sps", namespace, name), "Ready")


def _single_node(kube: KubeHandle, namespace: str) -> dict[str, Any]:
    """Qwen3-8B + EAGLE-3 on one GPU, speculation on: a Deployment of one pod."""
    doc = eagle3_auto("qwen3-8b")
    doc["spec"]["mode"] = "Enabled"
    del doc["spec"]["autoSpeculation"]
    return doc


def _two_nodes(kube: KubeHandle, namespace: str) -> dict[str, Any]:
    """The shipped 2 x 8 H100 DeepSeek-V3 example, speculation on: a LeaderWorkerSet of one
    group (a leader and a worker pod, 8 GPUs each), its weights claim bound."""
    doc: dict[str, Any] = yaml.safe_load(MULTINODE_EXAMPLE.read_text())
    doc["spec"]["mode"] = "Enabled"
    del doc["spec"]["autoSpeculation"]
    claim_weights(kube, namespace)
    return doc


@pytest.mark.parametrize(
    ("make", "kind", "gpus"),
    [(_single_node, "deployments", 1), (_two_nodes, "leaderworkersets", 16)],
    ids=["deployment", "leaderworkerset"],
)
def test_a_specserver_kueue_holds_is_reported_held_then_ready_once_admitted(
    kube: KubeHandle,
    kueue_namespace: str,
    gpu_nodes: None,
    operator: Operator,
    make: Any,
    kind: str,
    gpus: int,
) -> None:
    ns = kueue_namespace
    _apply(kube, ns, *_queues(ns, gpus=0))
    doc = make(kube, ns)
    name = doc["metadata"]["name"]
    doc["spec"]["scheduling"] = {"queueName": QUEUE}
    _apply(kube, ns, doc)

    held = wait_for(
        lambda: (c := _ready(kube, ns, name)) and c["reason"] == "NotAdmitted" and c,
        180,
        "the SpecServer reported held by Kueue",
    )
    assert held["status"] == "False"
    assert "held by Kueue" in held["message"], held
    # What the operator rendered carries the queue, and Kueue (not the engine) holds it.
    (workload_object,) = _list(kube, ns, kind)
    assert workload_object["metadata"]["labels"][QUEUE_LABEL] == QUEUE
    pods = _list(kube, ns, "pods")
    assert pods and all(
        GATE in [g["name"] for g in p["spec"].get("schedulingGates", [])] for p in pods
    )
    assert all(not p["spec"].get("nodeName") for p in pods)

    _set_gpu_quota(kube, ns, gpus)
    ready = wait_for(
        lambda: (c := _ready(kube, ns, name)) and c["status"] == "True" and c,
        300,
        "the SpecServer Ready once Kueue admitted its engine",
    )
    assert ready["reason"] != "NotAdmitted"
    workloads = _list(kube, ns, "workloads.kueue.x-k8s.io")
    assert any((_condition(w, "Admitted") or {}).get("status") == "True" for w in workloads)
