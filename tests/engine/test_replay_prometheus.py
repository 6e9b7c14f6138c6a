"""``specserver-advisor replay --prometheus`` reads the same signals with range queries."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from prometheus_api_client import PrometheusConnect

from specserver_advisor.cli.main import main
from specserver_engine import loadgen
from stack import QWEN_EAGLE3

pytestmark = pytest.mark.cluster


def test_replay_from_prometheus(
    prom: Any, start_simulator: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    sim = start_simulator(
        *QWEN_EAGLE3, "--time-scale", "10", "--sim-startup-seconds", "0", "--enable-metrics"
    )
    prom.write_targets(
        [
            {
                "targets": [f"127.0.0.1:{sim.port}"],
                "labels": {"namespace": "replay", "specserver": "probe"},
            }
        ]
    )
    client = PrometheusConnect(url=prom.url, disable_ssl=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not client.custom_query(
        'sglang_num_running_reqs{specserver="probe"}'
    ):
        time.sleep(0.5)
    seg = loadgen.Segment(4, 8.0, None, "math")
    asyncio.run(loadgen.run_segment(sim.url, seg, 128, 64, True))
    time.sleep(2)
    assert (
        main(
            [
                "replay",
                "--prometheus",
                prom.url,
                "--specserver",
                "replay/probe",
                "--since",
                "60s",
                "--step",
                "2s",
                "--format",
                "jsonl",
            ]
        )
        == 0
    )
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) >= 5
    assert max(r["running"] or 0 for r in rows) > 0
    accepts = [r["accept_length"] for r in rows if r["accept_length"]]
    assert accepts and 1.5 < max(accepts) < 4.0
    assert {r["reason"] for r in rows} <= {
        "WithinThresholds",
        "MetricsStale",
        "BreachPending",
        "AcceptLengthLow",
        "EnablePending",
    }


def test_replay_prometheus_needs_a_specserver(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "--prometheus", "http://127.0.0.1:9"]) == 2
    assert "--specserver NAMESPACE/NAME" in capsys.readouterr().err
