"""observe.scheduling lists an engine's pods and events only while an owned engine workload is
not Ready (a fleet at rest lists no pods): at once when such a workload appears or changes, then
every SCHEDULING_REFRESH_S, doubling up to SCHEDULING_MAX_S while nothing read changes (a fleet
stuck Pending costs few LISTs); an unreadable list (no RBAC) is no cause, not an error."""

from __future__ import annotations

from typing import Any

from specserver_operator.core.passcache import PassCache
from specserver_operator.kube.errors import ApiError
from specserver_operator.reconcile import observe

UID = "uid-1"


def workload(ready: int, owner: str = UID, version: str = "1") -> dict[str, Any]:
    return {
        "kind": "Deployment",
        "metadata": {
            "name": "llm",
            "generation": 1,
            "resourceVersion": version,
            "ownerReferences": [{"uid": owner}],
        },
        "spec": {"replicas": 1},
        "status": {"observedGeneration": 1, "readyReplicas": ready, "updatedReplicas": 1},
    }


class Lister:
    def __init__(self, fail: bool = False) -> None:
        self.calls = 0
        self.fail = fail

    def list_scheduling(self, namespace: str, name: str) -> tuple[list[Any], list[Any]]:
        self.calls += 1
        if self.fail:
            raise ApiError("pods is forbidden", 403)
        return [{"metadata": {"name": "p"}}], []


def read(client: Lister, found: dict[Any, Any], now: float, memo: PassCache) -> Any:
    return observe.scheduling(client, "ns", "llm", UID, found, now, memo)  # type: ignore[arg-type]


def test_ready_workloads_list_nothing() -> None:
    client, memo = Lister(), PassCache()
    assert read(client, {("Deployment", "llm"): workload(1)}, 0.0, memo) == ((), ())
    # someone else's workload that is not Ready is not ours to explain
    assert read(client, {("Deployment", "llm"): workload(0, "other")}, 0.0, memo) == ((), ())
    assert client.calls == 0


def test_not_ready_lists_at_most_every_refresh_backing_off_while_nothing_changes() -> None:
    client, memo = Lister(), PassCache()
    found = {("Deployment", "llm"): workload(0)}
    base = observe.SCHEDULING_REFRESH_S
    pods, _ = read(client, found, 100.0, memo)
    assert pods == ({"metadata": {"name": "p"}},)
    read(client, found, 100.0 + base / 2, memo)
    assert client.calls == 1
    # Read at 100 + base, then the same answer doubles the wait each time, up to the cap.
    now, reads = 100.0, []
    for _ in range(2000):
        now += 1.0
        before = client.calls
        read(client, found, now, memo)
        if client.calls > before:
            reads.append(now)
    gaps = [b - a for a, b in zip([100.0, *reads], reads, strict=False)]
    assert gaps[:4] == [base, 2 * base, 4 * base, 8 * base]
    assert max(gaps) == observe.SCHEDULING_MAX_S
    # The workload changes (its resourceVersion): read at once, back to the base interval.
    moved = {("Deployment", "llm"): workload(0, version="2")}
    before = client.calls
    read(client, moved, now + 1.0, memo)
    assert client.calls == before + 1
    assert memo.scheduling[UID][2] == base
    read(client, {("Deployment", "llm"): workload(1)}, now + 2.0, memo)  # Ready: forgotten
    assert UID not in memo.scheduling


def test_unreadable_is_no_cause() -> None:
    client, memo = Lister(fail=True), PassCache()
    assert read(client, {("Deployment", "llm"): workload(0)}, 0.0, memo) == ((), ())
