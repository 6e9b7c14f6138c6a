"""A real Prometheus scrapes simulated engines; the operator's PromQL reads what the load did."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from prometheus_api_client import PrometheusConnect

from specserver_advisor.policy.promql import signal_queries
from specserver_engine import loadgen
from stack import QWEN_EAGLE3

pytestmark = pytest.mark.cluster

FAST = ["--time-scale", "10", "--sim-startup-seconds", "0", "--enable-metrics"]


def query_until(
    prom: PrometheusConnect, query: str, predicate: Any, timeout: float = 40.0
) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    result: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        result = prom.custom_query(query)
        if result and predicate(result):
            return result
        time.sleep(0.5)
    raise AssertionError(f"{query} never satisfied; last {result}")


def test_promql_signals_from_both_exposition_formats(prom: Any, start_simulator: Any) -> None:
    classic = start_simulator(*QWEN_EAGLE3, *FAST, "--sim-metrics-format", "classic")
    openmetrics = start_simulator(*QWEN_EAGLE3, *FAST, "--sim-metrics-format", "openmetrics")
    prom.write_targets(
        [
            {
                "targets": [f"127.0.0.1:{classic.port}"],
                "labels": {"namespace": "llm", "specserver": "classic", "pod": "classic-0"},
            },
            {
                "targets": [f"127.0.0.1:{openmetrics.port}"],
                "labels": {"namespace": "llm", "specserver": "om", "pod": "om-0"},
            },
        ]
    )
    client = PrometheusConnect(url=prom.url, disable_ssl=True)
    # Both spellings arrive: the metric name differs by exposition format.
    query_until(client, 'count({__name__="sglang:num_running_reqs"})', lambda r: True)
    query_until(client, 'count({__name__="sglang_num_running_reqs"})', lambda r: True)

    async def load() -> None:
        segs = [
            loadgen.run_segment(sim.url, loadgen.Segment(6, 6.0, None, "code"), 256, 64, True)
            for sim in (classic, openmetrics)
        ]
        await asyncio.gather(*segs)

    asyncio.run(load())
    queries = signal_queries({"namespace": "llm"})

    def per_server(rows: list[dict[str, Any]]) -> dict[str, float]:
        return {r["metric"]["specserver"]: float(r["value"][1]) for r in rows}

    accept = per_server(
        query_until(
            client,
            queries["accept_length"],
            lambda r: len(r) == 2 and all(float(x["value"][1]) > 1.5 for x in r),
        )
    )
    assert all(2.0 < v < 3.5 for v in accept.values()), accept
    ttft = per_server(query_until(client, queries["ttft_p99_s"], lambda r: len(r) == 2))
    assert all(0 < v < 60 for v in ttft.values()), ttft
    tokens = per_server(
        query_until(
            client,
            queries["output_tok_s"],
            lambda r: len(r) == 2 and all(float(x["value"][1]) > 0 for x in r),
        )
    )
    assert all(v > 0 for v in tokens.values())
    age = per_server(query_until(client, queries["age_s"], lambda r: len(r) == 2))
    assert all(v < 30 for v in age.values())
    for name in ("running", "queued"):
        assert set(per_server(client.custom_query(queries[name]))) == {"classic", "om"}
