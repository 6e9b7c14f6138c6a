"""SwitchBlocked through a whole pass (controller.reconcile on the client fake): a first deploy
whose pod the scheduler cannot place gets SwitchBlocked=True and Ready=False with the
scheduler's words, one Warning event per cause, the ``specserver_switch_blocked`` gauge at 1;
once the engine is Ready, SwitchBlocked=False (NotBlocked) and the gauge is gone."""

from __future__ import annotations

import copy
from typing import Any

from operatorfakes import SPEC, FakeClient

from specserver_operator.core.passcache import PassCache
from specserver_operator.metrics import registry as opmetrics
from specserver_operator.reconcile import controller

UNSCHEDULABLE = (
    "0/2 nodes are available: 2 Insufficient nvidia.com/gpu. preemption: 0/2 nodes are "
    "available: 2 No preemption victims found for incoming pod."
)
NS, NAME = "llm", "blocked-x"


def pending_pod(labels: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": "blocked-x-6d4cf56db6-x2x9z", "labels": dict(labels)},
        "spec": {"schedulingGates": []},
        "status": {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "lastProbeTime": None,
                    "lastTransitionTime": "2026-12-03T19:00:00Z",
                    "reason": "Unschedulable",
                    "message": UNSCHEDULABLE,
                }
            ],
        },
    }


def condition(client: FakeClient, type_: str) -> dict[str, Any]:
    return next(c for c in client.status["conditions"] if c["type"] == type_)


def test_a_first_deploy_that_cannot_be_placed_is_reported_blocked() -> None:
    client = FakeClient()
    client.ready = False
    body = copy.deepcopy(SPEC)
    body["metadata"].update(name=NAME, uid="u-blocked")
    body["spec"]["mode"] = "Enabled"
    memo = PassCache()

    def reconcile(now: float) -> list[tuple[str, str, str]]:
        body["status"] = copy.deepcopy(client.status)
        stamp = f"2026-01-01T00:{int(now) // 60 % 60:02d}:{int(now) % 60:02d}Z"
        out = controller.reconcile(client, body, stamp, now_ts=now, memo=memo)  # type: ignore[arg-type]
        return out.events

    reconcile(1000.0)  # creates the Deployment
    assert client.deployment is not None
    client.pods = [pending_pod(client.deployment["spec"]["selector"]["matchLabels"])]
    events = reconcile(1020.0)
    blocked = condition(client, "SwitchBlocked")
    assert (blocked["status"], blocked["reason"]) == ("True", "Unschedulable")
    assert UNSCHEDULABLE in blocked["message"] and NAME in blocked["message"]
    ready = condition(client, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "Unschedulable")
    assert UNSCHEDULABLE in ready["message"]
    assert [r for t, r, _ in events if t == "Warning" and r == "SwitchBlocked"] == ["SwitchBlocked"]
    assert opmetrics.SWITCH_BLOCKED.values[(NS, NAME, "Unschedulable")][0] == 1

    again = reconcile(1040.0)  # the same cause: no second event
    assert not [r for _, r, _ in again if r == "SwitchBlocked"]

    client.pods = []
    client.deployment["status"]["readyReplicas"] = 1
    reconcile(1060.0)
    blocked = condition(client, "SwitchBlocked")
    assert (blocked["status"], blocked["reason"]) == ("False", "NotBlocked")
    assert condition(client, "Ready")["status"] == "True"
    assert not [k for k in opmetrics.SWITCH_BLOCKED.values if k[:2] == (NS, NAME)]


def test_a_never_blocked_specserver_has_no_switch_blocked_condition() -> None:
    client = FakeClient()
    body = copy.deepcopy(SPEC)
    body["metadata"].update(name="fine", uid="u-fine")
    body["spec"]["mode"] = "Enabled"
    for now in (1000.0, 1020.0):
        body["status"] = copy.deepcopy(client.status)
        controller.reconcile(client, body, "2026-01-01T00:00:00Z", now_ts=now)  # type: ignore[arg-type]
    assert not [c for c in client.status["conditions"] if c["type"] == "SwitchBlocked"]


def test_a_workload_kueue_holds_is_reported_held_not_failed() -> None:
    client = FakeClient()
    client.ready = False
    body = copy.deepcopy(SPEC)
    body["metadata"].update(name="held-x", uid="u-held")
    body["spec"]["mode"] = "Enabled"
    body["spec"]["scheduling"] = {"queueName": "team-a"}
    memo = PassCache()
    for now in (1000.0, 1020.0):
        body["status"] = copy.deepcopy(client.status)
        controller.reconcile(client, body, "2026-01-01T00:00:00Z", now_ts=now, memo=memo)  # type: ignore[arg-type]
        if client.deployment is not None and not client.pods:
            labels = client.deployment["spec"]["selector"]["matchLabels"]
            assert client.deployment["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
            gated = pending_pod(labels)
            gated["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
            gated["status"]["conditions"][0].update(
                reason="SchedulingGated",
                message="Scheduling is blocked due to non-empty scheduling gates",
            )
            client.pods = [gated]
    ready = condition(client, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "NotAdmitted")
    assert "held by Kueue" in ready["message"]
    blocked = condition(client, "SwitchBlocked")
    assert (blocked["reason"], blocked["status"]) == ("NotAdmitted", "True")
