"""The closed loop at the controller seam: switches complete once, roll back, and steady load
writes nothing. Uses a fake of our own ``client.KubeClient`` (kopf's pattern), which fails
loudly on any call it does not implement."""

from __future__ import annotations

import copy
import itertools
import json
from typing import Any

import pytest

from specserver_advisor.policy.autocycle import COUNT_CAP
from specserver_advisor.policy.model import Observation
from specserver_operator.core.hashes import HASH_ANNOTATION, applied_hash, object_hash
from specserver_operator.reconcile import controller

SPEC = {
    "apiVersion": "specserver.io/v1alpha1",
    "kind": "SpecServer",
    "metadata": {"name": "x", "namespace": "llm", "uid": "u-1", "generation": 1},
    "spec": {
        "model": {"path": "Qwen/Qwen3-8B"},
        "draft": {"path": "Tengyunw/qwen3_8b_eagle3"},
        "speculative": {"algorithm": "EAGLE3", "numSteps": 3, "eagleTopk": 1, "numDraftTokens": 4},
        "mode": "Auto",
        "engine": {"memFractionStatic": 0.85},
        "resources": {"gpuType": "L4"},
        "autoSpeculation": {
            "evaluationIntervalSeconds": 5,
            "disableAfterBreaches": 1,
            "minDwellSeconds": 0,
            "switchTimeoutSeconds": 60,
        },
    },
}


def merge_patch(target: dict[str, Any], patch: dict[str, Any]) -> None:
    """RFC 7386, as the API server applies a status merge patch."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            merge_patch(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


class FakeClient:
    """Our client seam: a Deployment store that becomes ready when told to."""

    def __init__(self) -> None:
        self.deployment: dict[str, Any] | None = None
        self.status: dict[str, Any] = {}
        self.writes = 0
        self.ready = True

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        if kind != "Deployment" or not self.deployment:
            return None
        found = self.deployment["metadata"]["name"] == name
        return copy.deepcopy(self.deployment) if found else None

    def apply(
        self, obj: dict[str, Any], desired_hash: str | None = None, force: bool = False
    ) -> bool:
        if obj["kind"] != "Deployment":
            return False
        desired_hash = desired_hash or object_hash(obj)
        if not force and applied_hash(self.deployment) == desired_hash:
            return False
        self.writes += 1
        self.deployment = copy.deepcopy(obj)
        self.deployment["metadata"].setdefault("annotations", {})[HASH_ANNOTATION] = desired_hash
        self.deployment["metadata"]["generation"] = 1
        ready = 1 if self.ready else 0
        self.deployment["status"] = {
            "readyReplicas": ready,
            "updatedReplicas": 1,
            "observedGeneration": 1,
        }
        return True

    def patch_status(self, namespace: str, name: str, changes: dict[str, Any]) -> None:
        self.writes += 1
        merge_patch(self.status, changes)

    def list_autoscalers(self, namespace: str) -> list[tuple[str, str, str, str]]:
        return []

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"unexpected client call {name}")


class Signals:
    """Our signal cache's seam: every read is a new sample (its own ``ts``, as each refresh of
    ``signals.SignalCache`` stamps its own), so every due pass evaluates it."""

    last_error = None
    held = False
    samples = itertools.count(1)

    def __init__(self, **obs: Any) -> None:
        self.obs = obs

    def get(self, namespace: str, name: str) -> Observation:
        return Observation(ts=float(next(self.samples)), **self.obs)


OVERLOAD = {
    "accept_length": 2.4,
    "ttft_p99_s": 20.0,
    "running": 13,
    "queued": 27,
    "output_tok_s": 300.0,
    "age_s": 2.0,
}
STEADY = {
    "accept_length": 2.7,
    "ttft_p99_s": 0.6,
    "running": 4,
    "queued": 0,
    "output_tok_s": 130.0,
    "age_s": 2.0,
}


@pytest.fixture(autouse=True)
def fresh_caches() -> None:
    controller.clear_caches()


def cycle(client: FakeClient, signals: Signals, t: float) -> controller.Outcome:
    body = copy.deepcopy(SPEC)
    body["status"] = copy.deepcopy(client.status)
    stamp = f"2026-01-01T00:{int(t) // 60 % 60:02d}:{int(t) % 60:02d}Z"
    return controller.reconcile(
        client,
        body,
        stamp,
        signals=signals,  # type: ignore[arg-type]
        now_ts=t,
    )


def mode(client: FakeClient) -> str:
    assert client.deployment is not None
    return str(client.deployment["metadata"]["labels"]["specserver.io/mode"])


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
        ) -> bool:
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
