"""One SpecServer's fault stays its own: the cycle goes on for the others, the failing one gets
a condition and one event, and is retried with backoff (cycle.py, faults.py).

The controller's pass is replaced by a recording fake at its seam (``Cycle._pass``); the client
is a fake of our own ``KubeClient`` that records every call and fails loudly on any other."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from specserver_advisor.models import KIND
from specserver_operator.kube.client import KubeClient
from specserver_operator.kube.errors import ApiError
from specserver_operator.loop import faults
from specserver_operator.loop.cycle import Cycle
from specserver_operator.metrics import registry as opmetrics


def specserver(name: str, generation: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "specserver.io/v1alpha1",
        "kind": KIND,
        "metadata": {
            "name": name,
            "namespace": "llm",
            "uid": f"uid-{name}",
            "generation": generation,
            # A new generation is a new write: its version is newer (the cache keeps the newer).
            "resourceVersion": str(generation),
        },
        "spec": {},
    }


class RecordingClient(KubeClient):
    """Records status patches and events; any other call is a test failure."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.bodies: list[dict[str, Any]] = []

    def patch_status(self, namespace: str, name: str, status: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("patch_status", (name, copy.deepcopy(status))))
        return {}

    def post_event(
        self, involved: dict[str, Any], type_: str, reason: str, message: str, now: str
    ) -> None:
        self.calls.append(("post_event", (involved["metadata"]["name"], type_, reason, message)))

    def list_children(self, namespaces: list[str]) -> dict[tuple[str, str, str], Any]:
        return {}

    def list_specservers(self, namespaces: list[str]) -> list[dict[str, Any]]:
        return [copy.deepcopy(b) for b in self.bodies]

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"unexpected client call {name}")


class FaultyCycle(Cycle):
    """A cycle whose per-object pass raises for the names in ``broken``."""

    broken: dict[str, Exception]
    passed: list[str]

    def _pass(self, client: KubeClient, body: dict[str, Any], defer: bool = False) -> None:
        name = body["metadata"]["name"]
        if name in self.broken:
            raise self.broken[name]
        self.passed.append(name)


@pytest.fixture
def setup() -> tuple[FaultyCycle, RecordingClient]:
    client = RecordingClient()
    client.bodies = [specserver("bad"), specserver("good")]
    cycle = FaultyCycle(client)
    cycle.broken = {"bad": ValueError("invalid literal for int() with base 10: 'big'")}
    cycle.passed = []
    return cycle, client


def test_one_failing_object_does_not_stop_the_others(
    setup: tuple[FaultyCycle, RecordingClient],
) -> None:
    cycle, client = setup
    assert cycle.run_once() == 1
    assert cycle.passed == ["good"]
    events = [c[1] for c in client.calls if c[0] == "post_event"]
    message = "ValueError: invalid literal for int() with base 10: 'big'"
    assert events == [("bad", "Warning", "ReconcileFailed", message)]
    patches = [c[1] for c in client.calls if c[0] == "patch_status"]
    assert len(patches) == 1 and patches[0][0] == "bad"
    ready = next(c for c in patches[0][1]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False" and ready["reason"] == "ReconcileFailed"
    assert "big" in ready["message"]
    assert patches[0][1]["observedGeneration"] == 1


def test_a_failing_object_backs_off_and_a_new_generation_is_retried_at_once(
    setup: tuple[FaultyCycle, RecordingClient],
) -> None:
    cycle, client = setup
    cycle.run_once()
    client.calls.clear()
    cycle.run_once()  # within the backoff: the bad object is not even tried
    assert cycle.passed == ["good", "good"] and client.calls == []
    fixed = specserver("bad", generation=2)
    cycle.cache.put(KIND, fixed)
    del cycle.broken["bad"]
    cycle.run_once()
    assert sorted(cycle.passed[-2:]) == ["bad", "good"]
    assert "uid-bad" not in cycle.faults.by_uid


def test_the_same_error_again_posts_no_second_event() -> None:
    record = faults.Faults()
    assert record.record("u", 1, "boom", now=0.0)
    assert record.by_uid["u"].retry_at == faults.BACKOFF_S[0]
    assert not record.record("u", 1, "boom", now=10.0)
    assert record.by_uid["u"].retry_at == 10.0 + faults.BACKOFF_S[1]
    assert record.record("u", 2, "boom", now=11.0)  # a new generation is news


def test_a_refused_write_is_the_objects_fault_but_an_unreachable_server_is_not(
    setup: tuple[FaultyCycle, RecordingClient],
) -> None:
    cycle, client = setup
    cycle.broken = {
        "bad": ApiError("Deployment llm/bad: 422 spec.replicas: Invalid value", 422),
        "good": ApiError("Deployment llm/good: API server unreachable", 0),
    }
    cycle.run_once()
    reasons = {c[1][0]: c[1][2] for c in client.calls if c[0] == "post_event"}
    assert reasons == {"bad": "ReconcileFailed"}
    assert "uid-good" not in cycle.faults.by_uid


def test_an_unchanged_fault_condition_writes_nothing() -> None:
    now = "2026-01-01T00:00:00Z"
    first = faults.fault_status({}, 3, "ValueError: x", now)
    assert faults.fault_status(first, 3, "ValueError: x", "2026-01-01T00:05:00Z") == {}


def test_healthy_only_while_cycles_complete(setup: tuple[FaultyCycle, RecordingClient]) -> None:
    cycle, _ = setup
    cycle.run_once()
    assert cycle.healthy(interval_s=5)
    cycle.completed_at -= 60
    assert not cycle.healthy(interval_s=5)


def test_metric_series_go_with_their_specserver(
    setup: tuple[FaultyCycle, RecordingClient],
) -> None:
    cycle, _ = setup
    cycle.run_once()
    opmetrics.MODE.labels("llm", "good").set(1)
    opmetrics.DECISIONS.labels("llm", "good", "disable", "TTFTSLOBreached").inc()
    opmetrics.MODE.labels("llm", "bad").set(0)
    cycle.cache.remove(KIND, "llm", "good")
    cycle.run_once()
    names = {
        s.labels.get("specserver")
        for metric in opmetrics.REGISTRY.collect()
        for s in metric.samples
        if s.labels.get("namespace") == "llm"
    }
    assert "good" not in names and "bad" in names  # the others' series stay
