"""A cycle decides every pass on its own thread and hands the writes of the passes that write to
a few writer threads (cycle.py ``WRITERS``): many new SpecServers get their children a bounded
number of calls at a time, one object's failed write stays its own, and a pass that writes
nothing never leaves the cycle thread.

The controller seam is the real ``controller.reconcile`` on the fake client of
test_autopilot.py; the cycle's is a ``Cycle`` whose ``_pass`` is replaced (as in
test_faults.py), with the recording client of test_faults.py."""

from __future__ import annotations

import copy
import threading
import time
from typing import Any

from operatorfakes import SPEC, STEADY, FakeClient, Signals
from test_faults import RecordingClient, specserver

from specserver_operator.core.hashes import HASH_ANNOTATION, object_hash
from specserver_operator.kube.client import KubeClient
from specserver_operator.kube.errors import ApiError
from specserver_operator.loop.cycle import Cycle, Rest
from specserver_operator.reconcile import controller

STAMP = "2026-01-01T00:16:40Z"


class StoringClient(FakeClient):
    """test_autopilot's fake, keeping the Service too (so a pass can find nothing to write)."""

    def __init__(self) -> None:
        super().__init__()
        self.service: dict[str, Any] | None = None

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        if kind == "Service":
            return copy.deepcopy(self.service)
        return super().get(kind, namespace, name)

    def apply(
        self, obj: dict[str, Any], desired_hash: str | None = None, force: bool = False
    ) -> dict[str, Any] | None:
        if obj["kind"] != "Service":
            return super().apply(obj, desired_hash, force)
        self.writes += 1
        self.service = copy.deepcopy(obj)
        notes = self.service["metadata"].setdefault("annotations", {})
        notes[HASH_ANNOTATION] = desired_hash or object_hash(obj)
        return copy.deepcopy(self.service)


def deferred_pass(client: StoringClient, body: dict[str, Any]) -> controller.Outcome:
    """The cycle's pass over ``body`` (steady signals), its writes deferred."""
    return controller.reconcile(
        client,
        body,
        STAMP,
        signals=Signals(**STEADY),  # type: ignore[arg-type]
        now_ts=1000.0,
        defer=True,
    )


def test_a_deferred_pass_writes_nothing_until_its_rest_runs() -> None:
    client = StoringClient()
    body = copy.deepcopy(SPEC)
    out = deferred_pass(client, body)
    assert out.rest is not None and client.writes == 0 and client.deployment is None
    done = out.rest()
    assert client.writes == 3 and client.deployment is not None  # Deployment, Service, status
    assert client.service is not None and done.rest is None and done.wrote_status
    # The next pass finds everything as written: nothing to defer, nothing written.
    body["status"] = copy.deepcopy(client.status)
    again = deferred_pass(client, body)
    assert again.rest is None and client.writes == 3


class WritingCycle(Cycle):
    """A cycle whose every pass writes: the write sleeps ``write_s`` and records how many ran
    at once and on which thread; names in ``broken`` fail their write."""

    write_s: float
    broken: dict[str, Exception]
    raced: set[str]

    def setup(self) -> None:
        self.write_s, self.broken, self.raced = 0.2, {}, set()
        self.in_flight, self.peak = 0, 0
        self.written: list[tuple[str, str]] = []
        self.counter = threading.Lock()

    def _pass(self, client: KubeClient, body: dict[str, Any], defer: bool = False) -> Rest | None:
        meta = body["metadata"]
        name = meta["name"]
        if name in self.raced:  # a kopf handler's pass wrote after this one decided
            self.handled_at[meta["uid"]] = time.monotonic() + 60

        def rest() -> None:
            with self.counter:
                self.in_flight += 1
                self.peak = max(self.peak, self.in_flight)
            try:
                time.sleep(self.write_s)
                if name in self.broken:
                    raise self.broken[name]
                self.written.append((name, threading.current_thread().name))
            finally:
                with self.counter:
                    self.in_flight -= 1

        if defer:
            return rest
        rest()
        return None


def writing_cycle(names: list[str], writers: int) -> tuple[WritingCycle, RecordingClient]:
    client = RecordingClient()
    client.bodies = [specserver(n) for n in names]
    cycle = WritingCycle(client, writers=writers)
    cycle.setup()
    return cycle, client


def test_writes_run_a_bounded_number_at_a_time_off_the_cycle_thread() -> None:
    names = [f"s{i:02d}" for i in range(16)]
    cycle, _ = writing_cycle(names, writers=4)
    assert cycle.run_once() == 16
    assert sorted(n for n, _ in cycle.written) == names  # the cycle waited for every write
    # Counted, not timed: four writes were in flight at once (one after another the peak is 1),
    # never more, each on a writer thread.
    assert cycle.peak == 4
    assert all(thread.startswith("specserver-write") for _, thread in cycle.written)


def test_without_writers_every_pass_writes_on_the_cycle_thread_in_turn() -> None:
    cycle, _ = writing_cycle(["a", "b", "c"], writers=0)
    assert cycle.run_once() == 3
    assert cycle.peak == 1 and cycle.pool is None
    assert {thread for _, thread in cycle.written} == {threading.current_thread().name}


def test_a_failed_deferred_write_is_its_objects_own_fault() -> None:
    names = ["bad", *[f"good{i}" for i in range(7)]]
    cycle, client = writing_cycle(names, writers=4)
    cycle.broken = {"bad": ApiError("Deployment llm/bad: 422 spec.replicas: Invalid value", 422)}
    assert cycle.run_once() == 7
    assert sorted(n for n, _ in cycle.written) == names[1:]
    events = [c[1] for c in client.calls if c[0] == "post_event"]
    assert [(e[0], e[2]) for e in events] == [("bad", "ReconcileFailed")]
    patches = [c[1] for c in client.calls if c[0] == "patch_status"]
    assert [p[0] for p in patches] == ["bad"]
    ready = next(c for c in patches[0][1]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False" and "422" in ready["message"]
    # Backing off: the next cycle neither decides nor writes it, and posts nothing again.
    client.calls.clear()
    cycle.written.clear()
    cycle.run_once()
    assert sorted(n for n, _ in cycle.written) == names[1:] and client.calls == []
    # Fixed: its fault is cleared only once its write went through.
    cycle.broken.clear()
    cycle.faults.by_uid["uid-bad"].retry_at = 0.0
    cycle.run_once()
    assert "bad" in [n for n, _ in cycle.written] and "uid-bad" not in cycle.faults.by_uid


def test_a_write_a_handler_overtook_is_dropped() -> None:
    cycle, _ = writing_cycle(["raced", "other"], writers=2)
    cycle.raced = {"raced"}
    assert cycle.run_once() == 1
    assert [n for n, _ in cycle.written] == ["other"]


def test_the_connection_pool_keeps_a_connection_per_writer() -> None:
    from specserver_operator.kube import client
    from specserver_operator.loop import cycle

    assert cycle.WRITERS < client.POOL_CONNECTIONS  # else urllib3 opens and drops the rest


class ShortLease:
    """An elector whose lease lasts ``lease_s`` from each renewal (the seam of leader.py)."""

    def __init__(self, lease_s: float) -> None:
        self.lease_s, self.renewals, self.until = lease_s, 0, 0.0
        self.lock = threading.Lock()

    def leading(self) -> bool:
        return time.monotonic() < self.until

    def try_lead(self) -> bool:
        with self.lock:
            self.renewals += 1
            self.until = time.monotonic() + self.lease_s
            return True


def test_writes_that_outlast_the_lease_renew_it_instead_of_being_dropped() -> None:
    """The cycle thread waits for its writers: they renew the lease when it falls due (a
    thousand first writes take minutes; the lease lasts seconds)."""
    names = [f"s{i:02d}" for i in range(12)]
    cycle, _ = writing_cycle(names, writers=2)
    lease = ShortLease(lease_s=0.3)
    cycle.elector = lease  # type: ignore[assignment]
    lease.try_lead()
    assert cycle.run_once() == 12  # 6 rounds of 0.2 s on 2 writers: 1.2 s, four leases
    assert sorted(n for n, _ in cycle.written) == names
    assert lease.renewals >= 3
