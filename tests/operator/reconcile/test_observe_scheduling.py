"""observe.scheduling lists a namespace's engine pods and FailedCreate events only while an
owned engine workload there is not Ready (a fleet at rest lists no pods); one read answers every
SpecServer of the namespace that waits (a thousand Pending engines cost one paged LIST, not a
thousand); read again when a SpecServer's waiting workloads change after the last read (at most
every SCHEDULING_SHARE_S), else every SCHEDULING_REFRESH_S, doubling up to SCHEDULING_MAX_S
while nothing read changes; an unreadable list (no RBAC) is no cause, not an error."""

from __future__ import annotations

from typing import Any

from specserver_operator.core.passcache import PassCache
from specserver_operator.kube.client import name_selector
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


def pod(owner: str) -> dict[str, Any]:
    return {"metadata": {"name": f"{owner}-p", "labels": {"specserver.io/name": owner}}}


class Lister:
    def __init__(self, fail: bool = False, names: tuple[str, ...] = ("llm",)) -> None:
        self.calls = 0
        self.fail = fail
        self.names = names
        self.asked: list[Any] = []

    def list_scheduling(self, namespace: str, names: Any = None) -> tuple[list[Any], list[Any]]:
        self.calls += 1
        self.asked.append(names)
        if self.fail:
            raise ApiError("pods is forbidden", 403)
        return [pod(n) for n in self.names], []


def read(
    client: Lister, found: dict[Any, Any], now: float, memo: PassCache, name: str = "llm"
) -> Any:
    uid = UID if name == "llm" else f"uid-{name}"
    return observe.scheduling(client, "ns", name, uid, found, now, memo)  # type: ignore[arg-type]


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
    assert pods == (pod("llm"),)
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
    read(client, moved, reads[-1] + observe.SCHEDULING_SHARE_S, memo)
    assert client.calls == before + 1
    assert memo.scheduling_reads["ns"].interval == base
    read(client, {("Deployment", "llm"): workload(1)}, now + 200.0, memo)  # Ready: forgotten
    assert UID not in memo.scheduling


def test_one_read_answers_every_specserver_of_the_namespace() -> None:
    names = tuple(f"e{i}" for i in range(50))
    client, memo = Lister(names=names), PassCache()
    for i, name in enumerate(names):
        found = {("Deployment", name): {**workload(0, owner=f"uid-{name}")}}
        pods, _ = read(client, found, 100.0 + i * 0.01, memo, name)
        # the first read names only e0; the others wait for the next one (SCHEDULING_SHARE_S)
        assert pods == ((pod(name),) if i == 0 else ())
    assert client.calls == 1
    later = 100.0 + observe.SCHEDULING_SHARE_S + 1.0
    for name in names:  # one new read, naming all of them, answers every one
        found = {("Deployment", name): workload(0, owner=f"uid-{name}")}
        assert read(client, found, later, memo, name)[0] == (pod(name),)  # its own pods only
    assert client.calls == 2
    # Past SCHEDULING_NAMES waiting SpecServers, the list takes every engine pod of the
    # namespace; below it, it names them (a fleet at rest beside them is not read).
    assert client.asked[0] == ["e0"]
    assert client.asked[1] == sorted(names)
    few = Lister(names=("a", "b"))
    memo = PassCache()
    read(few, {("Deployment", "a"): workload(0, owner="uid-a")}, 0.0, memo, "a")
    read(few, {("Deployment", "b"): workload(0, owner="uid-b")}, 5.0, memo, "b")
    assert few.asked == [["a"], ["a", "b"]]


def test_past_the_name_limit_every_engine_pod_is_listed() -> None:
    names = tuple(f"e{i}" for i in range(observe.SCHEDULING_NAMES + 1))
    client, memo = Lister(names=names), PassCache()
    for i, name in enumerate(names):
        read(client, {("Deployment", name): workload(0, owner=f"uid-{name}")}, i * 3.0, memo, name)
    assert client.asked[-2] is not None and len(client.asked[-2]) == observe.SCHEDULING_NAMES
    assert client.asked[-1] is None


def test_the_selector_names_the_engines() -> None:
    assert name_selector(["a", "b"]) == "specserver.io/name in (a,b)"
    assert name_selector(None) == "specserver.io/name"


def test_a_change_after_the_read_is_read_within_the_share_interval() -> None:
    client, memo = Lister(), PassCache()
    read(client, {("Deployment", "llm"): workload(0)}, 100.0, memo)
    moved = {("Deployment", "llm"): workload(0, version="2")}
    read(client, moved, 100.5, memo)  # too soon after the last read: that read answers
    assert client.calls == 1
    read(client, moved, 100.0 + observe.SCHEDULING_SHARE_S, memo)
    assert client.calls == 2
    read(client, moved, 100.0 + observe.SCHEDULING_SHARE_S + 1.0, memo)  # seen: no more
    assert client.calls == 2


def test_unreadable_is_no_cause() -> None:
    client, memo = Lister(fail=True), PassCache()
    assert read(client, {("Deployment", "llm"): workload(0)}, 0.0, memo) == ((), ())


def test_a_failed_read_keeps_what_the_last_one_found() -> None:
    client, memo = Lister(), PassCache()
    found = {("Deployment", "llm"): workload(0)}
    assert read(client, found, 100.0, memo)[0] == (pod("llm"),)
    client.fail = True
    later = 100.0 + observe.SCHEDULING_REFRESH_S
    assert read(client, found, later, memo)[0] == (pod("llm"),)  # not wiped by a 403/429
    assert client.calls == 2


def test_a_specserver_the_last_read_did_not_name_is_read_soon() -> None:
    client, memo = Lister(names=("a", "b")), PassCache()
    read(client, {("Deployment", "a"): workload(0, owner="uid-a")}, 100.0, memo, "a")
    # b first waits at the very second of a's read (same timestamp): that read did not name it
    b = {("Deployment", "b"): workload(0, owner="uid-b")}
    assert read(client, b, 100.0, memo, "b")[0] == ()
    assert read(client, b, 100.0 + observe.SCHEDULING_SHARE_S, memo, "b")[0] == (pod("b"),)
    assert client.asked[-1] == ["a", "b"]


def test_a_clock_stepped_back_reads_again() -> None:
    client, memo = Lister(), PassCache()
    found = {("Deployment", "llm"): workload(0)}
    read(client, found, 100.0, memo)
    read(client, found, 50.0, memo)
    assert client.calls == 2


def test_reads_of_a_namespace_nobody_waits_in_are_forgotten() -> None:
    client, memo = Lister(), PassCache()
    read(client, {("Deployment", "llm"): workload(0)}, 100.0, memo)
    assert "ns" in memo.scheduling_reads
    memo.prune(set())  # the SpecServer is gone
    assert memo.scheduling_reads == {}
