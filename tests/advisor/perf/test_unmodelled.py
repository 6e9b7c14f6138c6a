"""plan names what its curves do not price (issue 42 item 2): expert parallelism, DP attention
and 4-bit weights are accepted and predicted as plain tensor parallelism in the checkpoint's
bytes at the BF16 rate, so each is named, in the text notes and in the JSON's ``not_modelled``,
with the flags that asked for it and the direction of the error it implies."""

from __future__ import annotations

import json
import re

import pytest

from specserver_advisor.cli.main import main
from specserver_advisor.gpus import lookup_gpu
from specserver_advisor.perf.calibration import field_config
from specserver_advisor.perf.plan import PlanInputs, make_plan
from specserver_advisor.sglang.flags import parse_server_argv

R1 = ["--model", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--gpus", "8", "--algorithm", "NEXTN"]
R1 += ["--steps", "1", "--topk", "1", "--draft-tokens", "2", "--concurrency", "1,64"]


def _plan(*flags: str, config: str = "deepseek-v3", weights: int | None = None) -> list:
    argv = ["--model-path", "m", "--tp-size", "8", *flags]
    plan = make_plan(
        PlanInputs(
            parse_server_argv(argv).values,
            field_config(config),
            None,
            lookup_gpu("H200"),
            concurrency=[1],
            target_weight_bytes=weights,
        )
    )
    assert [u.note for u in plan.not_modelled] == [n for n in plan.notes if "not modelled" in n]
    return plan.not_modelled


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--ep-size", "8"], "--ep-size 8"),
        (["--moe-a2a-backend", "deepep"], "--moe-a2a-backend deepep"),
        (
            ["--ep-size", "8", "--moe-a2a-backend", "deepep"],
            "--ep-size 8, --moe-a2a-backend deepep",
        ),
    ],
)
def test_expert_parallelism_is_named_as_decode_too_fast(flags: list[str], named: str) -> None:
    (item,) = _plan(*flags)
    assert (item.feature, item.flags, item.error) == (
        "expert_parallelism",
        named,
        "decode predicted too fast",
    )
    # The all-to-alls' floor it leaves out is a positive time, which is why decode is too fast.
    floor = float(re.search(r"at least ~([0-9.]+) ms", item.detail).group(1))  # type: ignore[union-attr]
    assert floor > 0
    assert item.note.startswith(f"EP all-to-all not modelled ({named}): decode predicted too fast")


def test_expert_parallelism_on_a_dense_model_is_not_named() -> None:
    assert _plan("--ep-size", "8", config="qwen3-8b") == []


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--enable-dp-attention", "--dp-size", "8"], "--enable-dp-attention --dp-size 8"),
        (["--attn-dp-size", "4"], "--attn-dp-size 4"),
    ],
)
def test_dp_attention_is_named_with_both_directions(flags: list[str], named: str) -> None:
    (item,) = _plan(*flags)
    assert (item.feature, item.flags) == ("dp_attention", named)
    assert (
        "decode predicted too fast" in item.error and "throughput predicted too low" in item.error
    )


@pytest.mark.parametrize(
    "flags", [["--enable-dp-attention"], ["--enable-dp-attention", "--dp-size", "1"]]
)
def test_dp_attention_without_a_second_group_is_not_named(flags: list[str]) -> None:
    """SGLang moves ``--dp-size`` into the attention-DP size; at 1 no DP attention runs
    (``attn_dp_enabled_of``), so the plan names nothing and prices what runs."""
    assert _plan(*flags) == []
    assert [u.feature for u in _plan(*flags, "--dp-size", "2")] == ["dp_attention"]


@pytest.mark.parametrize(
    "method", ["modelopt_fp4", "mxfp4", "quark_mxfp4", "nvfp4_online", "w4afp8"]
)
def test_fp4_quantization_is_named_as_decode_too_slow(method: str) -> None:
    (item,) = _plan("--quantization", method)
    assert (item.feature, item.flags, item.error) == (
        "fp4_weights",
        f"--quantization {method}",
        "decode predicted too slow",
    )


def test_an_fp4_checkpoint_read_from_its_index_is_too_slow_only_at_large_batches() -> None:
    config = field_config("deepseek-v3")
    config = {**config, "quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4"}}
    argv = parse_server_argv(["--model-path", "m", "--tp-size", "8"]).values
    plan = make_plan(
        PlanInputs(
            argv, config, None, lookup_gpu("B200"), concurrency=[1], target_weight_bytes=4 * 10**11
        )
    )
    (item,) = plan.not_modelled
    assert (item.flags, item.error) == (
        "an FP4 checkpoint",
        "large batches predicted too slow, one request about right",
    )


def test_plain_tp_fp8_names_nothing() -> None:
    assert _plan() == []
    assert _plan("--quantization", "fp8") == []


def test_plan_text_and_json_name_each(capsys: pytest.CaptureFixture[str]) -> None:
    flags = ["--ep-size", "8", "--enable-dp-attention", "--dp-size", "8", "--quantization", "mxfp4"]
    assert main(["plan", *R1, *flags]) == 0
    text = capsys.readouterr().out
    for line in (
        "note: EP all-to-all not modelled (--ep-size 8): decode predicted too fast",
        "note: DP attention not modelled (--enable-dp-attention --dp-size 8): one request's decode",
        "note: FP4 weights not modelled (--quantization mxfp4): decode predicted too slow",
    ):
        assert line in text
    assert main(["plan", *R1, *flags, "--format", "json"]) == 0
    items = json.loads(capsys.readouterr().out)["not_modelled"]
    assert [i["feature"] for i in items] == ["expert_parallelism", "dp_attention", "fp4_weights"]
    assert all(i["error"] and i["detail"] and i["flags"] for i in items)
    assert main(["plan", *R1, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["not_modelled"] == []
