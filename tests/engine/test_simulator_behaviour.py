"""Simulated engine behaviour: the KV pool and cap make a queue, acceptance follows the prompt."""

from __future__ import annotations

import asyncio
import json
import statistics
import urllib.request
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from specserver_engine import loadgen
from stack import QWEN_EAGLE3

FAST = ["--time-scale", "50", "--sim-startup-seconds", "0", "--enable-metrics"]


def metric(url: str, name: str) -> float:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == name:
                return float(s.value)
    raise KeyError(name)


def run_load(
    url: str, users: int, requests: int, kind: str = "random", output_len: int = 64
) -> list[loadgen.Result]:
    seg = loadgen.Segment(users, None, requests, kind)
    results, _ = asyncio.run(loadgen.run_segment(url, seg, 256, output_len, True))
    return results


def test_cap_makes_a_queue_whose_wait_is_the_ttft(start_simulator: Any) -> None:
    # Slower than FAST so that a request's own time, not the host's noise, sets the waits.
    slow = ["--time-scale", "10", "--sim-startup-seconds", "0", "--enable-metrics"]
    sim = start_simulator(*QWEN_EAGLE3, "--max-running-requests", "2", *slow)
    results = run_load(sim.url, users=8, requests=16)
    assert len(results) == 16
    # Two slots for eight users: the last admitted waited while at least two whole requests
    # ran ahead of it in its slot (three, in the first wave), so its TTFT is longer than the
    # shortest request's whole lifetime by half again at least (two lifetimes on a quiet host).
    # Uncapped, every TTFT is a prefill: shorter than any request's lifetime. Host noise
    # lengthens the lifetimes it is compared with too (a loaded 2-core run measured 1.8x).
    last_admitted = max(r.ttft for r in results)
    shortest_request = min(r.latency for r in results)
    assert last_admitted > 1.5 * shortest_request
    with urllib.request.urlopen(f"{sim.url}/server_info", timeout=10) as resp:
        info = json.loads(resp.read())
    assert info["internal_states"][0]["effective_max_running_requests_per_dp"] == 2


def test_acceptance_depends_on_the_prompt_kind(start_simulator: Any) -> None:
    sim = start_simulator(*QWEN_EAGLE3, *FAST)
    code = [r.accept_length for r in run_load(sim.url, 4, 24, "code", 96) if r.accept_length]
    chat = [r.accept_length for r in run_load(sim.url, 4, 24, "chat", 96) if r.accept_length]
    assert statistics.fmean(code) > statistics.fmean(chat) + 0.15
    assert 2.3 < statistics.fmean(code) < 3.2
    assert metric(sim.url, "sglang:spec_accept_length") > 1.5


def test_speculation_off_commits_one_token_per_step(start_simulator: Any) -> None:
    sim = start_simulator("--model-path", "Qwen/Qwen3-8B", "--mem-fraction-static", "0.85", *FAST)
    results = run_load(sim.url, 2, 4)
    assert all(r.accept_length is None for r in results)
    assert all(len(r.itls) == r.output_tokens - 1 for r in results)
    assert metric(sim.url, "sglang:spec_accept_length") == 0.0


def test_bad_launch_fails_like_sglang(start_simulator: Any) -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "specserver_engine.cli",
            "simulate",
            "--model-path",
            "Qwen/Qwen3-8B",
            "--speculative-algorithm",
            "EAGLE3",
            "--speculative-eagle-topk",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "AssertionError" in done.stderr
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "specserver_engine.cli",
            "simulate",
            "--model-path",
            "Qwen/Qwen3-8B",
            "--cuda-graph-max-bs",
            "8",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "--cuda-graph-max-bs" in done.stderr
