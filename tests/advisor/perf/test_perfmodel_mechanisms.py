"""The performance model's mechanisms off its calibration set (issue 28): MTP drafts priced as
the layers SGLang loads, tensor parallelism's per-GPU-count costs, acceptance over prompt length.

Each test fails on the model before these mechanisms (the issue's blind checks).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from specserver_advisor.gpus import lookup_gpu
from specserver_advisor.perf import calibration
from specserver_advisor.perf.constants import DEFAULT_CALIBRATION
from specserver_advisor.perf.model import (
    DRAFT_SAMPLE_KERNELS,
    SELECT_TOP_K_KERNELS,
    eager_launches,
    forward_time,
    gpu_step_time,
)
from specserver_advisor.perf.parallelism import (
    DENSE_MLP_KERNELS,
    FORWARD_KERNELS,
    GQA_ATTENTION_KERNELS,
    MLA_ATTENTION_KERNELS,
    MOE_KERNELS,
    allreduce_s,
    kernel_floor_s,
    layer_kernels,
    layer_launch_s,
)
from specserver_advisor.perf.plan import Plan, PlanInputs, make_plan
from specserver_advisor.sglang.flags import parse_server_argv
from specserver_advisor.sglang.modelshape import shape_from_config

NEXTN_112 = [
    "--speculative-algorithm",
    "NEXTN",
    "--speculative-num-steps",
    "1",
    "--speculative-eagle-topk",
    "1",
    "--speculative-num-draft-tokens",
    "2",
]


def plan_of(argv: list[str], config: dict[str, Any], gpu: str, **kw: Any) -> Plan:
    values = parse_server_argv(["--model-path", "m", *argv]).values
    return make_plan(PlanInputs(values, config, None, lookup_gpu(gpu), **kw))


def deepseek_nextn() -> Plan:
    """DeepSeek-V3 FP8 on 8 x H200, NEXTN (1,1,2), the issue's accept length 1.87."""
    argv = [*NEXTN_112, "--tp-size", "8"]
    return plan_of(
        argv, calibration.field_config("deepseek-v3"), "H200", accept_length=1.87, concurrency=[1]
    )


def step_forwards(plan: Plan) -> tuple[float, float]:
    """(one MTP draft forward, one target decode forward) at batch 1, in seconds."""
    scn, cal = plan.scenario, DEFAULT_CALIBRATION
    assert scn.draft is not None
    context = scn.input_len + scn.output_len / 2
    draft = forward_time(
        scn, scn.draft, scn.draft_weight_bytes, scn.draft_kv_cell_bytes, 1, 1, context, cal
    )
    target = forward_time(
        scn, scn.target, scn.target_weight_bytes, scn.kv_cell_bytes, 1, 1, context, cal
    )
    return draft, target


def test_the_mtp_draft_step_is_a_small_fraction_of_a_target_decode_step() -> None:
    draft, target = step_forwards(deepseek_nextn())
    # One decoder layer of 61 (MoE, routed like the target's), plus the shared head it reads.
    assert draft < 0.1 * target, (draft, target)


def test_the_mtp_draft_is_its_nextn_layers_on_the_shared_head() -> None:
    scn = deepseek_nextn().scenario
    assert scn.draft is not None
    assert scn.draft.num_layers == 1 and scn.draft.moe_layers == 1
    head = scn.target.vocab_size * scn.target.hidden_size * scn.target.dtype_bytes
    # The forward counts the head it shares; the memory plan counts only the draft's own layers.
    assert scn.draft_weight_bytes > head
    assert scn.draft_weight_bytes < scn.target_weight_bytes / 20


def test_mtp_speculation_pays_at_batch_one_on_deepseek_v3() -> None:
    point = deepseek_nextn().curves[0]
    assert point["concurrency"] == 1
    # Before: 0.64x (each draft step paid all 61 layers).
    assert point["on"]["output_tok_s"] > point["off"]["output_tok_s"]


#: Llama-3.1-70B's shape with an FP8 checkpoint (public config values).
LLAMA_70B_FP8: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 8192,
    "intermediate_size": 28672,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "num_hidden_layers": 80,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "torch_dtype": "bfloat16",
    "quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic"},
}


def dense_70b(tp: int, gpu: str = "H100", nnodes: int = 1) -> Plan:
    argv = ["--tp-size", str(tp), "--nnodes", str(nnodes)]
    return plan_of(argv, LLAMA_70B_FP8, gpu, concurrency=[1])


def test_a_70b_fp8_tp4_h100_decode_step_is_its_streamed_time_plus_latency_bound_kernels() -> None:
    cal = DEFAULT_CALIBRATION
    scn = dense_70b(4).scenario
    step = gpu_step_time(scn, 1, False, cal)
    per_gpu = scn.target_weight_bytes / scn.tp_size
    # At the card's peak bandwidth (3,350 GB/s): the memory-bound time, ~5.3 ms.
    streamed = per_gpu / (scn.gpu.bandwidth_gbs * 1e9)
    assert 17e9 < per_gpu < 18.5e9
    # On a Hopper card each layer's ~18 small kernels (FP8: each GEMM quantises its input
    # first) pay the generation's kernel floor, not the L4's work scaled by TFLOPS, and each
    # layer two one-shot all-reduces: 80 layers of them are several ms on top of the stream.
    dense, _ = layer_kernels(scn.target)
    assert dense == GQA_ATTENTION_KERNELS + DENSE_MLP_KERNELS + 4
    fixed = layer_launch_s(scn, scn.target, cal) + allreduce_s(scn, scn.target, 1, cal)
    assert fixed >= 80 * (dense * cal.kernel_floor_s + 2 * cal.allreduce_latency_s)
    assert streamed + fixed < step < 1.2 * (streamed + fixed), (step, streamed, fixed)


def test_tensor_parallel_costs_are_per_gpu_count() -> None:
    cal = DEFAULT_CALIBRATION
    one, four, eight = (dense_70b(tp).scenario for tp in (1, 4, 8))
    target = one.target
    assert allreduce_s(one, target, 1, cal) == 0.0
    # Two all-reduces per layer, each at least the link's latency.
    assert allreduce_s(four, target, 1, cal) >= 2 * 80 * cal.allreduce_latency_s
    # Streamed bytes split over the GPUs; the fixed costs do not, so TP 8 is less than 2x TP 4.
    t4 = gpu_step_time(four, 1, False, cal)
    t8 = gpu_step_time(eight, 1, False, cal)
    assert t4 / 2 < t8 < t4
    # The L4's small kernels do real work at its rate (the fitted per-layer work); on the
    # H100 the same kernels are latency-bound: they cost the floor, not the L4's work / TFLOPS.
    l4_one, l4_four = dense_70b(1, "L4").scenario, dense_70b(4, "L4").scenario
    launch_1, launch_4 = (layer_launch_s(s, target, cal) for s in (l4_one, l4_four))
    assert launch_1 / 4 < launch_4 < 0.6 * launch_1
    dense, _ = layer_kernels(target)
    floor = (80 * dense + FORWARD_KERNELS) * cal.kernel_floor_s
    assert layer_launch_s(one, target, cal) == layer_launch_s(four, target, cal)
    assert layer_launch_s(four, target, cal) == layer_launch_s(eight, target, cal)
    assert layer_launch_s(eight, target, cal) == pytest.approx(floor)
    # The L4's small-kernel work scaled down by the H100's TFLOPS is below that floor.
    assert layer_launch_s(l4_four, target, cal) * 121 / 989 < floor


def test_the_layer_floor_counts_kernels_by_mechanism() -> None:
    """MLA and MoE with shared experts launch more kernels than GQA and a dense MLP; an FP8
    checkpoint adds each GEMM's activation quantisation; AMD's HIP graphs pay their own floor."""
    cal = DEFAULT_CALIBRATION
    deepseek = shape_from_config(calibration.field_config("deepseek-v3"))
    llama = shape_from_config(calibration.field_config("llama-3.1-8b"))
    ds_dense, ds_moe = layer_kernels(deepseek)
    ll_dense, _ = layer_kernels(llama)
    assert ds_moe > ds_dense > ll_dense
    assert ds_moe == MLA_ATTENTION_KERNELS + MOE_KERNELS + 3 + (3 + 2 + 2)
    h200 = dense_70b(8, "H200").scenario
    mi300 = dense_70b(8, "MI300X").scenario
    assert layer_launch_s(mi300, llama, cal) / layer_launch_s(h200, llama, cal) == pytest.approx(
        cal.cdna3_kernel_floor_s / cal.kernel_floor_s
    )


def test_an_all_reduce_across_nodes_is_bound_by_the_inter_node_link() -> None:
    cal = DEFAULT_CALIBRATION
    inside, across = dense_70b(8).scenario, dense_70b(8, nnodes=2).scenario
    target = inside.target
    # At batch 1 latency dominates: across nodes pays the NIC's latency on every all-reduce.
    assert allreduce_s(across, target, 1, cal) > allreduce_s(inside, target, 1, cal)
    # A large prefill chunk is bandwidth-bound: NVLink is ~an order of magnitude faster.
    big = 8192
    ratio = allreduce_s(across, target, big, cal) / allreduce_s(inside, target, big, cal)
    assert ratio > 5
    assert across.gpu.link_gbs / cal.internode_gbs >= 5


def eagle3_70b(prompt: int, draft: dict[str, Any] | None = None) -> Plan:
    """The field lesson's launch: a 70B FP8 target, an EAGLE-3 draft of 2,048 positions and
    no rope scaling, started with the override variable, on 4 x H100 at ``prompt`` tokens."""
    argv = ["--tp-size", "4", "--speculative-algorithm", "EAGLE3", "--speculative-num-steps"]
    argv += ["3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]
    argv += ["--speculative-draft-model-path", "draft"]
    values = parse_server_argv(["--model-path", "m", *argv]).values
    inputs = PlanInputs(
        values,
        LLAMA_70B_FP8,
        draft or calibration.field_config("eagle3-2048-positions"),
        lookup_gpu("H100"),
        env={"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1"},
        input_len=prompt,
        concurrency=[1],
    )
    return make_plan(inputs)


def test_acceptance_at_five_times_the_drafts_context_is_below_acceptance_at_half() -> None:
    half, five = eagle3_70b(1024), eagle3_70b(10240)
    assert five.scenario.accept_length < half.scenario.accept_length
    # The field's verdict: paying at 1k-token prompts, slower than none at 10k (the model
    # before said 4.3x and 3.6x on the same prior acceptance).
    assert gain(half) > 1.5
    assert gain(five) < 1.0
    assert any("trained on" in note for note in five.notes)


def test_the_targets_rope_scaling_on_the_draft_keeps_its_acceptance() -> None:
    fixed = dict(calibration.field_config("eagle3-2048-positions"))
    fixed["max_position_embeddings"] = 131072
    fixed["rope_scaling"] = {
        "rope_type": "llama3",
        "factor": 8.0,
        "original_max_position_embeddings": 8192,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
    }
    assert eagle3_70b(10240, fixed).scenario.accept_length == eagle3_70b(1024).accept_length


def test_plan_and_the_simulated_engine_price_position_alike() -> None:
    from specserver_advisor.perf.acceptcontext import accept_at_prompt, mean_retained
    from specserver_engine.sim.acceptance import long_context_factor

    for position in (1024, 2048, 4096, 10240):
        assert long_context_factor(position, 2048) == mean_retained(position, position, 2048)
    # Within the trained context nothing changes; past it the accept length falls towards 1.
    assert accept_at_prompt(2.7, 1024, 128, 2048) == 2.7
    assert 1.0 < accept_at_prompt(2.7, 10240, 128, 2048) < 1.2
    assert accept_at_prompt(2.7, 10240, 128, None) == 2.7


def gain(plan: Plan) -> float:
    point = plan.curves[0]
    return float(point["on"]["output_tok_s"] / point["off"]["output_tok_s"])


def wide_tree_a6000(*extra: str) -> Plan:
    """The workstation case: Qwen3-8B + EAGLE-3 at (5,8,32) on an A6000, at 1 and 20 users."""
    argv = ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "5"]
    argv += ["--speculative-eagle-topk", "8", "--speculative-num-draft-tokens", "32"]
    argv += ["--speculative-draft-model-path", "draft", *extra]
    values = parse_server_argv(["--model-path", "m", *argv]).values
    inputs = PlanInputs(
        values,
        calibration.field_config("qwen3-8b"),
        calibration.field_config("qwen3-8b-eagle3"),
        lookup_gpu("A6000"),
        concurrency=[1, 20],
    )
    return make_plan(inputs)


def test_a_verify_computes_the_captured_batch_it_pads_to() -> None:
    scn = wide_tree_a6000().scenario
    assert scn.cuda_graph_max_bs == 32
    cal = DEFAULT_CALIBRATION
    # A speculative launch captures SGLang's finer list (every 4 from 32 to 64): 33..40
    # requests replay the 40 graph, 40 x 32 verify positions of compute each time.
    spec64 = replace(scn, cuda_graph_max_bs=64)
    verify = [
        forward_time(
            spec64, scn.target, scn.target_weight_bytes, scn.kv_cell_bytes, b, 32, 576, cal, True
        )
        for b in (33, 40)
    ]
    assert verify[0] > 0.95 * verify[1]
    # The plain engine's list is coarser (12, 16, 24, ...): 17..24 requests replay the 24 graph.
    plain = [
        forward_time(scn, scn.target, scn.target_weight_bytes, scn.kv_cell_bytes, b, 32, 576, cal)
        for b in (17, 24)
    ]
    assert plain[0] > 0.95 * plain[1]
    # Above the captured max the batch runs eagerly, unpadded.
    eager = replace(scn, cuda_graph_max_bs=16)
    assert forward_time(
        eager, scn.target, scn.target_weight_bytes, scn.kv_cell_bytes, 20, 32, 576, cal
    ) < forward_time(scn, scn.target, scn.target_weight_bytes, scn.kv_cell_bytes, 20, 32, 576, cal)


def test_the_wide_tree_pays_at_batch_one_and_loses_at_twenty_users() -> None:
    plan = wide_tree_a6000()
    one, twenty = plan.curves
    assert one["on"]["output_tok_s"] > 2 * one["off"]["output_tok_s"]
    # the field measured a loss at 20 users (field-measurements.md)
    assert twenty["on"]["output_tok_s"] < twenty["off"]["output_tok_s"]


def test_an_eager_speculative_step_pays_its_draft_loops_selection_kernels() -> None:
    """Run as its user ran it (captured below 20), the wide tree's draft loop is eager: its
    top-k selection and tree kernels, replayed inside the draft graph when captured, are
    launched one by one, beyond what its forwards take."""
    cal = DEFAULT_CALIBRATION
    eager = wide_tree_a6000("--cuda-graph-max-bs-decode", "16").scenario
    assert eager.cuda_graph_max_bs == 16 and eager.spec is not None and eager.draft is not None
    # Every batch captured and none padded: the same forwards, without the eager launches.
    graphed = replace(eager, cuda_graph_max_bs=None)

    def eager_cost(steps: int) -> float:
        spec = replace(eager.spec, num_steps=steps) if eager.spec else None
        on, off = replace(eager, spec=spec), replace(graphed, spec=spec)
        return gpu_step_time(on, 20, True, cal) - gpu_step_time(off, 20, True, cal)

    # Tens of kernels at an eager launch each.
    assert eager_cost(5) > 0.5e-3
    # Per draft step: a deeper tree selects more often, at a launch per selection kernel
    # where a captured loop pays the card's kernel floor.
    per_kernel = cal.eager_launch_s - kernel_floor_s(eager.gpu, cal)
    selection = 2 * (SELECT_TOP_K_KERNELS + DRAFT_SAMPLE_KERNELS) * per_kernel
    assert eager_cost(5) - eager_cost(3) >= selection - 1e-9
    # Plain decoding has no draft loop: eager, its forward takes the longer of its GPU work
    # and its kernels' launches from Python.
    plain = gpu_step_time(eager, 20, False, cal)
    launches = eager_launches(eager, eager.target, 20, cal)
    assert launches > 0 and eager_launches(graphed, graphed.target, 20, cal) == 0
    assert plain == pytest.approx(max(gpu_step_time(graphed, 20, False, cal), launches))
    # Within the captured batch nothing is eager: the batch-1 gain stands.
    one, _ = wide_tree_a6000("--cuda-graph-max-bs-decode", "16").curves
    assert one["on"]["output_tok_s"] > 2 * one["off"]["output_tok_s"]


def test_a_tree_prior_is_bounded_by_the_nodes_one_verify_checks() -> None:
    """A tree's extra candidates are right far less often than the first (its misses fall as
    1/sqrt(width)), and the verify pass checks only draft tokens - 1 nodes: a (5,8,6) launch is
    a chain, and an 8-wide tree of 5 steps stays well under the 6-token ceiling."""
    from specserver_advisor.perf.plan import prior_accept_length

    chain = prior_accept_length("EAGLE3", 5, 1, 6)
    assert prior_accept_length("EAGLE3", 5, 8, 6) == chain
    assert chain < prior_accept_length("EAGLE3", 5, 8, 32) < 5.0
    assert prior_accept_length("EAGLE3", 3, 1, 4) == pytest.approx(2.73, abs=0.01)


def test_the_wide_tree_run_as_its_user_ran_it_loses_at_twenty_users() -> None:
    """The workstation case with a captured max below 20 (both modes eager at 20 users): still
    more than twice as fast at batch 1, slower at 20 (the field: about a quarter slower)."""
    plan = wide_tree_a6000("--cuda-graph-max-bs-decode", "16")
    one, twenty = plan.curves
    assert one["on"]["output_tok_s"] > 2 * one["off"]["output_tok_s"]
    assert twenty["on"]["output_tok_s"] < twenty["off"]["output_tok_s"]
