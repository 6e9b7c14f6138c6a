"""A switch whose reason ended before its new engine is Ready is cancelled at the controller
seam (BlueGreen: the Service never moved, the standby goes back to zero replicas), and never
under Recreate. Over the client fakes of test_autopilot and test_bluegreen (our seam)."""

from __future__ import annotations

import copy
from typing import Any

from operatorfakes import OVERLOAD, SPEC, STEADY, FakeClient, Signals, mode
from test_bluegreen import Store

from specserver_operator.reconcile import controller

AUTO_BLUE_GREEN: dict[str, Any] = copy.deepcopy(SPEC)
AUTO_BLUE_GREEN["metadata"]["uid"] = "u-cancel"
AUTO_BLUE_GREEN["spec"]["autoSpeculation"]["switchStrategy"] = "BlueGreen"


def cycle(client: FakeClient, body: dict[str, Any], obs: dict[str, Any], t: float) -> Any:
    body = copy.deepcopy(body)
    body["status"] = copy.deepcopy(client.status)
    stamp = f"2026-01-01T00:{int(t) // 60 % 60:02d}:{int(t) % 60:02d}Z"
    return controller.reconcile(client, body, stamp, signals=Signals(**obs), now_ts=t)  # type: ignore[arg-type]


def reasons(outcome: Any) -> set[str]:
    return {reason for _, reason, _ in outcome.events}


def test_a_bluegreen_switch_whose_overload_ended_is_cancelled_before_the_service_moves() -> None:
    store = Store()
    cycle(store, AUTO_BLUE_GREEN, STEADY, 1000)
    store.ready_deployments.add("x-on")
    cycle(store, AUTO_BLUE_GREEN, STEADY, 1005)
    assert store.replicas("x-on") == 1 and store.replicas("x-off") == 0
    assert store.selector()["specserver.io/mode"] == "on"

    out = cycle(store, AUTO_BLUE_GREEN, OVERLOAD, 1010)  # the standby starts, On serves
    assert "SpeculationDisabled" in reasons(out)
    assert store.status["switch"]["target"] == "Off"
    assert store.replicas("x-off") == 1 and store.selector()["specserver.io/mode"] == "on"

    out = cycle(store, AUTO_BLUE_GREEN, STEADY, 1015)  # the burst is over, the standby not Ready
    assert "SwitchCancelled" in reasons(out), out.events
    assert "switch" not in store.status
    assert store.status["policyState"]["mode"] == "On"
    assert store.status["lastDecisionReason"] == "SwitchCancelled"
    last = store.status["decisions"][-1]
    assert (last["reason"], last["mode"]) == ("SwitchCancelled", "On")
    assert last["message"].startswith("OverloadEnded")
    assert store.replicas("x-off") == 0 and store.replicas("x-on") == 1
    assert store.selector()["specserver.io/mode"] == "on"

    store.ready_deployments.add("x-off")  # too late: nothing moves to Off
    for t in (1020, 1025, 1030):
        out = cycle(store, AUTO_BLUE_GREEN, STEADY, t)
        assert store.selector()["specserver.io/mode"] == "on"
        assert "SwitchCompleted" not in reasons(out)
    assert store.replicas("x-off") == 0 and store.status["speculationMode"] == "On"
    assert [d["reason"] for d in store.status["decisions"]] == [
        "TTFTSLOBreached",
        "SwitchCancelled",
    ]
    assert not store.deleted


def test_a_bluegreen_switch_whose_overload_holds_is_followed() -> None:
    store = Store()
    cycle(store, AUTO_BLUE_GREEN, STEADY, 1000)
    store.ready_deployments.add("x-on")
    cycle(store, AUTO_BLUE_GREEN, OVERLOAD, 1010)
    out = cycle(store, AUTO_BLUE_GREEN, OVERLOAD, 1015)
    assert "SwitchCancelled" not in reasons(out)
    assert store.status["switch"]["target"] == "Off"
    store.ready_deployments.add("x-off")
    seen = reasons(cycle(store, AUTO_BLUE_GREEN, OVERLOAD, 1020))  # the Service moves
    seen |= reasons(cycle(store, AUTO_BLUE_GREEN, OVERLOAD, 1025))  # the switch completes
    assert "SwitchCompleted" in seen and "SwitchCancelled" not in seen
    assert store.selector()["specserver.io/mode"] == "off" and "switch" not in store.status


def test_a_paused_policy_cancels_nothing() -> None:
    paused = copy.deepcopy(AUTO_BLUE_GREEN)
    paused["metadata"]["annotations"] = {"specserver.io/pause-auto-speculation": "true"}
    store = Store()
    cycle(store, AUTO_BLUE_GREEN, STEADY, 1000)
    store.ready_deployments.add("x-on")
    cycle(store, AUTO_BLUE_GREEN, OVERLOAD, 1010)
    out = cycle(store, paused, STEADY, 1015)
    assert "SwitchCancelled" not in reasons(out)
    assert store.status["switch"]["target"] == "Off" and store.replicas("x-off") == 1


def test_a_recreate_switch_is_not_cancelled() -> None:
    """Recreate already stopped the old engine: the switch is followed to its end."""
    client = FakeClient()
    cycle(client, SPEC, STEADY, 1000)
    client.ready = False
    cycle(client, SPEC, OVERLOAD, 1010)
    assert mode(client) == "off"
    out = cycle(client, SPEC, STEADY, 1015)
    assert "SwitchCancelled" not in reasons(out)
    assert client.status["switch"]["target"] == "Off" and mode(client) == "off"
