"""The signal window through a real Prometheus: a TTFT spike leaves a short window's quantile
once the spike is older than the window, while the default minute still reports it.

The engine's exporter is ours (a loopback server exposing SGLang's TTFT histogram whose counts
grow with the clock: 4 s of slow first tokens, then fast ones); Prometheus scrapes it every
second and the operator's ``SignalCache`` reads it with its grouped queries. The running
gauge, which SGLang sets only at its reports and holds between, is read as the most each pod
reported within the last quarter of the window."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from loopbackhttp import Answer, serve, stop
from specserver_advisor.policy.promql import signal_queries
from specserver_operator.reconcile.signals import SignalCache, query

pytestmark = pytest.mark.cluster

#: Requests per second the exporter counts; the first SLOW_S seconds take 8 s to first token.
RATE, SLOW_S = 10, 4.0


class Exporter:
    """``/metrics`` with ``sglang:time_to_first_token_seconds`` and ``num_running_reqs``."""

    def __init__(self) -> None:
        self.start: float | None = None
        self.running, self.queued = 4, 0
        self.server = serve(self.answer)[0]
        self.port = self.server.server_address[1]

    def answer(self, _path: str, _headers: dict[str, str]) -> Answer:
        return 200, {"Content-Type": "text/plain; version=0.0.4"}, self.exposition().encode()

    def exposition(self) -> str:
        elapsed = 0.0 if self.start is None else time.monotonic() - self.start
        slow = int(RATE * min(elapsed, SLOW_S))
        fast = int(RATE * max(0.0, elapsed - SLOW_S))
        name = "sglang:time_to_first_token_seconds"
        return (
            f"# TYPE {name} histogram\n"
            f'{name}_bucket{{le="1.0"}} {fast}\n'
            f'{name}_bucket{{le="10.0"}} {fast + slow}\n'
            f'{name}_bucket{{le="+Inf"}} {fast + slow}\n'
            f"{name}_sum {fast * 0.5 + slow * 8.0}\n"
            f"{name}_count {fast + slow}\n"
            "# TYPE sglang:num_running_reqs gauge\n"
            f"sglang:num_running_reqs {self.running}\n"
            "# TYPE sglang:num_queue_reqs gauge\n"
            f"sglang:num_queue_reqs {self.queued}\n"
        )


@pytest.fixture
def exporter() -> Iterator[Exporter]:
    server = Exporter()
    yield server
    stop(server.server)


def test_a_ttft_spike_leaves_a_short_window_and_stays_in_the_minute(
    prom: Any, exporter: Exporter
) -> None:
    labels = {"namespace": "llm", "specserver": "window"}
    prom.write_targets([{"targets": [f"127.0.0.1:{exporter.port}"], "labels": labels}])
    try:
        deadline = time.monotonic() + 30
        while not query(prom.url, 'sglang:num_running_reqs{specserver="window"}'):
            assert time.monotonic() < deadline, "Prometheus never scraped the exporter"
            time.sleep(0.5)
        exporter.start = time.monotonic()
        # The spike (4 s), then 10 s of window, 1 s of scrape and 3 s of margin.
        time.sleep(SLOW_S + 10 + 4)
        short = SignalCache(prom.url, min_interval_s=0, allowed=(prom.url,), window_s=10)
        minute = SignalCache(prom.url, min_interval_s=0, allowed=(prom.url,), window_s=60)
        short.refresh()
        minute.refresh()
        assert short.last_error is None and minute.last_error is None
        fresh, held = short.get("llm", "window"), minute.get("llm", "window")
        assert fresh is not None and held is not None
        # The last slow first token is 14 s old: outside 10 s, inside the minute.
        assert fresh.ttft_p99_s is not None and fresh.ttft_p99_s <= 1.0
        assert held.ttft_p99_s is not None and held.ttft_p99_s > 5.0
    finally:
        prom.write_targets([])


def _scraped(prom: Any, metric: str, value: float) -> None:
    """Wait until Prometheus holds ``value`` as the newest sample of ``metric``."""
    deadline = time.monotonic() + 30
    while True:
        got = query(prom.url, f'sglang:{metric}{{specserver="load"}}')
        if got and float(got[0]["value"][1]) == value:
            return
        assert time.monotonic() < deadline, f"Prometheus never scraped {metric} {value}"
        time.sleep(0.25)


def test_the_load_is_the_most_the_engine_reported_within_the_window(
    prom: Any, exporter: Exporter
) -> None:
    """SGLang reports a wave that starts from an empty batch as 0 running until its 40th
    decode batch (``metrics_reporter``); the policy must not read that as no load."""
    labels = {"namespace": "llm", "specserver": "load"}
    prom.write_targets([{"targets": [f"127.0.0.1:{exporter.port}"], "labels": labels}])
    try:
        exporter.running, exporter.queued = 8, 3
        _scraped(prom, "num_queue_reqs", 3)
        exporter.running, exporter.queued = 0, 0  # the next wave's prefill report
        _scraped(prom, "num_running_reqs", 0)
        _scraped(prom, "num_queue_reqs", 0)
        # A 40 s window: running is the most reported in its last quarter, 10 s.
        cache = SignalCache(prom.url, min_interval_s=0, allowed=(prom.url,), window_s=40)
        cache.refresh()
        seen = cache.get("llm", "load")
        assert cache.last_error is None and seen is not None
        # The batch is the window's most; the queue the newest report (a moment's queue
        # behind a chunked prefill is not held for the window).
        assert (seen.running, seen.queued) == (8, 0)
    finally:
        prom.write_targets([])


def test_the_running_maximum_spans_a_quarter_of_the_window() -> None:
    """Long enough to hold a report across SGLang's 40-batch gaps (a quarter of a window of at
    least four scrapes spans one or more), short enough to be gone before the rates forget
    the traffic (a whole window's maximum outlived it: an idle engine read as running with
    no output, and the policy learned a score of 0 there)."""
    assert "[15s]" in signal_queries(window="1m")["running"]
    assert "[15s]" in signal_queries(window="60s")["running"]
    assert "[5s]" in signal_queries(window="20s")["running"]
    assert "[60s]" in signal_queries(window="60s")["output_tok_s"]
