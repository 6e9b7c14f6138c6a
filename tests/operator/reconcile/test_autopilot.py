"""The closed loop at the controller seam: switches complete once, roll back, and steady load
writes nothing. Uses a fake of our own ``client.KubeClient`` (kopf's pattern), which fails
loudly on any call it does not implement."""

from __future__ import annotations

import copy
import json
from typing import Any

from operatorfakes import OVERLOAD, STEADY, FakeClient, Signals, cycle, mode

from specserver_advisor.policy.autocycle import COUNT_CAP
from specserver_operator.reconcile import controller


def test_overload_switches_off_once_and_completes() -> None:
    client = FakeClient()
    cycle(client, Signals(**STEADY), 1000)
    assert mode(client) == "on"
    out = cycle(client, Signals(**OVERLOAD), 1010)
    assert ("Normal", "SpeculationDisabled") in {(t, r) for t, r, _ in out.events}
    assert mode(client) == "off" and client.status["switch"]["target"] == "Off"
    out = cycle(client, Signals(**OVERLOAD), 1020)
    assert "switch" not in client.status
    assert "SwitchCompleted" in {r for _, r, _ in out.events}
    assert [d["reason"] for d in client.status["decisions"]] == ["TTFTSLOBreached"]


def test_a_restart_mid_switch_completes_exactly_one_switch() -> None:
    client = FakeClient()
    cycle(client, Signals(**STEADY), 1000)
    # The decision was persisted, then the operator died before touching the Deployment.
    client.status["switch"] = {
        "target": "Off",
        "previous": "On",
        "startedAt": "2026-01-01T00:16:50Z",
        "reason": "TTFTSLOBreached",
    }
    client.status["decisions"] = [
        {
            "time": "2026-01-01T00:16:50Z",
            "action": "disable",
            "reason": "TTFTSLOBreached",
            "mode": "Off",
        }
    ]
    client.status["policyState"]["mode"] = "Off"
    controller.DEFAULT.last_evaluation.clear()  # a new process: nothing of the last one's
    controller.DEFAULT.own_status.clear()  # record of its status writes either (ownstatus.py)
    cycle(client, Signals(**OVERLOAD), 1012)
    assert mode(client) == "off"
    cycle(client, Signals(**OVERLOAD), 1020)
    assert "switch" not in client.status
    assert len(client.status["decisions"]) == 1


def test_a_switch_that_never_gets_ready_is_rolled_back() -> None:
    client = FakeClient()
    cycle(client, Signals(**STEADY), 1000)
    client.ready = False
    cycle(client, Signals(**OVERLOAD), 1010)
    assert mode(client) == "off"
    out = cycle(client, Signals(**OVERLOAD), 1100)  # past switchTimeoutSeconds
    assert ("Warning", "SwitchFailed") in {(t, r) for t, r, _ in out.events}
    assert mode(client) == "on"
    assert client.status["decisions"][-1]["reason"] == "SwitchFailed"
    assert client.status["policyState"]["mode"] == "On"


def test_steady_load_never_switches_and_stops_writing() -> None:
    client = FakeClient()
    for k in range(30):
        cycle(client, Signals(**STEADY), 1000 + 6 * k)
        if k == 9:
            writes = client.writes
    assert mode(client) == "on" and not client.status.get("decisions")
    assert client.writes == writes  # steady state: zero API writes per cycle


def test_stale_metrics_hold_and_report() -> None:
    client = FakeClient()
    cycle(client, Signals(**STEADY), 1000)
    stale = dict(OVERLOAD, age_s=500.0)
    for k in range(5):
        cycle(client, Signals(**stale), 1010 + 6 * k)
    assert mode(client) == "on"
    metrics = next(c for c in client.status["conditions"] if c["type"] == "MetricsAvailable")
    assert (metrics["status"], metrics["reason"]) == ("False", "Stale")
    assert client.status["lastDecisionReason"] == "MetricsStale"


def test_policy_state_is_rewritten_only_for_a_material_change() -> None:
    from specserver_advisor.policy.autocycle import persisted
    from specserver_advisor.policy.model import PolicyState

    first = persisted(PolicyState(mode="on", last_queued=0.0, last_accept=2.7), None, 1000.0)
    noisy = PolicyState(mode="on", last_queued=3.0, last_accept=2.74)
    assert persisted(noisy, first, 1005.0) is first
    counted = PolicyState(mode="on", queue_growth=1, last_queued=3.0, last_accept=2.74)
    written = persisted(counted, first, 1010.0)
    assert written != first and written.last_queued == 3.0
    switched = PolicyState(mode="off", mode_since=1015.0)
    assert persisted(switched, written, 1015.0).mode == "off"


def test_the_switch_is_in_status_before_the_engine_changes() -> None:
    class Ordered(FakeClient):
        """Fails the test if the engine's mode changes while status has no switch."""

        def apply(
            self, obj: dict[str, Any], desired_hash: str | None = None, force: bool = False
        ) -> dict[str, Any] | None:
            new_mode = obj["metadata"]["labels"].get("specserver.io/mode")
            if self.deployment is not None and obj["kind"] == "Deployment":
                old_mode = self.deployment["metadata"]["labels"]["specserver.io/mode"]
                if new_mode != old_mode:
                    assert self.status.get("switch", {}).get("target") == new_mode.title()
            return super().apply(obj, desired_hash, force)

    client = Ordered()
    cycle(client, Signals(**STEADY), 1000)
    cycle(client, Signals(**OVERLOAD), 1010)
    assert mode(client) == "off"


def test_a_metric_that_goes_away_is_removed_and_then_nothing_is_written() -> None:
    client = FakeClient()
    cycle(client, Signals(**STEADY), 1000)
    assert "ttftP99Seconds" in client.status["lastMetrics"]
    idle = dict(STEADY, ttft_p99_s=float("nan"), tpot_p50_ms=float("inf"), running=0)
    # Settling: the idle band's sample count and streak are stored until they reach COUNT_CAP.
    for t in range(1010, 1070, 10):
        cycle(client, Signals(**idle), t)
    assert "ttftP99Seconds" not in client.status["lastMetrics"]
    writes = client.writes
    for t in range(1070, 1200, 10):
        cycle(client, Signals(**idle), t)
    assert client.writes == writes  # an idle engine after traffic: zero writes


def test_a_policy_state_written_as_json_by_the_previous_version_is_migrated_once() -> None:
    from specserver_operator.core import policystate

    client = FakeClient()
    cycle(client, Signals(**STEADY), 1000)
    structured = copy.deepcopy(client.status["policyState"])
    assert isinstance(structured, dict) and structured["mode"] == "On"
    # What the previous operator stored: the advisor's JSON string, counters included.
    parsed = policystate.parse(structured)
    assert parsed is not None
    legacy = parsed.to_json()
    legacy["disable_breaches"] = 0
    legacy["switch_times"] = [900.0]
    client.status["policyState"] = json.dumps(legacy)
    controller.DEFAULT.last_evaluation.clear()  # a new process (which finds what is stored)
    controller.DEFAULT.own_status.clear()
    cycle(client, Signals(**STEADY), 1006)
    migrated = client.status["policyState"]
    assert isinstance(migrated, dict) and migrated["switchTimes"] == [900.0]
    # The band's sample count and streak are stored until they reach COUNT_CAP, then settle.
    for k in range(COUNT_CAP):
        cycle(client, Signals(**STEADY), 1012 + 6 * k)
    settled = copy.deepcopy(client.status["policyState"])
    assert settled["switchTimes"] == [900.0]
    writes = client.writes
    cycle(client, Signals(**STEADY), 1012 + 6 * COUNT_CAP)
    assert client.writes == writes  # the structured form round-trips: nothing more to write
    assert client.status["policyState"] == settled
