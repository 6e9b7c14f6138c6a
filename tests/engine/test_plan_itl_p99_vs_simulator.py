"""``plan --prompt-len``'s ITL P99 against the simulated engine under the same mix and users.

The simulated engine runs SGLang 0.5.23's scheduler step by step (``simsteps``) on its modelled
clock (``calibrate.run_modelled``: in-process, deterministic, no wall time), with the same
launch, accept length, fixed output length and prompt mix as the plan; its ITL is the gap
between a request's streamed chunks (one a step), as ``itl_p99_ms`` in the plan is a step.

Tolerance 12%. The P99 is a kind of step: a plain decode step, or one that also waits for a
prompt's prefill (whole, or a chunk with ``--enable-mixed-chunk``); the next kind is at least
2x away in every case here, so a wrong kind cannot pass. Within a kind the plan prices the decode
step at the mix's mean context and batch, while the engine's step has its own batch's context:
one that holds a 6,144-token prompt of this mix decodes up to ~10% slower on the L4.
"""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout

import pytest

from specserver_advisor.cli.main import main
from specserver_advisor.cli.plan import prompt_mix
from specserver_engine.loadgen import PromptLengths
from specserver_engine.sim.calibrate import EAGLE3, run_modelled

MIX = "p50=256,p90=1024,p99=6144"
ACCEPT = "2.5"
LAUNCH = ["--model-path", "Qwen/Qwen3-8B", "--mem-fraction-static", "0.85"]
PLAN = [
    "plan",
    "--model",
    "Qwen/Qwen3-8B",
    "--draft",
    "Tengyunw/qwen3_8b_eagle3",
    *("--gpu", "L4", "--steps", "3", "--topk", "1", "--draft-tokens", "4"),
    *("--mem-fraction-static", "0.85", "--accept-length", ACCEPT, "--output-len", "128"),
    *("--prompt-len", MIX, "--format", "json"),
]


def planned_itl_p99(extra: list[str], users: int, mode: str) -> float:
    out = io.StringIO()
    with redirect_stdout(out):
        assert main([*PLAN, *extra, "--concurrency", str(users)]) == 0
    return float(json.loads(out.getvalue())["curves"][0][mode]["itl_p99_ms"])


def measured_itl_p99(extra: list[str], users: int, mode: str) -> float:
    argv = [*LAUNCH, "--sim-gpu", "L4", "--sim-accept-length", ACCEPT, *extra]
    argv += EAGLE3 if mode == "on" else []
    summary = run_modelled(argv, users, 40, PromptLengths(512, prompt_mix(MIX), seed=1), 128)
    return float(summary["p99_itl_ms"])


@pytest.mark.parametrize(
    ("extra", "users", "mode"),
    [
        # Unchunked: the prompts of a wave prefill ahead of the decodes and start together.
        (["--chunked-prefill-size", "-1"], 8, "off"),
        # Speculation's varied commits stagger the arrivals: a step that waits for a prefill.
        (["--chunked-prefill-size", "-1"], 4, "on"),
        # The L4's default chunk (4,096): the 6,144-token prompts take two prefill steps.
        ([], 8, "off"),
        # Mixed chunks: the decodes ride along with each 512-token chunk.
        (["--chunked-prefill-size", "512", "--enable-mixed-chunk"], 8, "off"),
    ],
    ids=["unchunked-off-8", "unchunked-on-4", "chunked-off-8", "mixed-chunk-off-8"],
)
def test_plan_itl_p99_matches_the_simulated_engine(extra: list[str], users: int, mode: str) -> None:
    planned = planned_itl_p99(extra, users, mode)
    measured = measured_itl_p99(extra, users, mode)
    assert planned == pytest.approx(measured, rel=0.12), (planned, measured)
