"""The performance model's mechanisms off its calibration set (issue 28): MTP drafts priced as
the layers SGLang loads, tensor parallelism's per-GPU-count costs, acceptance over prompt length.

Each test fails on the model before these mechanisms (the issue's blind checks).
"""

from __future__ import annotations

from typing import Any

from specserver_advisor import calibration
from specserver_advisor.gpus import lookup_gpu
from specserver_advisor.perfmodel import DEFAULT_CALIBRATION, forward_time
from specserver_advisor.plan import Plan, PlanInputs, make_plan
from specserver_advisor.sglang.flags import parse_server_argv

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
    assert point["on"]["output_tok_s"] > 1.2 * point["off"]["output_tok_s"]
