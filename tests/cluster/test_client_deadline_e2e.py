"""Every API call has one total deadline (client.py, calldeadline.py), not a timeout per read.

The operator's client reaches the real apiserver through a loopback TCP relay that, when told
to, passes the apiserver's bytes back one at a time every few hundredths of a second: each read
gets its byte long before any per-read timeout, so without a total deadline one call (TLS
handshake and answer, a few kilobytes) would take minutes."""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import threading
import time
from typing import Any
from urllib.parse import urlparse

import kopf
import pytest

from conftest import KubeHandle
from specserver_operator.client import ApiError, Connection, KubeClient

pytestmark = pytest.mark.cluster

#: Seconds between the bytes of a dripped answer.
DRIP_S = 0.05
DEADLINE_S = 2.0


class DripRelay:
    """A loopback TCP relay to ``host:port``; while ``dripping`` is set, the server's bytes go
    back to the client one at a time, ``DRIP_S`` apart."""

    def __init__(self, host: str, port: int) -> None:
        self.upstream = (host, port)
        self.dripping = threading.Event()
        self.stopped = threading.Event()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        self.sock.settimeout(0.2)
        while not self.stopped.is_set():
            try:
                client = self.sock.accept()[0]
            except OSError:
                continue
            server = socket.create_connection(self.upstream, timeout=10)
            self.open += [client, server]
            threading.Thread(target=self._pump, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, True), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, back: bool) -> None:
        src.settimeout(None)
        try:
            while not self.stopped.is_set():
                data = src.recv(65536)
                if not data:
                    break
                if not (back and self.dripping.is_set()):
                    dst.sendall(data)
                    continue
                for i in range(len(data)):
                    if self.stopped.wait(DRIP_S):
                        return
                    dst.sendall(data[i : i + 1])
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.stopped.set()
        for s in self.open:
            s.close()
        self.sock.close()


def relayed_client(kube: KubeHandle, relay: DripRelay, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("KUBECONFIG", str(kube.kubeconfig))
    info = kopf.login_with_kubeconfig(settings=kopf.OperatorSettings())
    assert info is not None
    connection = Connection.from_kopf(info)
    client = KubeClient(dataclasses.replace(connection, server=f"https://127.0.0.1:{relay.port}"))
    client.deadline_s = DEADLINE_S
    return client


def dripped_call(client: KubeClient, namespace: str) -> tuple[Any, float]:
    """One read through the dripping relay, on its own thread: (its answer or error, seconds)."""
    outcome: list[Any] = []

    def call() -> None:
        started = time.monotonic()
        try:
            outcome.append(client.get_configmap_data(namespace, "probe"))
        except ApiError as exc:
            outcome.append(exc)
        outcome.append(time.monotonic() - started)

    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    worker.join(30)  # a dripped answer takes tens of seconds (a few hundred bytes at DRIP_S)
    assert not worker.is_alive(), "the dripped call was still waiting after 30 s"
    return outcome[0], outcome[1]


def test_a_dripping_api_server_is_cut_off_at_the_calls_deadline(
    kube: KubeHandle, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    kube.kubectl("-n", namespace, "create", "configmap", "probe", "--from-literal=k=v")
    server = urlparse(kube.server)
    relay = DripRelay(server.hostname or "127.0.0.1", server.port or 443)
    try:
        client = relayed_client(kube, relay, monkeypatch)
        assert client.get_configmap_data(namespace, "probe") == {"k": "v"}  # the relay relays
        # The connection is open (kept in the pool): the answer itself is dripped.
        relay.dripping.set()
        error, took = dripped_call(client, namespace)
        assert isinstance(error, ApiError) and error.status == 0  # transient, as unreachable
        assert f"no complete answer within {DEADLINE_S:g}s" in str(error)
        assert DEADLINE_S <= took < DEADLINE_S + 5
        # A new connection: its TLS handshake is dripped too.
        client.pool.clear()
        error, took = dripped_call(client, namespace)
        assert isinstance(error, ApiError) and "no complete answer" in str(error)
        assert took < DEADLINE_S + 5
        # Answered promptly again: the same client works (the cut connection was dropped).
        relay.dripping.clear()
        assert client.get_configmap_data(namespace, "probe") == {"k": "v"}
    finally:
        relay.close()
