"""Pure operator logic: conditions, validation and the rendered SGLang argv."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from specserver_advisor.lint.launchlint import build_engine_config
from specserver_advisor.loaders.configchain import ConfigSourceError, ModelConfigs
from specserver_advisor.models import SpecServer
from specserver_advisor.sglang.flags import parse_server_argv
from specserver_operator.core import conditions as cond
from specserver_operator.core.status import compute_status, status_changes
from specserver_operator.reconcile.configsource import from_configmap
from stack import REPO, load_config

QWEN = ModelConfigs(load_config("qwen3-8b"), load_config("qwen3-8b-eagle3"), None, None, "t")


def server(**spec: Any) -> SpecServer:
    doc = yaml.safe_load((REPO / "manifests/examples/qwen3-8b-eagle3-l4.yaml").read_text())
    doc["metadata"]["namespace"] = "llm"
    doc["spec"].update(spec)
    return SpecServer.model_validate(doc)


def test_last_transition_time_moves_only_on_a_flip() -> None:
    first = cond.set_condition([], cond.condition("Ready", "False", "A", "", 1, "t1"), "t1")
    same = cond.set_condition(first, cond.condition("Ready", "False", "B", "m", 2, "t2"), "t2")
    assert same[0].last_transition_time == "t1" and same[0].reason == "B"
    flip = cond.set_condition(same, cond.condition("Ready", "True", "C", "", 2, "t3"), "t3")
    assert flip[0].last_transition_time == "t3"
    many = cond.set_condition(flip, cond.condition("ConfigValid", "True", "V", "", 2, "t3"), "t3")
    assert [c.type for c in many] == ["Ready", "ConfigValid"]
    assert first[0].status == "False" and first[0].message == "A"  # input untouched


def test_conditions_are_typed_and_written_as_the_api_stores_them() -> None:
    ready = cond.condition("Ready", "True", "EngineReady", "1/1", 4, "t1")
    assert cond.as_api([ready]) == [
        {
            "type": "Ready",
            "status": "True",
            "reason": "EngineReady",
            "message": "1/1",
            "observedGeneration": 4,
            "lastTransitionTime": "t1",
        }
    ]
    assert cond.parse(cond.as_api([ready])) == [ready]
    # A stored entry the model cannot read (edited by hand) is left out, so it is rewritten.
    stored = [*cond.as_api([ready]), {"type": "Progressing", "status": "maybe"}, "junk"]
    assert cond.parse(stored) == [ready] and cond.parse(None) == []
    with pytest.raises(ValueError):
        cond.condition("Ready", "Maybe", "R", "", 1, "t")
    # put: in place, the old time unless the status flips; a new type goes in TYPES order.
    two = cond.put([ready], "ConfigValid", "True", "Valid", "", 4, "t2")
    kept = cond.put(two, "Ready", "True", "EngineReady", "2/2", 5, "t3")
    assert [c.type for c in kept] == ["Ready", "ConfigValid"]
    assert (kept[0].last_transition_time, kept[0].message) == ("t1", "2/2")
    flipped = cond.put(kept, "Ready", "False", "EngineNotReady", "", 5, "t4")
    assert flipped[0].last_transition_time == "t4" and kept[0].status == "True"


def test_eagle3_without_cap_renders_a_computed_explicit_value() -> None:
    s = server()
    s.spec.engine.max_running_requests = None
    cfg = build_engine_config(s.spec, QWEN, True)
    assert cfg.valid and cfg.max_running_requests_source == "Computed"
    args = parse_server_argv(cfg.args).values
    assert args["max_running_requests"] == cfg.max_running_requests
    assert 1 <= cfg.max_running_requests < 48  # the pool, not SGLang's silent 48
    for name in (
        "speculative_num_steps",
        "speculative_eagle_topk",
        "speculative_num_draft_tokens",
        "speculative_accept_threshold_single",
    ):
        assert name in args
    assert args["host"] == "0.0.0.0" and args["enable_metrics"] is True


def test_mode_off_has_no_speculative_flags_and_its_own_cap() -> None:
    s = server()
    s.spec.engine.max_running_requests = None
    on = build_engine_config(s.spec, QWEN, True)
    off = build_engine_config(s.spec, QWEN, False)
    assert off.valid and not any(a.startswith("--speculative") for a in off.args)
    assert off.max_running_requests > on.max_running_requests  # no draft: a larger pool


def test_short_draft_is_spec002_and_renders_nothing() -> None:
    s = server()
    configs = ModelConfigs(
        load_config("llama-3.1-8b"), load_config("eagle3-2048-positions"), None, None, "t"
    )
    cfg = build_engine_config(s.spec, configs, True)
    assert not cfg.valid and cfg.reason == "SPEC002" and cfg.args == []
    assert "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN" in cfg.message


@pytest.mark.parametrize(
    "flag",
    [
        "--max-running-requests",
        "--speculative-num-steps",
        "--host",
        "--port",
        "--enable-metrics",
        "--max-running",
    ],
)
def test_owned_flags_are_refused_in_extra_args(flag: str) -> None:
    s = server()
    s.spec.engine.extra_args = [flag, "4"] if flag != "--enable-metrics" else [flag]
    cfg = build_engine_config(s.spec, QWEN, True)
    assert not cfg.valid and cfg.reason == "OwnedFlagInExtraArgs"
    assert "extraArgs may not set" in cfg.message


def test_removed_and_unknown_flags_in_extra_args() -> None:
    s = server()
    s.spec.engine.extra_args = ["--cuda-graph-max-bs", "8"]
    assert build_engine_config(s.spec, QWEN, True).reason == "SPEC015"
    s.spec.engine.extra_args = ["--not-a-flag"]
    assert build_engine_config(s.spec, QWEN, True).reason == "InvalidFlag"


def test_configmap_source_errors_name_the_key() -> None:
    with pytest.raises(ConfigSourceError, match=r"target-config\.json"):
        from_configmap("cm", {"draft-config.json": "{}"}, True)
    with pytest.raises(ConfigSourceError, match="not valid JSON"):
        from_configmap("cm", {"target-config.json": "{x"}, False)
    ok = from_configmap(
        "cm",
        {
            "target-config.json": json.dumps(load_config("qwen3-8b")),
            "target-index.json": json.dumps({"metadata": {"total_size": 5}}),
        },
        False,
    )
    assert ok.target_weight_bytes == 5 and ok.draft is None


def test_status_for_an_invalid_spec_keeps_a_healthy_engine_ready() -> None:
    s = server()
    bad = build_engine_config(
        s.spec,
        ModelConfigs(
            load_config("llama-3.1-8b"), load_config("eagle3-2048-positions"), None, None, "t"
        ),
        True,
    )
    deployment = {
        "metadata": {"generation": 3, "labels": {"specserver.io/mode": "on"}},
        "status": {"readyReplicas": 1, "updatedReplicas": 1, "observedGeneration": 3},
    }
    status = compute_status(
        generation=5,
        current={},
        cfg=bad,
        config_error=None,
        deployment=deployment,
        replicas=1,
        now="t",
    )
    by_type = {c.type: c for c in status["conditions"]}
    assert by_type["ConfigValid"].status == "False"
    assert by_type["ConfigValid"].reason == "SPEC002"
    assert by_type["Ready"].status == "True"
    assert status["observedGeneration"] == 5
    assert status_changes(status, status) == {}


def test_nextn_without_a_draft_on_a_target_without_mtp_layers_is_invalid() -> None:
    s = server(
        speculative={"algorithm": "NEXTN", "numSteps": 3, "eagleTopk": 1, "numDraftTokens": 4}
    )
    s.spec.draft = None
    cfg = build_engine_config(s.spec, QWEN, True)
    assert not cfg.valid and cfg.reason == "SPEC007" and "NEXTN" in cfg.message
    no_mtp = {**load_config("deepseek-v3"), "num_nextn_predict_layers": 0}
    cfg = build_engine_config(s.spec, ModelConfigs(no_mtp, None, None, None, "t"), True)
    assert not cfg.valid and cfg.reason == "SPEC007"


def test_adaptive_renders_sglangs_flag_and_tells_the_policy() -> None:
    from specserver_advisor.launch.model import policy_context_for

    s = server()
    s.spec.speculative.adaptive = True
    cfg = build_engine_config(s.spec, QWEN, True)
    assert cfg.valid, cfg.message
    args = parse_server_argv(cfg.args).values
    assert args["speculative_adaptive"] is True
    assert args["speculative_num_steps"] in (1, 3, 5, 7)
    off = build_engine_config(s.spec, QWEN, False)
    assert "--speculative-adaptive" not in off.args  # Auto's Off engine has no draft at all
    assert policy_context_for(s.spec, QWEN).engine_adapts_steps
    assert not policy_context_for(server().spec, QWEN).engine_adapts_steps


@pytest.mark.parametrize(
    ("speculative", "message"),
    [
        ({"algorithm": "NGRAM", "adaptive": True}, "adaptive needs algorithm EAGLE or EAGLE3"),
        (
            {
                "algorithm": "EAGLE3",
                "numSteps": 3,
                "eagleTopk": 4,
                "numDraftTokens": 8,
                "adaptive": True,
            },
            "adaptive needs eagleTopk 1",
        ),
        ({"algorithm": "EAGLE3", "numSteps": 2, "adaptive": True}, "numSteps 1, 3, 5, 7, not 2"),
    ],
)
def test_adaptive_where_sglang_would_ignore_it_is_refused_naming_the_field(
    speculative: dict[str, Any], message: str
) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as err:
        server(speculative=speculative)
    assert message in str(err.value)
    assert err.value.errors()[0]["loc"] == ("spec", "speculative", "adaptive")


def test_topk_without_draft_tokens_is_refused_with_spec017() -> None:
    """SGLang's tokenizer manager raises TypeError at startup (max(topk * steps, None)): the
    operator refuses it, naming the field, instead of starting an engine that crashes."""
    s = server(speculative={"algorithm": "EAGLE3", "numSteps": 5, "eagleTopk": 4})
    cfg = build_engine_config(s.spec, QWEN, True)
    assert not cfg.valid and cfg.reason == "SPEC017", cfg
    assert "numDraftTokens" in cfg.message and "TypeError" in cfg.message
    assert build_engine_config(s.spec, QWEN, False).valid  # without the draft it starts
