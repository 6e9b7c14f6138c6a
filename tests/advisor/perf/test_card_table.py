"""Cards published figures run on beyond the first table (issue 42: "other published figures
will be tried, on NVIDIA and AMD cards"): H800, B300, GB200, GB300 and MI350X are planned, not
refused, and each differs from its sibling only where its hardware does.

- H800: the H100's memory and rates, its NVLink capped at 400 GB/s both ways: the same step on
  one GPU, a slower one where tensor parallelism moves a large batch's hidden states.
- B300: the B200's rates with 288 GB: the same step, a larger KV pool.
- GB200 / GB300: Blackwell (sm100 / sm103): SGLang's Blackwell attention defaults.
- MI350X: the MI355X at a lower clock: a ROCm card (aiter, rejection sampling), the same
  memory, slower only where compute binds.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from planon import plan_on

from specserver_advisor.cli.main import main
from specserver_advisor.cli.plannodes import node_advice, nodes_for
from specserver_advisor.gpus import lookup_gpu
from specserver_advisor.perf.constants import DEFAULT_CALIBRATION
from specserver_advisor.perf.model import gpu_step_time
from specserver_advisor.sglang.serverargs import default_attention_backend

NEW_CARDS = ("H800", "B300", "GB200", "GB300", "MI350X")


def plan_json(
    capsys: pytest.CaptureFixture[str], gpu: str, gpus: int = 8, nnodes: int = 1
) -> dict[str, Any]:
    argv = ["plan", "--model", "deepseek-ai/DeepSeek-V3", "--gpu", gpu, "--gpus", str(gpus)]
    argv += ["--nnodes", str(nnodes)]
    argv += ["--algorithm", "NEXTN", "--steps", "1", "--topk", "1", "--draft-tokens", "2"]
    assert main([*argv, "--concurrency", "1", "--format", "json"]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


@pytest.mark.parametrize("gpu", NEW_CARDS)
def test_plan_runs_on_each_card_and_names_it(gpu: str, capsys: pytest.CaptureFixture[str]) -> None:
    # DeepSeek-V3's FP8 weights fill 8 x 80 GB: the H800 takes two nodes' 16, as the H100
    # does; a GB200/GB300 tray holds 4, so its 8 span two trays.
    nnodes = 2 if gpu in ("H800", "GB200", "GB300") else 1
    out = plan_json(capsys, gpu, 16 if gpu == "H800" else 8, nnodes)
    assert out["memory"]["gpu"] == gpu
    assert out["curves"], "a plan with no curve predicted nothing"


@pytest.mark.parametrize(("gpu", "per_node"), [("GB200", 4), ("GB300", 4), ("B300", 8)])
def test_gpus_beyond_a_server_are_advised_as_nodes_of_the_cards_usual_server(
    gpu: str, per_node: int
) -> None:
    card = lookup_gpu(gpu)
    assert nodes_for(per_node, card) == (per_node, 1)
    assert nodes_for(per_node + 1, card) == (2 * per_node, 2)
    assert f"2 nodes of {per_node} x {gpu}" in node_advice(per_node + 1, card)


def test_h800_differs_from_h100_only_in_its_all_reduces() -> None:
    cal = DEFAULT_CALIBRATION
    one = {g: plan_on(g, ["--tp-size", "1"], "qwen3-8b").scenario for g in ("H100", "H800")}
    # One GPU: nothing crosses NVLink, the same step at any batch.
    for batch in (1, 64):
        h100 = gpu_step_time(one["H100"], batch, False, cal)
        assert gpu_step_time(one["H800"], batch, False, cal) == pytest.approx(h100)
    eight = {g: plan_on(g, ["--tp-size", "8"], "deepseek-v3").scenario for g in ("H100", "H800")}
    # TP 8 at one request: latency-bound all-reduces, nearly the same step.
    small = [gpu_step_time(eight[g], 1, False, cal) for g in ("H100", "H800")]
    assert small[1] == pytest.approx(small[0], rel=0.02)
    # A large batch moves its hidden states over a link of less than half the bandwidth.
    large = [gpu_step_time(eight[g], 256, False, cal) for g in ("H100", "H800")]
    assert large[1] > large[0] * 1.02
    assert large[1] - large[0] > small[1] - small[0]


def test_b300_is_a_b200_with_a_larger_kv_pool() -> None:
    cal = DEFAULT_CALIBRATION
    b200, b300 = (plan_on(g, ["--tp-size", "8"], "deepseek-v3") for g in ("B200", "B300"))
    for batch in (1, 32):
        assert gpu_step_time(b300.scenario, batch, False, cal) == pytest.approx(
            gpu_step_time(b200.scenario, batch, False, cal)
        )
    assert b300.mem.kv_pool_tokens_without_draft > 1.5 * b200.mem.kv_pool_tokens_without_draft


@pytest.mark.parametrize("gpu", ["B200", "B300", "GB200", "GB300"])
def test_blackwell_cards_take_sglangs_blackwell_backends(gpu: str) -> None:
    card = lookup_gpu(gpu)
    mla = default_attention_backend(card, True, {}, "DeepseekV3ForCausalLM")
    gqa = default_attention_backend(card, False, {}, "Qwen3ForCausalLM")
    assert (mla, gqa) == ("trtllm_mla", "trtllm_mha")
    hopper = lookup_gpu("H800")
    assert default_attention_backend(hopper, True, {}, "DeepseekV3ForCausalLM") == "fa3"


def test_mi350x_is_a_slower_clocked_mi355x_on_rocm(capsys: pytest.CaptureFixture[str]) -> None:
    mi350, mi355 = (plan_json(capsys, g) for g in ("MI350X", "MI355X"))
    for key in ("attention_backend", "speculative_use_rejection_sampling"):
        assert mi350["resolved"][key] == mi355["resolved"][key]
    assert mi350["resolved"]["speculative_use_rejection_sampling"] is True
    cal = DEFAULT_CALIBRATION
    slow, fast = (
        plan_on(g, ["--tp-size", "8"], "deepseek-v3").scenario for g in ("MI350X", "MI355X")
    )
    # Decode at one request streams weights: the clock barely shows.
    one = gpu_step_time(slow, 1, False, cal) / gpu_step_time(fast, 1, False, cal)
    assert 1.0 <= one < 1.02
    # A compute-bound forward (a long prefill chunk's tokens at once) pays the lower clock.
    compute = replace(cal, cdna4_kernel_floor_s=0.0, eager_launch_s=0.0)
    big = gpu_step_time(slow, 4096, False, compute) / gpu_step_time(fast, 4096, False, compute)
    assert big > one
