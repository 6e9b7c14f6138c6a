"""Every API call has one total deadline (client.py, kube/deadline.py), not a timeout per read,
and the Lease elector's calls a shorter one, derived from the lease (leader.py).

The operator's client reaches the real apiserver through a loopback TCP relay (relays.py) that,
when told to, passes the apiserver's bytes back one at a time every few hundredths of a second:
each read gets its byte long before any per-read timeout, so without a total deadline one call
(TLS handshake and answer, a few kilobytes) would take minutes. Or it stalls: no byte at all."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

import kopf
import pytest
from relays import PROMPT, STALL, Relay, drip

from specserver_operator.kube.client import CALL_DEADLINE_S, KubeClient
from specserver_operator.kube.connection import Connection
from specserver_operator.kube.errors import ApiError
from specserver_operator.loop.leader import LEASE_NAME, Elector
from stack import KubeHandle

pytestmark = pytest.mark.cluster

#: Seconds between the bytes of a dripped answer.
DRIP_S = 0.05
DEADLINE_S = 2.0


def relayed_client(
    kube: KubeHandle, relay: Relay, monkeypatch: pytest.MonkeyPatch, deadline_s: float = DEADLINE_S
) -> KubeClient:
    monkeypatch.setenv("KUBECONFIG", str(kube.kubeconfig))
    info = kopf.login_with_kubeconfig(settings=kopf.OperatorSettings())
    assert info is not None
    connection = Connection.from_kopf(info)
    client = KubeClient(dataclasses.replace(connection, server=f"https://127.0.0.1:{relay.port}"))
    client.deadline_s = deadline_s
    return client


def timed(call: Callable[[], Any], wait_s: float) -> tuple[Any, float]:
    """``call()`` on its own thread: (its answer or its ApiError, seconds it took)."""
    outcome: list[Any] = []

    def run() -> None:
        started = time.monotonic()
        try:
            outcome.append(call())
        except ApiError as exc:
            outcome.append(exc)
        outcome.append(time.monotonic() - started)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(wait_s)
    assert not worker.is_alive(), f"the call was still waiting after {wait_s:g} s"
    return outcome[0], outcome[1]


def dripped_call(client: KubeClient, namespace: str) -> tuple[Any, float]:
    """One read through the dripping relay: (its answer or error, seconds). Without a total
    deadline a dripped answer takes tens of seconds (a few hundred bytes at DRIP_S)."""
    return timed(lambda: client.get_configmap_data(namespace, "probe"), 30)


def test_a_dripping_api_server_is_cut_off_at_the_calls_deadline(
    kube: KubeHandle, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    kube.kubectl("-n", namespace, "create", "configmap", "probe", "--from-literal=k=v")
    server = urlparse(kube.server)
    relay = Relay(server.hostname or "127.0.0.1", server.port or 443)
    try:
        client = relayed_client(kube, relay, monkeypatch)
        assert client.get_configmap_data(namespace, "probe") == {"k": "v"}  # the relay relays
        # The connection is open (kept in the pool): the answer itself is dripped.
        relay.policy = drip(DRIP_S)
        error, took = dripped_call(client, namespace)
        assert isinstance(error, ApiError) and error.status == 0  # transient, as unreachable
        assert f"no complete answer within {DEADLINE_S:g}s" in str(error)
        assert DEADLINE_S <= took < DEADLINE_S + 5
        # A new connection: its TLS handshake is dripped too, and cut at the call's deadline
        # (not at the 5 s connect timeout the handshake runs under otherwise).
        client.pool.clear()
        error, took = dripped_call(client, namespace)
        assert isinstance(error, ApiError) and "no complete answer" in str(error)
        assert took < DEADLINE_S + 5
        # Answered promptly again: the same client works (the cut connection was dropped).
        relay.policy = PROMPT
        assert client.get_configmap_data(namespace, "probe") == {"k": "v"}
    finally:
        relay.close()


def renew_time(kube: KubeHandle, namespace: str) -> tuple[str, str]:
    """(holder, renewTime) of the operator's Lease, read straight from the apiserver."""
    done = kube.kubectl("-n", namespace, "get", "lease", LEASE_NAME, "-o", "json")
    spec = json.loads(done.stdout)["spec"]
    return spec["holderIdentity"], spec["renewTime"]


def test_a_stalled_lease_round_costs_one_renewal_not_the_calls_deadline(
    kube: KubeHandle, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The elector's Lease calls end well inside the lease, not at the 60 s deadline of every
    other call: a leader whose renewal the API server stalls gets its round back in time for
    the next cycle's, still leads meanwhile, and renews once the API server answers; a
    standby's stalled round ends as soon."""
    server = urlparse(kube.server)
    relay = Relay(server.hostname or "127.0.0.1", server.port or 443)
    try:
        client = relayed_client(kube, relay, monkeypatch, deadline_s=CALL_DEADLINE_S)
        elector = Elector(client, namespace=namespace, identity="relayed-leader")
        assert elector.try_lead()
        first = renew_time(kube, namespace)
        assert first[0] == "relayed-leader"
        relay.policy = STALL
        leads, took = timed(elector.try_lead, elector.lease_s)
        # Ended in time for the next cycle's round (every 5 s) to renew before the lease ends.
        assert took < elector.lease_s / 3, took
        assert leads is True  # the last renewal is younger than two thirds of the lease
        assert renew_time(kube, namespace) == first  # the stalled round renewed nothing
        # A standby's round (its try at taking over) is cut off just as soon.
        standby = Elector(client, namespace=namespace, identity="relayed-standby")
        leads, took = timed(standby.try_lead, standby.lease_s)
        assert leads is False and took < standby.lease_s / 3, took
        relay.policy = PROMPT
        leads, _took = timed(elector.try_lead, elector.lease_s)
        assert leads is True
        holder, renewed = renew_time(kube, namespace)
        assert holder == "relayed-leader" and renewed > first[1]
    finally:
        relay.close()
