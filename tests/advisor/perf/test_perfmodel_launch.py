"""The performance model follows the launch: overlap scheduling, dtypes and chunked prefill."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest

from specserver_advisor.gpus import lookup_gpu
from specserver_advisor.perf import calibration
from specserver_advisor.perf.constants import DEFAULT_CALIBRATION as CAL
from specserver_advisor.perf.model import (
    SpecShape,
    gpu_step_time,
    predict,
    prefill_time,
    step_time,
    sync_spec_host_s,
)
from specserver_advisor.perf.plan import Plan, PlanInputs, make_plan
from specserver_advisor.sglang.flags import parse_server_argv

CONC = [1, 8, 32]


def plan(
    *extra: str,
    gpu: str = "L4",
    target: dict[str, Any] | None = None,
    input_len: int = 512,
    output_len: int = 128,
) -> Plan:
    """The field's L4 Qwen3-8B EAGLE-3 launch with ``extra`` flags."""
    argv = [
        "--model-path",
        "Qwen/Qwen3-8B",
        *calibration.EAGLE3_314,
        "--mem-fraction-static",
        calibration.L4_FIELD_MFS,
        *extra,
    ]
    inp = PlanInputs(
        parse_server_argv(argv).values,
        target or calibration.field_config("qwen3-8b"),
        calibration.field_config("qwen3-8b-eagle3"),
        lookup_gpu(gpu),
        accept_length=2.73,
        concurrency=CONC,
        input_len=input_len,
        output_len=output_len,
    )
    return make_plan(inp)


def curve(p: Plan, c: int, mode: str, key: str) -> float:
    return float(next(x for x in p.curves if x["concurrency"] == c)[mode][key])


def test_disabling_overlap_puts_the_schedulers_cpu_time_on_every_step() -> None:
    default, off = plan(), plan("--disable-overlap-schedule")
    assert default.scenario.overlap_schedule and not off.scenario.overlap_schedule
    assert not plan("--pp-size", "2").scenario.overlap_schedule
    for c in CONC:
        for mode in ("on", "off"):
            assert curve(off, c, mode, "tpot_ms") > curve(default, c, mode, "tpot_ms")
            assert curve(off, c, mode, "output_tok_s") < curve(default, c, mode, "output_tok_s")
    # The CPU work is per step and per running request: the added time grows with the batch.
    added = [
        step_time(off.scenario, b, True, CAL) - step_time(default.scenario, b, True, CAL)
        for b in (1, 32)
    ]
    assert 0 < added[0] < added[1]


def test_overlap_hides_cpu_work_only_up_to_the_gpu_step() -> None:
    # A CPU slower than the GPU step: with overlap the step is the CPU's, not GPU + CPU.
    scn = plan().scenario
    slow_cpu = replace(CAL, schedule_s_per_step=1.0)
    overlapped = step_time(scn, 8, True, slow_cpu)
    serial = step_time(replace(scn, overlap_schedule=False), 8, True, slow_cpu)
    assert overlapped == pytest.approx(1.0 + CAL.schedule_s_per_request * 8)
    assert serial > overlapped + step_time(scn, 8, True, CAL) * 0.99


def test_synchronous_speculation_waits_for_the_workers_host_work() -> None:
    """SGLang 0.5.23 runs speculation under the overlap scheduler (spec V2): the step is the
    GPU's. Without overlap (``--disable-overlap-schedule``, or a release before spec V2, whose
    plain launches still overlapped) each speculative step waits for the scheduler's CPU work
    and then for the worker's own between its stages and for each draft step; a plain step
    never pays the latter."""
    default = plan().scenario
    off = plan("--disable-overlap-schedule").scenario
    assert default.overlap_schedule and default.spec_overlap and not off.overlap_schedule
    spec_v1 = replace(default, spec_overlap=False)
    gpu_s = step_time(default, 8, True, CAL)
    host = CAL.schedule_s_per_step + CAL.schedule_s_per_request * 8
    assert gpu_s > host  # the L4's speculative step hides the scheduler under overlap
    assert default.spec is not None and default.spec.num_steps == 3
    worker = CAL.spec_sync_host_s + 3 * CAL.spec_sync_step_s
    for synchronous in (off, spec_v1):
        assert step_time(synchronous, 8, True, CAL) == pytest.approx(gpu_s + host + worker)
    # Plain decoding of the pre-V2 release still overlaps; without overlap it pays the
    # scheduler's work and nothing of the speculative worker's.
    assert step_time(spec_v1, 8, False, CAL) == step_time(default, 8, False, CAL)
    assert step_time(off, 8, False, CAL) == pytest.approx(step_time(default, 8, False, CAL) + host)
    # The tokens a user sees come slower from a synchronous launch.
    for c in (1, 8):
        on = predict(default, c, 64, True, CAL).tpot_ms
        assert predict(spec_v1, c, 64, True, CAL).tpot_ms > on


def test_fp8_kv_cache_doubles_the_pool_and_halves_the_kv_read() -> None:
    bf16, fp8 = (
        plan(input_len=4096, output_len=256),
        plan("--kv-cache-dtype", "fp8_e4m3", input_len=4096, output_len=256),
    )
    # The step reads the KV cells the pool is sized in (memory.py, checked by the oracle).
    assert fp8.scenario.kv_cell_bytes == fp8.mem.cell_bytes_target
    assert fp8.scenario.kv_cell_bytes * 2 == bf16.scenario.kv_cell_bytes
    assert fp8.mem.kv_pool_tokens_without_draft == pytest.approx(
        2 * bf16.mem.kv_pool_tokens_without_draft, rel=0.01
    )
    assert fp8.fits_off > bf16.fits_off
    # Same batch, long context: the KV share of the step's memory traffic halves, so the
    # saving grows with the batch (the weights, read once per step, do not shrink).
    for spec in (False, True):
        ratio = [
            step_time(fp8.scenario, b, spec, CAL) / step_time(bf16.scenario, b, spec, CAL)
            for b in (1, 16, 32)
        ]
        assert 0.95 < ratio[0] < 1.0 and ratio[2] < ratio[1] < 0.9


def fp8_checkpoint() -> dict[str, Any]:
    cfg = copy.deepcopy(calibration.field_config("qwen3-8b"))
    cfg["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3"}
    return cfg


def test_fp8_checkpoint_reads_half_the_weights_and_computes_fp8_where_the_card_can() -> None:
    for gpu, fp8_gemm in (("L4", True), ("A100-80G", False)):
        bf16 = plan(gpu=gpu).scenario
        fp8 = plan(gpu=gpu, target=fp8_checkpoint()).scenario
        assert fp8.target_weight_bytes * 2 == pytest.approx(bf16.target_weight_bytes, rel=0.01)
        # Batch-1 decode is memory-bound: the weight read halves (the per-layer launch cost
        # does not, which weighs more on the A100's faster memory).
        ratio = step_time(fp8, 1, False, CAL) / step_time(bf16, 1, False, CAL)
        assert 0.5 < ratio < (0.65 if gpu == "L4" else 0.8)
        # Prefill is compute-bound: faster only with FP8 tensor cores (sm89+).
        gain = prefill_time(bf16, False, CAL) / prefill_time(fp8, False, CAL)
        assert gain > 1.5 if fp8_gemm else gain == pytest.approx(1.0)


def test_fp16_and_bf16_are_the_same_bytes_and_rate() -> None:
    fp16_cfg = copy.deepcopy(calibration.field_config("qwen3-8b"))
    fp16_cfg["torch_dtype"] = "float16"
    bf16, fp16 = plan(), plan(target=fp16_cfg)
    assert fp16.curves == bf16.curves
    assert fp16.mem.kv_pool_tokens_with_draft == bf16.mem.kv_pool_tokens_with_draft


def test_launch_dtype_float32_doubles_weight_and_kv_traffic() -> None:
    bf16, fp32 = plan(gpu="A100-80G"), plan("--dtype", "float32", gpu="A100-80G")
    assert fp32.scenario.target_weight_bytes == 2 * bf16.scenario.target_weight_bytes
    assert fp32.scenario.kv_cell_bytes == 2 * bf16.scenario.kv_cell_bytes
    assert fp32.mem.kv_pool_tokens_without_draft < bf16.mem.kv_pool_tokens_without_draft / 2
    # Batch-1 decode reads twice the bytes (the per-layer launch cost stays).
    ratio = step_time(fp32.scenario, 1, False, CAL) / step_time(bf16.scenario, 1, False, CAL)
    assert 1.4 < ratio < 2.0
    # A float32 checkpoint under --dtype auto runs in float16: the bf16 checkpoint's plan.
    fp32_cfg = dict(calibration.field_config("qwen3-8b"), torch_dtype="float32")
    assert plan(target=fp32_cfg).curves == plan().curves


def staggered(*extra: str) -> Plan:
    """Long prompts at varied lengths: arrivals spread out, chunks share decode steps."""
    p = plan(*extra, input_len=4096, output_len=256)
    p.scenario = replace(p.scenario, staggered=True)
    return p


def test_staggered_arrivals_prefill_chunks_stretch_every_running_requests_tpot() -> None:
    p = staggered()
    stretch = []
    for c in (1, 4, 8):
        pred = predict(p.scenario, c, p.cap_off, False)
        stretch.append(pred.tpot_ms / (pred.step_s * 1000))
    # Alone, TPOT is the step; with more users, more of their prefills land in its steps.
    assert stretch[0] == pytest.approx(1.0)
    assert 1.0 < stretch[1] < stretch[2]
    # Fixed lengths (the field sweeps) arrive in waves: decode steps carry no prefill.
    waves = predict(replace(p.scenario, staggered=False), 8, p.cap_off, False)
    assert waves.tpot_ms == pytest.approx(waves.step_s * 1000)


def test_mixed_chunks_trade_the_slow_step_against_the_new_requests_ttft() -> None:
    mixed = "--enable-mixed-chunk"
    small = staggered(mixed, "--chunked-prefill-size", "512")
    large = staggered(mixed, "--chunked-prefill-size", "4096")
    assert small.scenario.chunked_prefill_size == 512 and small.scenario.mixed_chunk
    s = predict(small.scenario, 8, small.cap_off, False)
    big = predict(large.scenario, 8, large.cap_off, False)
    # A 4,096-token chunk makes one step as slow as a whole prefill; 512-token chunks spread it.
    assert big.itl_p99_ms > 2 * s.itl_p99_ms > 2 * s.itl_ms
    # The prompt split in 8 chunks rides 8 steps of the running batch instead of one.
    assert s.ttft_ms > big.ttft_ms + 6 * s.step_s * 1000
    # Mean TPOT pays the same prefill work either way.
    assert s.tpot_ms == pytest.approx(big.tpot_ms, rel=0.01)


def test_without_mixed_chunks_decodes_wait_for_the_whole_prefill() -> None:
    # SGLang's default: prefill batches (every chunk of a prompt) go before the decode batch.
    small, large = staggered("--chunked-prefill-size", "512"), staggered()
    assert not small.scenario.mixed_chunk
    s = predict(small.scenario, 8, small.cap_off, False)
    big = predict(large.scenario, 8, large.cap_off, False)
    assert s.itl_p99_ms == pytest.approx(big.itl_p99_ms)
    assert s.itl_p99_ms > s.step_s * 1000 + 0.9 * s.prefill_s * 1000
    assert s.ttft_ms == pytest.approx(big.ttft_ms)
    # The same chunks mixed into the decode steps: the slow step is one chunk, not the prompt.
    mixed = staggered("--enable-mixed-chunk", "--chunked-prefill-size", "512")
    assert predict(mixed.scenario, 8, mixed.cap_off, False).itl_p99_ms < s.itl_p99_ms / 4


def test_a_synchronous_worker_pays_its_host_work_for_each_draft_step() -> None:
    """Before the draft graph replays, the synchronous worker prepares each draft step's
    attention metadata on the host (``Calibration.spec_sync_step_s``): a step with more draft
    steps waits longer, SGLang's adaptive tiers pay for the steps they run, an NGRAM draft
    (a trie, no draft loop) pays only the stages', and under spec V2 none of it is seen."""
    spec_v1 = replace(plan().scenario, spec_overlap=False)
    assert spec_v1.spec is not None
    host = CAL.schedule_s_per_step + CAL.schedule_s_per_request * 8
    for steps in (0, 1, 2, 3):
        gpu_s = gpu_step_time(spec_v1, 8, True, CAL, steps)
        expected = gpu_s + host + CAL.spec_sync_host_s + steps * CAL.spec_sync_step_s
        assert step_time(spec_v1, 8, True, CAL, steps) == pytest.approx(expected)
    assert CAL.spec_sync_step_s > 0
    assert sync_spec_host_s(SpecShape("EAGLE3", 8, 1, 9), CAL) > sync_spec_host_s(
        SpecShape("EAGLE3", 2, 1, 3), CAL
    )
    assert sync_spec_host_s(SpecShape("NGRAM", 8, 1, 9), CAL) == CAL.spec_sync_host_s
    overlapped = plan().scenario
    longer = replace(CAL, spec_sync_step_s=1.0)
    assert step_time(overlapped, 8, True, longer) == step_time(overlapped, 8, True, CAL)
