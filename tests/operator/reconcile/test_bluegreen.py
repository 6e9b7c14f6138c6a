"""BlueGreen switching: the pure plan, and the controller seam over a store of our own client.

The store fakes only ``client.KubeClient`` (our seam): objects by (kind, name), a Deployment
turns Ready when the test says so. The real-stack run is in tests/cluster/test_bluegreen_e2e.py.
"""

from __future__ import annotations

import copy
from typing import Any

from operatorfakes import SPEC, FakeClient

from specserver_operator.core import bluegreen
from specserver_operator.reconcile import controller


def test_first_deploy_serves_the_wanted_mode_at_once() -> None:
    p = bluegreen.plan("on", 2, None, {}, {})
    assert p == bluegreen.BlueGreenPlan({"on": 2, "off": 0}, "on", False)


def test_a_switch_keeps_traffic_on_the_old_mode_until_the_new_one_is_ready() -> None:
    exists = {"on": True, "off": True}
    during = bluegreen.plan("off", 1, "on", {"on": True, "off": False}, exists)
    assert during == bluegreen.BlueGreenPlan({"off": 1, "on": 1}, "on", True)
    after = bluegreen.plan("off", 1, "on", {"on": True, "off": True}, exists)
    assert after == bluegreen.BlueGreenPlan({"off": 1, "on": 0}, "off", False)


def test_nothing_to_protect_when_the_serving_deployment_is_gone() -> None:
    p = bluegreen.plan("off", 1, "on", {"off": False}, {"on": False, "off": True})
    assert p.serve == "off" and not p.switching


def test_serving_mode_reads_the_service_selector() -> None:
    svc = {"spec": {"selector": {"specserver.io/name": "x", "specserver.io/mode": "off"}}}
    assert bluegreen.serving_mode(svc) == "off"
    assert bluegreen.serving_mode({"spec": {"selector": {"specserver.io/name": "x"}}}) is None
    assert bluegreen.serving_mode(None) is None


# The controller-seam SpecServer of test_autopilot, in mode Enabled with the BlueGreen strategy.
BODY: dict[str, Any] = copy.deepcopy(SPEC)
BODY["metadata"]["uid"] = "u-bg"
BODY["spec"]["mode"] = "Enabled"
BODY["spec"]["autoSpeculation"] = {"switchStrategy": "BlueGreen"}


class Store(FakeClient):
    """Our client seam: objects by (kind, name); named Deployments report Ready on request."""

    def __init__(self) -> None:
        super().__init__()  # status patches, no autoscalers, loud on anything else
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.ready_deployments: set[str] = set()
        self.deleted: list[str] = []

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        obj = self.objects.get((kind, name))
        if obj is None:
            return None
        obj = copy.deepcopy(obj)
        if kind == "Deployment":
            want = obj["spec"]["replicas"]
            ok = name in self.ready_deployments
            obj["status"] = {
                "observedGeneration": obj["metadata"]["generation"],
                "readyReplicas": want if ok else 0,
                "updatedReplicas": want,
            }
        return obj

    def apply(
        self, obj: dict[str, Any], desired_hash: str | None = None, force: bool = False
    ) -> dict[str, Any] | None:
        key = (obj["kind"], obj["metadata"]["name"])
        old = self.objects.get(key)
        if old is not None and old["spec"] == obj["spec"] and not force:
            return None
        new = copy.deepcopy(obj)
        new["metadata"]["generation"] = (old or {"metadata": {"generation": 0}})["metadata"][
            "generation"
        ] + 1
        self.objects[key] = new
        return copy.deepcopy(new)

    def delete(self, kind: str, namespace: str, name: str) -> None:
        self.deleted.append(name)
        self.objects.pop((kind, name), None)

    def replicas(self, name: str) -> int:
        return int(self.objects[("Deployment", name)]["spec"]["replicas"])

    def selector(self) -> dict[str, str]:
        return dict(self.objects[("Service", "x")]["spec"]["selector"])


def reconcile(store: Store, mode: str, generation: int) -> controller.Outcome:
    body = copy.deepcopy(BODY)
    body["spec"]["mode"] = mode
    body["metadata"]["generation"] = generation
    body["status"] = copy.deepcopy(store.status)
    return controller.reconcile(store, body, "2026-01-01T00:00:00Z", now_ts=1000.0)  # type: ignore[arg-type]


def condition(store: Store, type_: str) -> dict[str, Any]:
    return next(c for c in store.status["conditions"] if c["type"] == type_)


def test_blue_green_switch_moves_the_service_only_after_the_standby_is_ready() -> None:
    store = Store()
    reconcile(store, "Enabled", 1)
    assert store.replicas("x-on") == 1 and store.replicas("x-off") == 0
    assert store.selector()["specserver.io/mode"] == "on"
    off_args = store.objects[("Deployment", "x-off")]["spec"]["template"]["spec"]["containers"][0]
    assert not [a for a in off_args["args"] if a.startswith("--speculative")]
    store.ready_deployments.add("x-on")
    reconcile(store, "Enabled", 1)
    assert store.status["speculationMode"] == "On"

    reconcile(store, "Disabled", 2)  # the standby starts; traffic stays on the speculative engine
    assert store.replicas("x-off") == 1 and store.replicas("x-on") == 1
    assert store.selector()["specserver.io/mode"] == "on"
    progressing = condition(store, "Progressing")
    assert progressing["status"] == "True" and progressing["reason"] == "BlueGreenSwitch"
    assert store.status["speculationMode"] == "On"
    reconcile(store, "Disabled", 2)  # still not Ready: nothing moves
    assert store.selector()["specserver.io/mode"] == "on"

    store.ready_deployments.add("x-off")
    reconcile(store, "Disabled", 2)
    assert store.selector()["specserver.io/mode"] == "off"
    assert store.replicas("x-on") == 0 and store.replicas("x-off") == 1
    assert store.status["speculationMode"] == "Off"
    assert condition(store, "Progressing")["reason"] != "BlueGreenSwitch"
    assert not store.deleted


def test_moving_to_blue_green_deletes_the_old_deployment_only_once_the_new_one_serves() -> None:
    store = Store()
    body = copy.deepcopy(BODY)
    body["spec"]["autoSpeculation"] = {"switchStrategy": "Recreate"}
    body["status"] = {}
    controller.reconcile(store, body, "2026-01-01T00:00:00Z", now_ts=1000.0)  # type: ignore[arg-type]
    assert ("Deployment", "x") in store.objects
    store.ready_deployments.add("x")
    reconcile(store, "Enabled", 2)
    assert ("Deployment", "x") in store.objects and not store.deleted
    store.ready_deployments.add("x-on")
    out = reconcile(store, "Enabled", 2)
    assert store.deleted == ["x"]
    assert ("Normal", "ChildRemoved") in {(t, r) for t, r, _ in out.events}


def test_a_deployment_of_another_owner_is_never_taken_over() -> None:
    store = Store()
    # Another SpecServer named "x-off" owns the Deployment "x-off" this one's standby would use.
    theirs = {
        "kind": "Deployment",
        "metadata": {
            "name": "x-off",
            "generation": 1,
            "ownerReferences": [{"kind": "SpecServer", "name": "x-off", "uid": "u-other"}],
        },
        "spec": {"replicas": 1, "template": {"metadata": {"labels": {"app": "theirs"}}}},
    }
    store.objects[("Deployment", "x-off")] = copy.deepcopy(theirs)
    out = reconcile(store, "Enabled", 1)
    assert store.objects[("Deployment", "x-off")] == theirs
    progressing = condition(store, "Progressing")
    assert progressing["reason"] == "NameConflict" and "Deployment x-off" in progressing["message"]
    assert ("Warning", "NameConflict") in {(t, r) for t, r, _ in out.events}
    again = reconcile(store, "Enabled", 1)  # reported once, not every cycle
    assert ("Warning", "NameConflict") not in {(t, r) for t, r, _ in again.events}
    assert store.replicas("x-on") == 1  # its own engine still runs
