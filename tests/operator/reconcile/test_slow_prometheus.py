"""A Prometheus that answers slowly: the policy never evaluates the same sample twice.

The signal refresh runs on its own thread (signals.py); the cycle waits for it a few seconds at
most and then reads the observations it holds, which are the previous refresh's while the slow
one is still out. The policy counts a breach per evaluation, so evaluating that sample again
would count its breach again and shorten the confirmation (``disableAfterBreaches``). Here a
real Prometheus scrapes a static engine exposition (overloaded: every evaluation is a breach)
and answers through a relay that holds every answer while told to; the passes are the real
``controller.reconcile`` on test_autopilot's fake of our client seam."""

from __future__ import annotations

import copy
import http.server
import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest
from operatorfakes import SPEC, FakeClient

from specserver_advisor.policy.promql import signal_queries
from specserver_operator.core import policystate
from specserver_operator.reconcile import controller
from specserver_operator.reconcile.signals import SignalCache, refresh_all

pytestmark = pytest.mark.cluster

#: An engine under load far above any crossover, its queue growing: each evaluation a breach.
EXPOSITION = """\
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs 48
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs 96
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length 2.6
"""
BREACHES = 3


def serve(handler: type[http.server.BaseHTTPRequestHandler]) -> http.server.ThreadingHTTPServer:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class Quiet(http.server.BaseHTTPRequestHandler):
    def log_message(self, *_: Any) -> None:
        pass

    def answer(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class Exporter(Quiet):
    def do_GET(self) -> None:
        self.answer(200, EXPOSITION.encode(), "text/plain; version=0.0.4")


class SlowRelay:
    """Forwards queries to the real Prometheus; while ``open`` is clear, holds each answer."""

    def __init__(self, upstream: str) -> None:
        self.open = threading.Event()
        self.open.set()
        self.held = 0
        relay = self

        class Handler(Quiet):
            def do_GET(self) -> None:
                if not relay.open.is_set():
                    relay.held += 1
                    relay.open.wait(60)
                with urllib.request.urlopen(upstream + self.path, timeout=30) as resp:
                    self.answer(resp.status, resp.read(), resp.headers["Content-Type"])

        self.server = serve(Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.open.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def relay(prom: Any) -> Iterator[SlowRelay]:
    exporter = serve(Exporter)
    port = exporter.server_address[1]
    labels = {"namespace": "llm", "specserver": "x", "pod": "x-0"}
    prom.write_targets([{"targets": [f"127.0.0.1:{port}"], "labels": labels}])
    relay = SlowRelay(prom.url)
    try:
        yield relay
    finally:
        relay.close()
        prom.write_targets([])
        exporter.shutdown()
        exporter.server_close()


def scraped(url: str) -> bool:
    query = signal_queries({"namespace": "llm", "specserver": "x"})["queued"]
    target = f"{url}/api/v1/query?" + urlencode({"query": query})
    with urllib.request.urlopen(target, timeout=5) as resp:
        result = json.loads(resp.read())["data"]["result"]
    return bool(result) and float(result[0]["value"][1]) == 96.0


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"no {what} within {timeout:.0f}s"
        time.sleep(0.2)


def breaches(client: FakeClient) -> int:
    state = policystate.parse(client.status.get("policyState"))
    return 0 if state is None else state.disable_breaches


def test_a_sample_a_slow_refresh_leaves_in_place_is_not_counted_again(
    relay: SlowRelay,
) -> None:
    wait_for(lambda: scraped(relay.url), 60, "engine series in Prometheus")
    controller.clear_caches()
    client = FakeClient()
    spec = copy.deepcopy(SPEC)
    spec["spec"]["autoSpeculation"]["disableAfterBreaches"] = BREACHES
    signals = SignalCache(relay.url, min_interval_s=0, allowed=(relay.url,))

    def cycle(t: float) -> controller.Outcome:
        """One cycle as cycle.py runs it: refresh (waiting briefly), then the pass."""
        refresh_all([signals], wait_s=0.2)
        body = copy.deepcopy(spec)
        body["status"] = copy.deepcopy(client.status)
        stamp = "2026-01-01T00:00:00Z"
        return controller.reconcile(client, body, stamp, signals=signals, now_ts=t)

    def refreshing() -> bool:
        return signals.running is not None and signals.running.is_alive()

    signals.refresh()
    cycle(1006.0)  # a sample: one breach
    wait_for(lambda: not refreshing(), 30, "the cycle's refresh")
    assert signals.last_error is None and client.status["lastDecisionReason"] == "BreachPending"
    assert breaches(client) == 1
    # Prometheus answers slowly: the next refresh stays out over several cycles, each of which
    # finds the sample it evaluated last.
    relay.open.clear()
    for k in range(1, 2 * BREACHES):
        out = cycle(1006.0 + 6 * k)
        assert refreshing()
        assert not any(reason == "SpeculationDisabled" for _, reason, _ in out.events)
    assert relay.held >= 1 and breaches(client) == 1 and "switch" not in client.status
    # Its answer arrives: a new sample, counted once.
    relay.open.set()
    wait_for(lambda: not refreshing(), 30, "the slow refresh")
    cycle(1100.0)
    assert breaches(client) == 2
