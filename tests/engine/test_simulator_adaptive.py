"""The simulated engine under ``--speculative-adaptive``: steps per batch tier, metrics follow."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from prometheus_client import generate_latest

from specserver_advisor.perf.constants import DEFAULT_CALIBRATION
from specserver_advisor.perf.model import step_time
from specserver_engine.sim.config import build_sim_config
from specserver_engine.sim.engine import SimEngine, SimRequest
from specserver_engine.sim.metrics import EngineMetrics
from stack import QWEN_EAGLE3

BASE = [*QWEN_EAGLE3, "--sim-gpu", "H100", "--time-scale", "2000", "--sim-startup-seconds", "0"]


def serve(argv: list[str], users: int, out_tokens: int) -> tuple[SimEngine, EngineMetrics, dict]:
    cfg = build_sim_config(argv, env={})
    metrics = EngineMetrics(cfg.served_model_name)
    engine = SimEngine(cfg, metrics)

    async def go() -> dict:
        loop = asyncio.create_task(engine.run())
        reqs = [engine.submit(256, out_tokens, True, "code", False, f"r{i}") for i in range(users)]
        metas, first_done_steps = [], None
        for r in reqs:
            while True:
                chunk = await r.chunks.get()
                if chunk.finished:
                    metas.append(chunk.meta)
                    if first_done_steps is None:  # the batch was still full
                        first_done_steps = gauge(metrics, "sglang:spec_num_steps")
                    break
        loop.cancel()
        return {"metas": metas, "steps_while_full": first_done_steps}

    return engine, metrics, asyncio.run(go())


def gauge(metrics: EngineMetrics, name: str) -> float:
    for fam in metrics.registry.collect():
        for s in fam.samples:
            if s.name == name:
                return float(s.value)
    raise KeyError(name)


def test_large_batches_draft_fewer_steps_and_the_gauges_show_it() -> None:
    argv = [*BASE, "--speculative-adaptive", "--max-running-requests", "64"]
    engine, metrics, out = serve(argv, users=48, out_tokens=200)
    assert engine.adaptive is not None
    # 48 running pad to the graph of 48: the 32 tier, candidates {0, 1}.
    assert engine.adaptive.steps_for_batch(48) in (0, 1)
    assert out["steps_while_full"] in (0.0, 1.0)
    assert (
        gauge(metrics, "sglang:spec_num_draft_tokens")
        == gauge(metrics, "sglang:spec_num_steps") + 1
    )
    meta = out["metas"][0]
    # At most one draft per verify in this tier (a few early verifies ran 3 before it moved).
    assert meta["spec_num_proposed_drafts"] <= 3 * meta["spec_verify_ct"]
    assert meta["spec_num_correct_drafts"] <= meta["spec_num_proposed_drafts"]
    assert b"sglang:spec_num_steps" in generate_latest(metrics.registry)


def test_a_single_request_keeps_drafting_and_may_climb() -> None:
    argv = [*BASE, "--speculative-adaptive", "--sim-accept-length", "3.9"]
    engine, _, out = serve(argv, users=1, out_tokens=400)
    assert engine.adaptive is not None
    assert engine.adaptive.steps_for_batch(1) >= 3
    meta = out["metas"][0]
    assert meta["spec_accept_length"] > 2.5


def test_without_the_flag_the_steps_never_move() -> None:
    engine, metrics, out = serve([*BASE, "--max-running-requests", "64"], users=48, out_tokens=400)
    assert engine.adaptive is None
    assert engine.decode_batches >= engine.log_interval  # a decode report set the gauges
    assert gauge(metrics, "sglang:spec_num_steps") == 3.0
    assert gauge(metrics, "sglang:spec_num_draft_tokens") == 4.0
    meta = out["metas"][0]
    assert meta["spec_num_proposed_drafts"] == 3 * meta["spec_verify_ct"]


def test_topk_above_one_turns_adaptive_off_like_sglang() -> None:
    argv = [
        *BASE,
        "--speculative-adaptive",
        "--speculative-num-steps",
        "3",
        "--speculative-eagle-topk",
        "2",
        "--speculative-num-draft-tokens",
        "6",
    ]
    cfg = build_sim_config(argv, env={})
    assert SimEngine(cfg, None).adaptive is None


def test_the_steps_gauge_reads_zero_until_the_first_decode_report() -> None:
    """SGLang's scheduler stats start at 0 steps; ``report_decode_stats`` sets them."""
    engine, metrics, _ = serve([*BASE, "--max-running-requests", "64"], users=48, out_tokens=20)
    assert engine.decode_batches < engine.log_interval
    assert gauge(metrics, "sglang:spec_num_steps") == 0.0


def test_the_zero_step_tier_verifies_one_token_and_the_gauges_say_so() -> None:
    """64 running route to SGLang's 64 tier (candidates [0]): every verify commits the bonus
    token only, the accept length reads 1.0 (as SGLang's trivial verify counts) and
    ``spec_num_steps`` reads 0 at the decode reports."""
    argv = [*BASE, "--speculative-adaptive", "--max-running-requests", "96"]
    engine, metrics, out = serve(argv, users=80, out_tokens=600)
    assert engine.adaptive is not None and engine.adaptive.steps_for_batch(80) == 0
    assert out["steps_while_full"] == 0.0
    assert gauge(metrics, "sglang:spec_num_draft_tokens") == 1.0
    assert gauge(metrics, "sglang:spec_accept_length") == 1.0
    late = out["metas"][-1]
    # Each request ran a few verifies at the launch's 3 steps before the tier took over.
    assert late["spec_verify_ct"] >= 0.9 * late["completion_tokens"] - 40
    assert late["spec_num_correct_drafts"] <= 3 * 10


def test_a_synchronous_adaptive_step_pays_host_work_for_the_steps_it_drafts() -> None:
    """Without the overlap scheduler the worker's host work follows the draft steps the
    adaptive tier runs: 80 running at the zero-step tier pay none of the launch's 3 steps'
    (``spec_sync_step_s`` each), as the model's step at 0 steps does."""
    argv = [*BASE, "--speculative-adaptive", "--max-running-requests", "96"]
    engine = SimEngine(build_sim_config([*argv, "--disable-overlap-schedule"], env={}), None)
    assert engine.adaptive is not None and engine.adaptive.steps_for_batch(80) == 0
    scn = engine.cfg.plan.scenario
    assert not scn.overlap_schedule and scn.spec is not None and scn.spec.num_steps == 3
    for i in range(80):
        req = SimRequest(f"r{i}", 256, 64, 64, "code", False, first_token_at=0.0, prefilled=256)
        engine.running.append(req)
    pieces, decoding, step_s = engine._next_step()
    assert not pieces and len(decoding) == 80
    at_ctx = dataclasses.replace(scn, input_len=256, output_len=0)
    assert step_s == pytest.approx(step_time(at_ctx, 80, True, DEFAULT_CALIBRATION, steps=0))
    launch_steps = step_time(at_ctx, 80, True, DEFAULT_CALIBRATION)
    assert step_s < launch_steps - 2 * DEFAULT_CALIBRATION.spec_sync_step_s
