"""Where SGLang's custom all-reduce does not run, every all-reduce is NCCL's (issue 42's
"custom one-shot vs NCCL"): the plan prices it so and says why.

Whether the kernel runs is held to SGLang's own decision by
``tests/oracle/test_sglang_custom_allreduce.py``; here: what a plan does with the answer. The kernel
is off for more than two GPUs without NVLink, for ``--disable-custom-all-reduce`` (unless
FlashInfer's fused all-reduce takes a MoE model's all-reduces on Hopper and Blackwell anyway)
and for deterministic inference on CUDA (which sets that flag, as ``--rl-on-policy-target``
does; ROCm keeps its one-stage kernel).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from planon import nccl_notes, plan_on

from specserver_advisor.gpus import lookup_gpu
from specserver_advisor.perf.constants import DEFAULT_CALIBRATION
from specserver_advisor.perf.model import gpu_step_time
from specserver_advisor.perf.parallelism import custom_allreduce_off
from specserver_advisor.perf.plan import Plan


def one_request_step(plan: Plan) -> float:
    return gpu_step_time(plan.scenario, 1, False, DEFAULT_CALIBRATION)


def test_four_pcie_gpus_all_reduce_through_nccl_and_the_plan_says_so() -> None:
    l40s = lookup_gpu("L40S")
    assert not l40s.full_nvlink
    two, four = (plan_on(l40s, ["--tp-size", str(tp)], "qwen3-8b") for tp in (2, 4))
    # Two PCIe GPUs keep the custom kernel (SGLang allows it at two without NVLink).
    assert nccl_notes(two) == []
    [note] = nccl_notes(four)
    assert "L40S has no NVLink" in note and "4 GPUs" in note
    # The same card, were its four GPUs one NVLink hop apart, would keep the custom kernel:
    # every other input equal, NCCL's latency is what lengthens the step.
    linked = plan_on(replace(l40s, full_nvlink=True), ["--tp-size", "4"], "qwen3-8b")
    assert nccl_notes(linked) == []
    assert one_request_step(four) > one_request_step(linked)


@pytest.mark.parametrize(
    "flags",
    [
        ["--disable-custom-all-reduce"],
        ["--enable-deterministic-inference"],
        ["--rl-on-policy-target", "fsdp"],
    ],
)
def test_a_launch_that_turns_the_kernel_off_pays_nccl_on_nvlink(flags: list[str]) -> None:
    h100 = lookup_gpu("H100")
    custom = plan_on(h100, ["--tp-size", "2"], "qwen3-8b")
    nccl = plan_on(h100, ["--tp-size", "2", *flags], "qwen3-8b")
    assert nccl_notes(custom) == []
    assert len(nccl_notes(nccl)) == 1
    assert one_request_step(nccl) > one_request_step(custom)


def test_deterministic_inference_keeps_rocms_custom_kernel() -> None:
    mi300x = lookup_gpu("MI300X")
    plain = plan_on(mi300x, ["--tp-size", "8"], "deepseek-v3")
    deterministic = plan_on(
        mi300x, ["--tp-size", "8", "--enable-deterministic-inference"], "deepseek-v3"
    )
    assert nccl_notes(deterministic) == []
    assert one_request_step(deterministic) == pytest.approx(one_request_step(plain))
    # And the flag that does turn it off on ROCm is priced there too.
    off = plan_on(mi300x, ["--tp-size", "8", "--disable-custom-all-reduce"], "deepseek-v3")
    assert one_request_step(off) > one_request_step(plain)


def test_one_gpu_has_no_all_reduce_to_price() -> None:
    h100 = lookup_gpu("H100")
    alone = plan_on(h100, [], "qwen3-8b")
    flagged = plan_on(h100, ["--disable-custom-all-reduce"], "qwen3-8b")
    assert nccl_notes(flagged) == []
    assert one_request_step(flagged) == pytest.approx(one_request_step(alone))


def test_flashinfers_fused_all_reduce_takes_a_moe_models_all_reduces_whatever_the_flag() -> None:
    h100 = lookup_gpu("H100")
    moe = "qwen3-30b-a3b"
    custom = plan_on(h100, ["--tp-size", "2"], moe)
    flagged = plan_on(h100, ["--tp-size", "2", "--disable-custom-all-reduce"], moe)
    assert nccl_notes(flagged) == []
    assert one_request_step(flagged) == pytest.approx(one_request_step(custom))
    # Deterministic inference turns the fusion off as well: NCCL's then.
    exact = plan_on(h100, ["--tp-size", "2", "--enable-deterministic-inference"], moe)
    assert len(nccl_notes(exact)) == 1
    assert one_request_step(exact) > one_request_step(custom)
    # The fusion is Hopper's and Blackwell's: an A100 pays NCCL for the same flag.
    a100 = lookup_gpu("A100-80G")
    assert len(nccl_notes(plan_on(a100, ["--tp-size", "2", "--disable-custom-all-reduce"], moe)))


def test_odd_groups_keep_cudas_jit_kernel_on_nvlink_and_lose_the_legacy_one_elsewhere() -> None:
    # SGLang's JIT kernel (v2, CUDA's default) takes 2-8 GPUs one NVLink hop apart; ROCm and
    # PCIe run the legacy kernel, which supports 2, 4, 6 and 8 only.
    for tp in (3, 5, 7):
        assert custom_allreduce_off(lookup_gpu("H100"), tp, 1, disabled=False) is None
        off = custom_allreduce_off(lookup_gpu("MI300X"), tp, 1, disabled=False)
        assert off is not None and f"not {tp}" in off
