"""PCIe and export cards published figures also run on (issue 42: "other published figures will
be tried"): RTX 4090, RTX 5090, RTX PRO 6000, RTX 6000 Ada, L20, H100 PCIe and A800 are
planned, not refused, and each differs from its sibling only where its hardware does.

- A800: the A100's memory and rates, its NVLink capped at 400 GB/s both ways.
- L20: the L40S's memory with a third of its compute: the same KV pool, slower where compute
  binds.
- H100 PCIe: the H100's generation with less bandwidth and no NVSwitch: a slower step, and
  NCCL all-reduces past two GPUs.
- GeForce (RTX 4090, RTX 5090): no peer-to-peer access, so no custom all-reduce even at TP 2;
  the RTX PRO 6000 on the same bus keeps it.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from planon import nccl_notes, plan_on

from specserver_advisor.cli.main import main
from specserver_advisor.gpus import lookup_gpu
from specserver_advisor.perf.constants import DEFAULT_CALIBRATION
from specserver_advisor.perf.model import gpu_step_time
from specserver_advisor.perf.plan import Plan

CARDS = ("RTX-4090", "RTX-5090", "RTX-PRO-6000", "RTX-6000-ADA", "L20", "H100-PCIE", "A800")


def step(plan: Plan, batch: int, cal: Any = DEFAULT_CALIBRATION) -> float:
    return gpu_step_time(plan.scenario, batch, False, cal)


@pytest.mark.parametrize("gpu", CARDS)
def test_plan_runs_on_each_card_by_its_usual_name(
    gpu: str, capsys: pytest.CaptureFixture[str]
) -> None:
    spoken = gpu.replace("-", " ").replace("PCIE", "PCIe").replace("ADA", "Ada")
    argv = ["plan", "--model", "Qwen/Qwen3-8B", "--draft", "Tengyunw/qwen3_8b_eagle3"]
    argv += ["--gpu", spoken, "--concurrency", "1", "--format", "json"]
    # A 24 GB card holds the 8B target and its draft only above SGLang's heuristic fraction
    # (as the L4 does in the field figures).
    assert main([*argv, "--", "--mem-fraction-static", "0.88"]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert out["memory"]["gpu"] == gpu
    assert out["curves"][0]["on"]["output_tok_s"] > out["curves"][0]["off"]["output_tok_s"]


def test_a800_differs_from_a100_only_in_its_all_reduces() -> None:
    one = {g: plan_on(g, [], "qwen3-8b") for g in ("A100-80G", "A800")}
    for batch in (1, 64):
        assert step(one["A800"], batch) == pytest.approx(step(one["A100-80G"], batch))
    eight = {g: plan_on(g, ["--tp-size", "8"], "qwen3-8b") for g in ("A100-80G", "A800")}
    small = [step(eight[g], 1) for g in ("A100-80G", "A800")]
    large = [step(eight[g], 256) for g in ("A100-80G", "A800")]
    assert small[1] == pytest.approx(small[0], rel=0.02)
    assert large[1] - large[0] > small[1] - small[0] > -1e-12


def test_l20_is_an_l40s_that_computes_slower() -> None:
    l40s, l20 = (plan_on(g, [], "qwen3-8b") for g in ("L40S", "L20"))
    assert l20.mem.kv_pool_tokens_without_draft == l40s.mem.kv_pool_tokens_without_draft
    # A forward of many tokens at once is compute-bound: the L20 pays its third of the rate.
    compute = replace(DEFAULT_CALIBRATION, kernel_floor_s=0.0, eager_launch_s=0.0)
    ratio = step(l20, 4096, compute) / step(l40s, 4096, compute)
    assert ratio > 2.0
    assert step(l20, 1) / step(l40s, 1) < ratio


def test_h100_pcie_is_slower_than_the_sxm_and_all_reduces_through_nccl_at_four() -> None:
    sxm, pcie = (plan_on(g, [], "qwen3-8b") for g in ("H100", "H100-PCIE"))
    assert step(pcie, 1) > step(sxm, 1)
    assert not nccl_notes(plan_on("H100-PCIE", ["--tp-size", "2"], "qwen3-8b"))
    [note] = nccl_notes(plan_on("H100-PCIE", ["--tp-size", "4"], "qwen3-8b"))
    assert "no NVLink" in note


@pytest.mark.parametrize("gpu", ["RTX-4090", "RTX-5090"])
def test_geforce_cards_have_no_custom_all_reduce_even_at_two(gpu: str) -> None:
    [note] = nccl_notes(plan_on(gpu, ["--tp-size", "2"], "qwen3-8b"))
    assert "peer-to-peer" in note
    pro = plan_on("RTX-PRO-6000", ["--tp-size", "2"], "qwen3-8b")
    assert not nccl_notes(pro)


@pytest.mark.parametrize(
    ("spoken", "card"),
    [
        ("GeForce RTX 4090", "RTX-4090"),
        ("RTX4090", "RTX-4090"),
        ("rtx_5090", "RTX-5090"),
        ("RTX PRO 6000 Blackwell", "RTX-PRO-6000"),
        ("RTX 6000Ada", "RTX-6000-ADA"),
        ("A800-80G", "A800"),
        ("A800 SXM", "A800"),
        ("H100 PCIe 80G", "H100-PCIE"),
    ],
)
def test_the_names_people_write_find_the_card(spoken: str, card: str) -> None:
    assert lookup_gpu(spoken).name == card
