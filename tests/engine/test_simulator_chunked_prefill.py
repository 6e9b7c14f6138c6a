"""The simulated engine prefills long prompts in chunks and pays the scheduler without overlap.

Through the HTTP API: a long prompt arriving while a request decodes stalls that request for all
of its ``--chunked-prefill-size`` chunks, or (``--enable-mixed-chunk``) for one chunk per step
while the new prompt's TTFT pays a decode step per chunk; with ``--disable-overlap-schedule``
every step, prefill chunks included, pays the scheduler's CPU in series. Figures come from
/metrics and ``meta_info`` in modelled seconds; bounds are one-sided or wide where the event
loop's lag on a loaded machine could move them, and exact only for ``sglang:gen_throughput``,
which sums modelled step times and no wall time.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import urllib.request
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from specserver_advisor.perf.constants import DEFAULT_CALIBRATION
from specserver_advisor.perf.model import prefill_tokens_time, schedule_host_time, step_time
from specserver_engine.sim.config import build_sim_config
from specserver_engine.sim.steps import PrefillPiece, decodes_run, prefill_pieces

PLAIN = ["--model-path", "Qwen/Qwen3-8B", "--mem-fraction-static", "0.85"]
FAST = ["--sim-startup-seconds", "0", "--enable-metrics"]
# The stall tests run in real time (--time-scale 1): the engine's clock is the wall clock times
# the scale, so a loaded machine's event-loop lag would be magnified into a modelled ITL.
LONG_PROMPT = 4000
CHUNK = 512


def samples(url: str) -> dict[str, float]:
    """Every sample of /metrics by name and labels (``le`` included)."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            le = s.labels.get("le")
            out[s.name + (f"{{le={float(le)}}}" if le else "")] = float(s.value)
    return out


def itls_above(metrics: dict[str, float], seconds: float) -> float:
    """Inter-token latencies observed above ``seconds`` (a bucket bound)."""
    name = "sglang:inter_token_latency_seconds"
    return metrics[f"{name}_count"] - metrics[f"{name}_bucket{{le={seconds}}}"]


async def decode_through_a_long_prompt(url: str) -> dict[str, Any]:
    """Stream a short request; once it decodes, send a long prompt; both to completion."""
    short = {
        "text": "hello " * 16,
        "stream": True,
        "sampling_params": {"max_new_tokens": 48, "ignore_eos": True},
    }
    long = {"input_ids": [7] * LONG_PROMPT, "sampling_params": {"max_new_tokens": 1}}
    async with aiohttp.ClientSession() as session:
        long_task: asyncio.Task[Any] | None = None
        async with session.post(f"{url}/generate", json=short) as resp:
            seen = 0
            async for raw in resp.content:
                if raw.startswith(b"data: {"):
                    seen += 1
                if seen == 4 and long_task is None:
                    long_task = asyncio.create_task(_post(session, f"{url}/generate", long))
        assert long_task is not None
        return await long_task


async def _post(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> Any:
    async with session.post(url, json=body) as resp:
        resp.raise_for_status()
        return await resp.json()


def modelled(*args: str) -> tuple[float, float]:
    """(the long prompt's whole prefill, one decode step of the short request) in seconds."""
    scn = build_sim_config([*PLAIN, *args], env={}).plan.scenario
    prefill = prefill_tokens_time(scn, LONG_PROMPT, False, DEFAULT_CALIBRATION)
    step = step_time(
        dataclasses.replace(scn, input_len=40, output_len=0), 1, False, DEFAULT_CALIBRATION
    )
    return prefill, step


def test_a_long_prompt_stalls_the_decodes_for_all_its_chunks(start_simulator: Any) -> None:
    args = ["--chunked-prefill-size", str(CHUNK)]
    sim = start_simulator(*PLAIN, *args, *FAST, "--time-scale", "1")
    long = asyncio.run(decode_through_a_long_prompt(sim.url))
    prefill, _ = modelled(*args)
    metrics = samples(sim.url)
    # The decoding request waited for the whole prefill once: one ITL above a second.
    assert prefill > 1.0
    assert itls_above(metrics, 1.0) >= 1
    # The long prompt's TTFT is its prefill (after the decode step in flight), not more steps.
    assert prefill <= long["meta_info"]["e2e_latency"] < prefill + 1.0


def test_mixed_chunks_carry_the_decodes_and_cost_the_new_prompt_a_step_per_chunk(
    start_simulator: Any,
) -> None:
    args = ["--chunked-prefill-size", str(CHUNK), "--enable-mixed-chunk"]
    sim = start_simulator(*PLAIN, *args, *FAST, "--time-scale", "1")
    long = asyncio.run(decode_through_a_long_prompt(sim.url))
    prefill, step = modelled(*args)
    chunks = -(-LONG_PROMPT // CHUNK)
    metrics = samples(sim.url)
    # No decode waited for the whole prompt (> 1 s): each slow step carried one chunk (~0.2 s)...
    assert prefill > 1.0
    assert itls_above(metrics, 1.0) == 0
    # ...and there was one such step per chunk.
    assert itls_above(metrics, 0.1) >= chunks
    # The new prompt paid a decode step per chunk on top of its prefill.
    assert long["meta_info"]["e2e_latency"] >= prefill + 0.8 * chunks * step


def gen_throughput(start_simulator: Any, *args: str) -> float:
    """``sglang:gen_throughput`` after one request of a long prompt and 8 output tokens."""
    sim = start_simulator(*PLAIN, *args, *FAST, "--time-scale", "20")
    body = {"input_ids": [7] * 2048, "sampling_params": {"max_new_tokens": 8, "ignore_eos": True}}
    req = urllib.request.Request(
        f"{sim.url}/generate", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=60) as resp:
        assert json.loads(resp.read())["meta_info"]["completion_tokens"] == 8
    return samples(sim.url)["sglang:gen_throughput"]


def test_without_overlap_every_step_prefill_chunks_included_pays_the_scheduler(
    start_simulator: Any,
) -> None:
    chunk = ["--chunked-prefill-size", "64"]
    overlap = gen_throughput(start_simulator, *chunk)
    serial = gen_throughput(start_simulator, *chunk, "--disable-overlap-schedule")
    # gen_throughput is tokens over the modelled seconds of the last steps (no wall time): the
    # 32 chunk steps and 7 decode steps each paid one step's scheduler CPU more.
    steps = 2048 // 64 + 7
    extra = (1 / serial - 1 / overlap) * 7
    host = schedule_host_time(1, DEFAULT_CALIBRATION)
    assert extra > 0
    assert abs(extra - steps * host) < 0.1 * steps * host


def test_a_step_prefills_at_most_a_chunk_in_admission_order() -> None:
    pieces = prefill_pieces([(512, 1300), (0, 700), (0, 90)], 512)
    assert pieces == [PrefillPiece(0, 512, 1024)]
    pieces = prefill_pieces([(1024, 1300), (0, 700), (0, 90)], 512)
    assert pieces == [PrefillPiece(0, 1024, 1300), PrefillPiece(1, 0, 236)]
    assert prefill_pieces([(0, 1300), (0, 90)], None) == [
        PrefillPiece(0, 0, 1300),
        PrefillPiece(1, 0, 90),
    ]
    assert not decodes_run(pieces, mixed_chunk=False)
    assert decodes_run(pieces, mixed_chunk=True) and decodes_run([], mixed_chunk=False)


def test_a_speculative_step_is_timed_as_the_advisor_times_it_with_overlap_or_without() -> None:
    """The simulator's step and plan's agree on a speculative decode step, synchronous (no
    overlap: the scheduler's and the speculative worker's host work in series) or not; a step
    that only prefills pays no speculative worker."""
    from specserver_advisor.gpus import lookup_gpu
    from specserver_advisor.loaders.corpus import model_config
    from specserver_advisor.perf.model import gpu_step_time
    from specserver_advisor.perf.plan import PlanInputs, make_plan
    from specserver_advisor.sglang.flags import parse_server_argv
    from specserver_engine.sim.steps import step_seconds

    argv = ["--model-path", "m", "--speculative-algorithm", "EAGLE3"]
    argv += ["--speculative-draft-model-path", "d", "--speculative-num-steps", "3"]
    argv += ["--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]
    cal = DEFAULT_CALIBRATION
    for extra in ([], ["--disable-overlap-schedule"]):
        inputs = PlanInputs(
            parse_server_argv(argv + extra).values,
            model_config("qwen3-8b"),
            model_config("qwen3-8b-eagle3"),
            lookup_gpu("H100"),
            concurrency=[8],
        )
        scn = make_plan(inputs).scenario
        gpu_s = gpu_step_time(scn, 8, True, cal)
        assert step_seconds(scn, [], gpu_s, 8, True, cal) == step_time(scn, 8, True, cal)
        if extra:
            assert step_time(scn, 8, True, cal) > gpu_s + cal.spec_sync_host_s
        piece = [PrefillPiece(0, 0, 64)]
        no_worker = dataclasses.replace(cal, spec_sync_host_s=0.0)
        only = step_seconds(scn, piece, 0.0, 0, True, cal)
        assert only == step_seconds(scn, piece, 0.0, 0, True, no_worker)
        with_decodes = step_seconds(scn, piece, gpu_s, 8, True, cal)
        assert (with_decodes > step_seconds(scn, piece, gpu_s, 8, True, no_worker)) == bool(extra)
