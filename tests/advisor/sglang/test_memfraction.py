"""--mem-fraction-static when SGLang's heuristic leaves no KV cache: computed, or "does not fit"."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from specserver_advisor import findings
from specserver_advisor.gpus import lookup_gpu
from specserver_advisor.lint.launchlint import build_engine_config
from specserver_advisor.loaders.configchain import ModelConfigs
from specserver_advisor.models import SpecServer
from specserver_advisor.sglang.flags import parse_server_argv
from specserver_advisor.sglang.memfraction import CEILING, choose_fraction
from specserver_advisor.sglang.memory import plan_memory
from specserver_advisor.sglang.modelshape import shape_from_config
from specserver_operator.core.status import compute_status
from stack import REPO, load_config

QWEN = ModelConfigs(load_config("qwen3-8b"), load_config("qwen3-8b-eagle3"), None, None, "t")
QWEN30 = ModelConfigs(
    load_config("qwen3-30b-a3b"), load_config("qwen3-30b-a3b-eagle3"), None, None, "t"
)


def flagship(**engine: Any) -> SpecServer:
    """Qwen3-8B + EAGLE-3 on one L4, as the example, with engine fields replaced (None: unset)."""
    doc = yaml.safe_load((REPO / "manifests/examples/qwen3-8b-eagle3-l4.yaml").read_text())
    doc["metadata"]["namespace"] = "llm"
    doc["spec"]["engine"].pop("memFractionStatic", None)
    for key, value in engine.items():
        if value is None:
            doc["spec"]["engine"].pop(key, None)
        else:
            doc["spec"]["engine"][key] = value
    return SpecServer.model_validate(doc)


def rendered_fraction(args: list[str]) -> float | None:
    value = parse_server_argv(args).values.get("mem_fraction_static")
    return None if value is None else float(value)


@pytest.mark.parametrize("speculative", [True, False])
def test_flagship_without_mem_fraction_deploys_with_a_computed_one(speculative: bool) -> None:
    cfg = build_engine_config(flagship().spec, QWEN, speculative)
    assert cfg.valid, cfg.message
    fraction = rendered_fraction(cfg.args)
    assert fraction is not None and 0.701 < fraction <= CEILING
    assert cfg.mem_fraction_static == fraction and cfg.mem_fraction_static_source == "Computed"
    assert "heuristic --mem-fraction-static 0.701 leaves no KV cache" in (
        cfg.mem_fraction_static_reason
    )
    # The fraction gives the planned cap (the spec's 16) its KV, and no more than needed.
    assert cfg.max_running_requests == 16 and cfg.resolved["kvPoolTokens"] > 0
    assert not [code for code, _ in cfg.warnings if code == findings.CAP_EXCEEDS_KV_POOL]
    less = flagship(memFractionStatic=round(fraction - 0.01, 3)).spec
    smaller = build_engine_config(less, QWEN, speculative)
    assert not smaller.valid or smaller.resolved["kvPoolTokens"] < cfg.resolved["kvPoolTokens"]


def test_speculation_needs_more_memory_than_without() -> None:
    on = build_engine_config(flagship().spec, QWEN, True)
    off = build_engine_config(flagship().spec, QWEN, False)
    assert on.mem_fraction_static and off.mem_fraction_static
    assert on.mem_fraction_static > off.mem_fraction_static


def test_without_a_cap_the_card_batch_tier_is_planned_within_the_ceiling() -> None:
    cfg = build_engine_config(flagship(maxRunningRequests=None, extraArgs=[]).spec, QWEN, True)
    assert cfg.valid and rendered_fraction(cfg.args) == CEILING
    assert "the safe ceiling" in cfg.mem_fraction_static_reason
    assert cfg.max_running_requests and cfg.max_running_requests >= 1


def test_a_given_fraction_is_never_replaced() -> None:
    cfg = build_engine_config(flagship(memFractionStatic=0.85).spec, QWEN, True)
    assert rendered_fraction(cfg.args) == 0.85 and cfg.mem_fraction_static_source == "Spec"
    refused = build_engine_config(flagship(memFractionStatic=0.6).spec, QWEN, True)
    assert not refused.valid and refused.reason == findings.NO_KV_MEMORY
    # Written for the author: the field, the weights, the value that works, the alternative.
    assert refused.message.startswith("engine.memFractionStatic 0.6 leaves no KV cache after ")
    least = float(refused.message.split("set it to at least ")[1].split(",")[0])
    assert 0.6 < least <= CEILING and "the operator computes one" in refused.message
    assert build_engine_config(flagship(memFractionStatic=least).spec, QWEN, True).valid


def test_a_model_that_cannot_fit_says_how_many_gpus_never_a_fraction_above_one() -> None:
    doc = flagship().model_dump(by_alias=True, exclude_none=True)
    doc["spec"]["model"] = {"path": "Qwen/Qwen3-30B-A3B-Instruct-2507"}
    doc["spec"]["mode"] = "Disabled"
    server = SpecServer.model_validate(doc)
    cfg = build_engine_config(server.spec, QWEN30, False)
    assert not cfg.valid and cfg.reason == findings.NO_KV_MEMORY
    assert cfg.message.startswith(
        "does not fit on 1 x L4: needs >= 4 GPUs or a quantized checkpoint"
    ), cfg.message
    fractions = [float(f) for f in re.findall(r"mem-fraction-static (\d+(?:\.\d+)?)", cfg.message)]
    assert fractions and all(f <= 1 for f in fractions)


def test_status_shows_the_source_and_the_reason() -> None:
    cfg = build_engine_config(flagship().spec, QWEN, True)
    status = compute_status(
        generation=1, current={}, cfg=cfg, config_error=None, deployment=None, replicas=1, now="t"
    )
    assert status["memFractionStaticSource"] == "Computed"
    assert status["memFractionStatic"] == cfg.mem_fraction_static
    assert "0.701" in status["memFractionStaticReason"]
    given_cfg = build_engine_config(flagship(memFractionStatic=0.85).spec, QWEN, True)
    heuristic = compute_status(
        generation=1,
        current={},
        cfg=given_cfg,
        config_error=None,
        deployment=None,
        replicas=1,
        now="t",
    )
    assert heuristic["memFractionStaticSource"] == "Spec"


@given(
    planned=st.integers(min_value=1, max_value=4096),
    request=st.integers(min_value=1, max_value=200_000),
    speculative=st.booleans(),
)
def test_choose_fraction_never_exceeds_the_ceiling(
    planned: int, request: int, speculative: bool
) -> None:
    target = shape_from_config(load_config("qwen3-8b"))
    draft = shape_from_config(load_config("qwen3-8b-eagle3"))
    mem = plan_memory(
        lookup_gpu("L4"),
        target,
        16_400_000_000,
        draft,
        800_000_000,
        "EAGLE3" if speculative else None,
    )
    choice = choose_fraction(
        mem,
        request_tokens=request,
        planned_requests=planned,
        with_draft=speculative,
        gpus=1,
        gpu_name="L4",
    )
    if choice.fraction is None:
        assert "does not fit on 1 x L4: needs >= " in choice.message
    else:
        assert 0 < choice.fraction <= CEILING
