"""Leader election on a Lease (leader.py): one replica leads, the other stands by and takes
over only after the Lease went unrenewed for its duration, judged by its own clock. The Lease
store is a fake of our own client seam with the API server's optimistic concurrency (a write
with a stale resourceVersion is refused with 409)."""

from __future__ import annotations

import copy
import threading
from typing import Any

import pytest

from specserver_operator.kube.client import KubeClient
from specserver_operator.kube.errors import ApiError
from specserver_operator.loop import leader
from specserver_operator.loop.cycle import Cycle


class LeaseStore(KubeClient):
    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0

    def get_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        return copy.deepcopy(self.lease)

    def create_lease(self, namespace: str, lease: dict[str, Any]) -> dict[str, Any]:
        if self.lease is not None:
            raise ApiError("exists", 409)
        self.version += 1
        self.lease = copy.deepcopy(lease)
        self.lease["metadata"]["resourceVersion"] = str(self.version)
        return copy.deepcopy(self.lease)

    def replace_lease(self, namespace: str, lease: dict[str, Any]) -> dict[str, Any]:
        assert self.lease is not None
        if lease["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
            raise ApiError("conflict", 409)
        return self.create_lease_again(lease)

    def create_lease_again(self, lease: dict[str, Any]) -> dict[str, Any]:
        self.lease = None
        return self.create_lease("", lease)

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"unexpected client call {name}")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(leader.time, "monotonic", c)
    return c


def test_one_leads_the_other_stands_by_and_takes_over_after_expiry(clock: Clock) -> None:
    store = LeaseStore()
    a = leader.Elector(store, "ops", identity="a", lease_s=15)
    b = leader.Elector(store, "ops", identity="b", lease_s=15)
    assert a.try_lead() and not b.try_lead()
    for _ in range(10):  # a renews every 5 s: b never takes over
        clock.now += 5
        assert a.try_lead() and not b.try_lead()
    clock.now += 14  # a stopped renewing; b's own clock has not seen 15 s pass yet
    assert not b.try_lead()
    clock.now += 2
    assert b.try_lead()
    assert store.lease is not None and store.lease["spec"]["holderIdentity"] == "b"
    assert store.lease["spec"]["leaseTransitions"] == 1
    assert not a.try_lead()  # a comes back: b's renewals are fresh to it


def test_a_clean_stop_hands_over_at_once(clock: Clock) -> None:
    store = LeaseStore()
    a = leader.Elector(store, "ops", identity="a", lease_s=15)
    b = leader.Elector(store, "ops", identity="b", lease_s=15)
    assert a.try_lead() and not b.try_lead()
    a.release()
    assert not a.leading()
    clock.now += 1
    assert b.try_lead()


def test_two_candidates_racing_for_an_expired_lease_cannot_both_win(clock: Clock) -> None:
    store = LeaseStore()
    a = leader.Elector(store, "ops", identity="a", lease_s=15)
    assert a.try_lead()
    b = leader.Elector(store, "ops", identity="b", lease_s=15)
    c = leader.Elector(store, "ops", identity="c", lease_s=15)
    assert not b.try_lead() and not c.try_lead()
    clock.now += 20
    stale = store.get_lease("ops", "x")
    assert b.try_lead()
    store_get = store.get_lease
    store.get_lease = lambda ns, name: stale  # type: ignore[method-assign]
    assert not c.try_lead()  # c read the Lease before b's write: its PUT gets 409
    store.get_lease = store_get  # type: ignore[method-assign]
    assert store.lease is not None and store.lease["spec"]["holderIdentity"] == "b"


class Forbidding(LeaseStore):
    """The API server refuses one verb on the Lease with 403 (RBAC), until ``allow``."""

    def __init__(self, verb: str) -> None:
        super().__init__()
        self.refused: str | None = verb

    def _check(self, verb: str) -> None:
        if self.refused == verb:
            raise ApiError(f"Lease ops/specserver-operator: 403 cannot {verb} leases", 403)

    def get_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        self._check("get")
        return super().get_lease(namespace, name)

    def create_lease(self, namespace: str, lease: dict[str, Any]) -> dict[str, Any]:
        self._check("create")
        return super().create_lease(namespace, lease)


@pytest.mark.parametrize("verb", ["get", "create"])
def test_a_forbidden_lease_is_logged_once_naming_lease_namespace_and_verb(
    clock: Clock, verb: str, caplog: pytest.LogCaptureFixture
) -> None:
    from specserver_operator.metrics.registry import ELECTION_ROUNDS, LEASE_FORBIDDEN

    store = Forbidding(verb)
    a = leader.Elector(store, "ops", identity="a", lease_s=15)
    rounds = ELECTION_ROUNDS._value.get()
    with caplog.at_level("INFO", logger="specserver.leader"):
        for _ in range(20):
            clock.now += 5
            assert not a.try_lead()
    # Every refused round is counted (what the cluster test waits on: no cycle runs here).
    assert ELECTION_ROUNDS._value.get() - rounds == 20
    refusals = [r for r in caplog.records if "cannot" in r.getMessage()]
    assert len(refusals) == 1, [r.getMessage() for r in caplog.records]
    message = refusals[0].getMessage()
    assert refusals[0].levelname == "ERROR"
    assert f"cannot {verb} the Lease 'specserver-operator' in namespace 'ops'" in message
    assert f"lacks '{verb}' on leases.coordination.k8s.io" in message
    assert a.forbidden is not None and LEASE_FORBIDDEN._value.get() == 1
    store.refused = None  # the Role is granted: leads, says so once, the gauge drops
    caplog.clear()
    with caplog.at_level("INFO", logger="specserver.leader"):
        assert a.try_lead()
    assert a.forbidden is None and LEASE_FORBIDDEN._value.get() == 0
    assert any("allowed again" in r.getMessage() for r in caplog.records)


class Outage(LeaseStore):
    """The Lease store behind an API server that may not answer (every call times out while
    ``down``); each round stops the cycle's loop after it (one round per ``run_forever``)."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.stop = threading.Event()

    def get_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.stop.set()
        if self.down:
            raise ApiError(f"Lease {namespace}/{name}: API server unreachable: read timed out")
        return super().get_lease(namespace, name)


def test_a_standby_that_cannot_reach_the_api_server_completes_no_cycle() -> None:
    """Measured on the real stack before: through a stalled API server the probe answered 200,
    then 500 once no cycle had completed for 30 s, then 200 again for the rest of the outage
    (the lease had lapsed and every failed election round counted as a standby's cycle)."""
    store = Outage()
    other = leader.Elector(store, namespace="default", identity="other")  # type: ignore[arg-type]
    assert other.try_lead()
    cycle = Cycle(store, elector=leader.Elector(store, namespace="default", identity="me"))
    cycle.run_forever(store.stop, interval_s=5)
    assert cycle.healthy(interval_s=5)  # a standby whose round was answered
    # The API server stops answering; no cycle has completed for a minute.
    store.down = True
    cycle.completed_at -= 60
    for _ in range(3):
        store.stop.clear()
        cycle.run_forever(store.stop, interval_s=5)
        assert not cycle.elector.answered  # type: ignore[union-attr]
        assert not cycle.healthy(interval_s=5)
    # It answers again: the standby is healthy at once.
    store.down = False
    store.stop.clear()
    cycle.run_forever(store.stop, interval_s=5)
    assert cycle.healthy(interval_s=5)
