"""The simulated engine's prefill batch honours ``--max-prefill-tokens`` as SGLang 0.5.23 does.

``PrefillAdder`` (``managers/schedule_policy.py``) charges every admitted prompt to
``rem_input_tokens`` (``--max-prefill-tokens``) and stops admitting once it is spent
(``budget_state``); without chunking (``--chunked-prefill-size -1``) ``_select_prefill_admission``
admits a further prompt only if it is shorter than what is left, and the first one whole however
long. The prompts left out stay queued for the next step. Checked on an in-process engine on its
modelled clock: the step a request's first token comes out of tells which batch prefilled it.
"""

from __future__ import annotations

import asyncio

import pytest

from specserver_advisor.perf.constants import DEFAULT_CALIBRATION
from specserver_advisor.perf.model import prefill_floor_s, prefill_tokens_time
from specserver_engine.sim.config import build_sim_config
from specserver_engine.sim.engine import SimEngine
from specserver_engine.sim.steps import PrefillPiece, prefill_pieces

L4 = ["--model-path", "Qwen/Qwen3-8B", "--mem-fraction-static", "0.85", "--sim-gpu", "L4"]


def first_token_times(prompts: list[int], *args: str) -> list[float]:
    """Submit ``prompts`` at once (2 output tokens each); each one's first-token time."""
    cfg = build_sim_config([*L4, *args, "--sim-startup-seconds", "0"], env={})
    engine = SimEngine(cfg, None, modelled_clock=True)

    async def run() -> list[float]:
        loop = asyncio.create_task(engine.run())
        reqs = [engine.submit(n, 2, True, "random", True, str(i)) for i, n in enumerate(prompts)]
        try:
            return [(await r.chunks.get()).at for r in reqs]
        finally:
            loop.cancel()

    return asyncio.run(run())


def batches(times: list[float]) -> list[int]:
    """Which prefill batch (0, 1, ...) each request's first token came out of."""
    order = sorted(set(times))
    return [order.index(t) for t in times]


def test_unchunked_a_prompt_that_does_not_fit_what_is_left_waits_for_the_next_batch() -> None:
    times = first_token_times(
        [600, 600, 300], "--chunked-prefill-size", "-1", "--max-prefill-tokens", "1000"
    )
    # 600 leaves 400: the next 600 waits (600 >= 400); then 600 + 300 fit one batch.
    assert batches(times) == [0, 1, 1]
    # The default budget (16384) takes all three at once.
    assert batches(first_token_times([600, 600, 300], "--chunked-prefill-size", "-1")) == [0, 0, 0]


def test_unchunked_a_prompt_longer_than_the_budget_is_prefilled_whole_and_alone() -> None:
    times = first_token_times(
        [3000, 100], "--chunked-prefill-size", "-1", "--max-prefill-tokens", "1000"
    )
    assert batches(times) == [0, 1]
    # One step: the prompt's first token comes after one prefill of 3000 tokens, not of 1000.
    alone = first_token_times([3000], "--chunked-prefill-size", "-1")
    assert times[0] == alone[0]


def test_chunked_the_budget_stops_admission_once_spent_without_cutting_the_prompt() -> None:
    times = first_token_times(
        [600, 600, 600], "--chunked-prefill-size", "4096", "--max-prefill-tokens", "1000"
    )
    # With chunking a prompt is cut to the chunk only: the second 600 overruns the 400 left
    # and goes in whole; the spent budget keeps the third one for the next batch.
    assert batches(times) == [0, 0, 1]


def test_prefill_pieces_charges_both_budgets_and_the_mixed_decodes() -> None:
    assert prefill_pieces([(0, 600), (0, 600), (0, 300)], None, 1000) == [PrefillPiece(0, 0, 600)]
    assert prefill_pieces([(0, 600), (0, 300)], None, 1000) == [
        PrefillPiece(0, 0, 600),
        PrefillPiece(1, 0, 300),
    ]
    # Exactly what is left is refused too (input_tokens >= rem_input_tokens).
    assert prefill_pieces([(0, 600), (0, 400)], None, 1000) == [PrefillPiece(0, 0, 600)]
    assert prefill_pieces([(0, 3000), (0, 10)], None, 1000) == [PrefillPiece(0, 0, 3000)]
    # Mixed chunk: 8 decoding requests take 8 tokens of each budget.
    assert prefill_pieces([(0, 600)], 512, 16384, mixed_decodes=8) == [PrefillPiece(0, 0, 504)]
    assert prefill_pieces([(0, 600)], 4096, 8, mixed_decodes=8) == []


def test_a_prefill_batch_takes_its_forwards_launches_once_for_all_its_prompts() -> None:
    """Prefill runs without a CUDA graph: on an H100 an 8B's 16-token prompt is bound by its
    forward's kernel launches from Python, not its FLOPs. Eight such prompts sent together
    are one prefill batch, one forward: their first tokens come when one prompt's would."""
    h100 = ("--sim-gpu", "H100")
    scn = build_sim_config([*L4, *h100, "--sim-startup-seconds", "0"], env={}).plan.scenario
    floor = prefill_floor_s(scn, False, DEFAULT_CALIBRATION)
    assert prefill_tokens_time(scn, 16, False, DEFAULT_CALIBRATION, floor=False) < floor / 10
    one = first_token_times([16], *h100)
    eight = first_token_times([16] * 8, *h100)
    assert batches(eight) == [0] * 8
    assert one[0] >= floor
    assert eight[0] == pytest.approx(one[0], rel=0.05)
