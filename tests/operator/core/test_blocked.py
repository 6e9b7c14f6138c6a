"""Why an engine workload is not Ready (core/blocked.py), from pods, conditions and events
shaped as the components write them: the scheduler's PodScheduled=False/Unschedulable (its
message as kube-scheduler formats it), the apiserver's ResourceQuota refusal (``exceeded quota:
<name>, requested: ..., used: ..., limited: ...``) copied by the ReplicaSet and Deployment
controllers into ``ReplicaFailure`` or recorded by the StatefulSet controller as a
``FailedCreate`` event ("create Pod x in StatefulSet y failed error: ..."), the apiserver's
``SchedulingGated`` condition on a pod Kueue gates, and the kubelet's waiting reasons."""

from __future__ import annotations

from typing import Any

import pytest

from specserver_operator.core import blocked
from specserver_operator.core.blocked import Blocked
from specserver_operator.core.observed import Observed

SELECTOR = {"specserver.io/name": "llm", "specserver.io/mode": "on"}
UNSCHEDULABLE_MSG = (
    "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are "
    "available: 3 No preemption victims found for incoming pod."
)
QUOTA_MSG = (
    'pods "llm-on-6d4cf56db6-" is forbidden: exceeded quota: gpu-quota, requested: '
    "requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=1, limited: "
    "requests.nvidia.com/gpu=1"
)


def deployment(name: str = "llm-on", replicas: int = 1, **status: Any) -> dict[str, Any]:
    return {
        "kind": "Deployment",
        "metadata": {"name": name, "generation": 1},
        "spec": {"replicas": replicas, "selector": {"matchLabels": SELECTOR}},
        "status": {"observedGeneration": 1, "replicas": replicas, **status},
    }


def lws(name: str = "llm-lws") -> dict[str, Any]:
    return {
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "generation": 1},
        "spec": {"replicas": 1},
        "status": {"replicas": 1, "readyReplicas": 0, "updatedReplicas": 1},
    }


def pod(
    name: str = "llm-on-6d4cf56db6-x2x9z",
    labels: dict[str, str] | None = None,
    gates: list[str] | None = None,
    conditions: list[dict[str, Any]] | None = None,
    containers: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {**SELECTOR, **(labels or {})}},
        "spec": {"schedulingGates": [{"name": g} for g in gates or []]},
        "status": {
            "phase": "Pending",
            "conditions": conditions or [],
            **({"containerStatuses": containers} if containers else {}),
        },
    }


def unschedulable(message: str = UNSCHEDULABLE_MSG) -> dict[str, Any]:
    return {
        "type": "PodScheduled",
        "status": "False",
        "lastProbeTime": None,
        "lastTransitionTime": "2026-12-03T19:00:00Z",
        "reason": "Unschedulable",
        "message": message,
    }


def waiting(reason: str, message: str) -> dict[str, Any]:
    return {
        "name": "engine",
        "ready": False,
        "restartCount": 3,
        "image": "lmsysorg/sglang:v0.5.3",
        "state": {"waiting": {"reason": reason, "message": message}},
    }


def test_unschedulable_quotes_the_scheduler() -> None:
    found = blocked.blocked(deployment(), [pod(conditions=[unschedulable()])], [])
    assert found == Blocked("Unschedulable", UNSCHEDULABLE_MSG, "llm-on")
    assert found.scarce
    assert UNSCHEDULABLE_MSG in found.describe() and "llm-on" in found.describe()


def test_quota_from_a_deployments_replica_failure() -> None:
    failure = {
        "type": "ReplicaFailure",
        "status": "True",
        "lastUpdateTime": "2026-12-03T19:00:00Z",
        "reason": "FailedCreate",
        "message": QUOTA_MSG,
    }
    found = blocked.blocked(deployment(readyReplicas=0, conditions=[failure]), [], [])
    assert found == Blocked("QuotaExceeded", QUOTA_MSG, "llm-on")
    assert found.scarce


def test_quota_from_a_statefulsets_failed_create_event() -> None:
    text = "create Pod llm-lws-0 in StatefulSet llm-lws failed error: " + QUOTA_MSG.replace(
        "llm-on-6d4cf56db6-", "llm-lws-0"
    )
    older = {
        "reason": "FailedCreate",
        "type": "Warning",
        "message": text.replace("used: requests.nvidia.com/gpu=1", "used: x"),
        "involvedObject": {"kind": "StatefulSet", "name": "llm-lws", "apiVersion": "apps/v1"},
        "lastTimestamp": "2026-12-03T18:00:00Z",
    }
    newer = {**older, "message": text, "lastTimestamp": "2026-12-03T19:00:00Z"}
    other = {**newer, "involvedObject": {"kind": "StatefulSet", "name": "other-lws"}}
    found = blocked.blocked(lws(), [], [older, other, newer])
    assert found == Blocked("QuotaExceeded", text, "llm-lws")
    # A worker group's StatefulSet is named after the LWS; another workload's never counts.
    worker = {**newer, "involvedObject": {"kind": "StatefulSet", "name": "llm-lws-0"}}
    assert blocked.blocked(lws(), [], [worker]) is not None
    assert blocked.blocked(lws(), [], [other]) is None


def test_a_kueue_gated_pod_is_held_not_failed() -> None:
    gated = pod(
        gates=["kueue.x-k8s.io/admission"],
        conditions=[
            {
                "type": "PodScheduled",
                "status": "False",
                "lastProbeTime": None,
                "lastTransitionTime": "2026-12-03T19:00:00Z",
                "reason": "SchedulingGated",
                "message": "Scheduling is blocked due to non-empty scheduling gates",
            }
        ],
    )
    found = blocked.blocked(deployment(), [gated], [])
    assert found is not None and found.reason == "NotAdmitted" and found.scarce
    assert found.describe().startswith("llm-on: held by Kueue: ")
    assert "Scheduling is blocked due to non-empty scheduling gates" in found.message
    # Another tool's gate is not Kueue's: no cause from it.
    other = pod(gates=["example.com/wait"], conditions=gated["status"]["conditions"])
    assert blocked.blocked(deployment(), [other], []) is None


def test_a_suspended_workload_is_not_admitted() -> None:
    held = deployment()
    held["spec"]["suspend"] = True
    found = blocked.blocked(held, [], [])
    assert found is not None and found.reason == "NotAdmitted"


@pytest.mark.parametrize(
    ("reason", "message", "want"),
    [
        ("ImagePullBackOff", 'Back-off pulling image "lmsysorg/sglang:nope"', "ImagePullBackOff"),
        ("ErrImagePull", "rpc error: code = NotFound desc = failed to pull", "ImagePullBackOff"),
        (
            "CrashLoopBackOff",
            "back-off 5m0s restarting failed container=engine pod=llm-on-x_ns(uid)",
            "CrashLoopBackOff",
        ),
    ],
)
def test_kubelet_waiting_reasons_are_not_scarcity(reason: str, message: str, want: str) -> None:
    found = blocked.blocked(deployment(), [pod(containers=[waiting(reason, message)])], [])
    assert found is not None and found.reason == want and not found.scarce
    assert message in found.message


def test_only_the_workloads_own_live_pods_count() -> None:
    stranger = pod(labels={"specserver.io/mode": "off"}, conditions=[unschedulable()])
    leaving = pod(conditions=[unschedulable()])
    leaving["metadata"]["deletionTimestamp"] = "2026-12-03T19:00:00Z"
    assert blocked.blocked(deployment(), [stranger, leaving], []) is None
    assert blocked.blocked(None, [pod(conditions=[unschedulable()])], []) is None


def test_hostile_messages_are_bounded() -> None:
    found = blocked.blocked(deployment(), [pod(conditions=[unschedulable("x" * 10_000)])], [])
    assert found is not None and len(found.message) <= blocked.MESSAGE_MAX


def test_observed_blocked_reads_only_a_workload_that_is_not_ready() -> None:
    waiting_pod = pod(conditions=[unschedulable()])
    not_ready = deployment(readyReplicas=0)
    obs = Observed(
        body={"metadata": {"name": "llm", "namespace": "ns"}},
        server=None,
        invalid=None,
        children={("Deployment", "llm-on"): not_ready, ("Deployment", "llm-off"): None},
        pods=(waiting_pod,),
    )
    found = obs.blocked("llm-on")
    assert found is not None and found.reason == "Unschedulable"
    assert obs.blocked("llm-off") is None
    ready = Observed(
        body=obs.body,
        server=None,
        invalid=None,
        children={("Deployment", "llm-on"): deployment(readyReplicas=1, updatedReplicas=1)},
        pods=(waiting_pod,),
    )
    assert ready.blocked("llm-on") is None
