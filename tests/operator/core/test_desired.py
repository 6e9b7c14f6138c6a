"""The pure core (desired.py) without any client: feed an ``Observed``, assert the plan.

The cluster is what the test writes into the snapshot: the children as the API server would
hold them after the plan was applied (hash annotation stamped, status Ready), hand edits made
on those, and the status the plan's patch leaves.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from passinputs import NOW, SETTINGS, condition, observed

from specserver_advisor.loaders.configchain import ModelConfigs
from specserver_advisor.loaders.configs import bundled
from specserver_operator.core.desired import PassPlan, desired
from specserver_operator.core.hashes import HASH_ANNOTATION
from specserver_operator.core.passcache import PassCache
from specserver_operator.core.statusmodel import serialized
from specserver_operator.reconcile.observe import validated
from stack import load_config

BODY: dict[str, Any] = {
    "apiVersion": "specserver.io/v1alpha1",
    "kind": "SpecServer",
    "metadata": {"name": "chat", "namespace": "llm", "uid": "u-1", "generation": 1},
    "spec": {
        "model": {"path": "Qwen/Qwen3-8B"},
        "draft": {"path": "Tengyunw/qwen3_8b_eagle3"},
        "speculative": {"algorithm": "EAGLE3", "numSteps": 3, "eagleTopk": 1, "numDraftTokens": 4},
        "mode": "Enabled",
        "engine": {"memFractionStatic": 0.85},
        "resources": {"gpuType": "L4"},
        "replicas": 2,
    },
}


def applied(plan: PassPlan) -> dict[tuple[str, str], dict[str, Any]]:
    """The children as the API server holds them once ``plan`` was written and rolled out."""
    out = {}
    assert plan.rendered is not None
    for write in plan.writes:
        obj = copy.deepcopy(plan.rendered.object(write.child))
        obj["metadata"].setdefault("annotations", {})[HASH_ANNOTATION] = write.child.digest
        obj["metadata"]["generation"] = 1
        if obj["kind"] == "Deployment":
            n = obj["spec"]["replicas"]
            obj["status"] = {"readyReplicas": n, "updatedReplicas": n, "observedGeneration": 1}
        out[(obj["kind"], obj["metadata"]["name"])] = obj
    return out


def settled() -> tuple[dict[str, Any], dict[tuple[str, str], dict[str, Any]], PassCache]:
    """A SpecServer whose plan was written: (body with its status, children, memo)."""
    memo = PassCache()
    first = desired(observed(BODY, memo=memo), SETTINGS, memo)
    kids = applied(first)
    second = desired(observed(BODY, kids, [], memo), SETTINGS, memo)
    body = dict(BODY, status=serialized(second.status))
    return body, kids, memo


def test_a_new_specserver_plans_its_children_and_a_status() -> None:
    plan = desired(observed(BODY), SETTINGS, PassCache())
    assert sorted((w.child.kind, w.child.name) for w in plan.writes) == [
        ("Deployment", "chat"),
        ("Service", "chat"),
    ]
    assert all(w.repair is None for w in plan.writes) and plan.deletions == []
    assert plan.patch["observedGeneration"] == 1
    assert condition(plan, "ConfigValid")["status"] == "True"


def test_nothing_changed_plans_no_write_at_all() -> None:
    body, kids, memo = settled()
    plan = desired(observed(body, kids, [], memo), SETTINGS, memo)
    assert (plan.writes, plan.deletions, plan.patch, plan.intent) == ([], [], {}, None)
    assert plan.status_events == [] and plan.events == []
    assert condition(plan, "Ready")["status"] == "True"
    assert serialized(plan.status)["speculationMode"] == "On"


def test_a_status_found_canonical_is_not_rebuilt_but_a_new_version_is_compared(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from specserver_operator.core import statusmodel

    body, kids, memo = settled()
    body["metadata"] = dict(body["metadata"], resourceVersion="7")
    first = desired(observed(body, kids, [], memo), SETTINGS, memo)
    assert first.patch == {} and memo.statuses["u-1"] == "7"  # the version, not the model

    def rebuilt(*_: Any) -> None:
        raise AssertionError("a canonical stored status was merged and compared again")

    with monkeypatch.context() as m:
        m.setattr(statusmodel, "typed_status", rebuilt)
        again = desired(observed(body, kids, [], memo), SETTINGS, memo)
    assert again.patch == {} and again.status == first.status  # read as stored
    edited = copy.deepcopy(body)
    edited["metadata"]["resourceVersion"] = "8"
    edited["status"]["legacyField"] = "x"  # someone wrote the status subresource
    assert desired(observed(edited, kids, [], memo), SETTINGS, memo).patch == {"legacyField": None}


def test_a_hand_edited_container_is_written_again() -> None:
    body, kids, memo = settled()
    edited = copy.deepcopy(kids)
    container = edited[("Deployment", "chat")]["spec"]["template"]["spec"]["containers"][0]
    container["args"] = [*container["args"], "--max-running-requests", "4096"]
    plan = desired(observed(body, edited, [], memo), SETTINGS, memo)
    assert [(w.child.kind, w.repair) for w in plan.writes] == [("Deployment", "containers")]


def test_hand_edited_replicas_are_restored_unless_an_autoscaler_owns_them() -> None:
    body, kids, memo = settled()
    edited = copy.deepcopy(kids)
    edited[("Deployment", "chat")]["spec"]["replicas"] = 0
    plan = desired(observed(body, edited, [], memo), SETTINGS, memo)
    assert [(w.child.name, w.repair) for w in plan.writes] == [("chat", "replicas 0 (want 2)")]
    hpa = [("HorizontalPodAutoscaler", "chat-hpa", "Deployment", "chat")]
    scaled = desired(observed(body, edited, hpa, memo), SETTINGS, memo)
    assert scaled.writes == []


def test_a_child_of_someone_else_is_a_condition_not_a_write() -> None:
    body, kids, memo = settled()
    theirs = copy.deepcopy(kids)
    service = theirs[("Service", "chat")]
    service["metadata"]["ownerReferences"] = [{"uid": "someone-else"}]
    service["metadata"]["annotations"][HASH_ANNOTATION] = "other"
    plan = desired(observed(body, theirs, [], memo), SETTINGS, memo)
    assert plan.writes == []
    progressing = condition(plan, "Progressing")
    assert (progressing["status"], progressing["reason"]) == ("False", "NameConflict")
    assert ("Warning", "NameConflict") in {(t, r) for t, r, _ in plan.status_events}


@pytest.mark.parametrize(
    ("change", "key", "says"),
    [
        ({"hidden_size": "big"}, "hidden_size", "big"),
        ({"architectures": {"Qwen3ForCausalLM": 1}}, "architectures", "expected a list"),
        ({"num_attention_heads": 0}, "num_attention_heads", "out of range"),
        ({"rope_scaling": [1]}, "rope_scaling", "expected an object"),
        ({"quantization_config": "fp8"}, "quantization_config", "expected an object"),
        ({"max_position_embeddings": "NaN"}, "max_position_embeddings", "'NaN'"),
    ],
)
def test_a_malformed_model_config_is_a_condition_not_an_exception(
    change: dict[str, Any], key: str, says: str
) -> None:
    bad = copy.deepcopy(BODY)
    target = {**load_config("qwen3-8b"), **change}
    bad["spec"]["modelSource"] = {
        "inline": {
            "targetConfig": json.dumps(target),
            "draftConfig": json.dumps(load_config("qwen3-8b-eagle3")),
        }
    }
    plan = desired(observed(bad), SETTINGS, PassCache())
    assert plan.writes == []
    valid = condition(plan, "ConfigValid")
    assert (valid["status"], valid["reason"]) == ("False", "InvalidModelConfig")
    assert key in valid["message"] and says in valid["message"], valid["message"]
    assert condition(plan, "Ready")["reason"] == "InvalidModelConfig"
    assert ("Warning", "InvalidModelConfig") in {(t, r) for t, r, _ in plan.status_events}


def test_an_invalid_spec_keeps_the_running_engine_and_says_why() -> None:
    body, kids, memo = settled()
    bad = copy.deepcopy(body)
    bad["metadata"]["generation"] = 2
    bad["spec"]["replicas"] = 2**40
    plan = desired(observed(bad, kids, [], memo), SETTINGS, memo)
    assert plan.writes == [] and plan.deletions == []
    valid = condition(plan, "ConfigValid")
    assert (valid["status"], valid["reason"]) == ("False", "InvalidSpec")
    assert "replicas" in valid["message"]
    ready = condition(plan, "Ready")  # the engine of the last valid spec still serves
    assert (ready["status"], ready["message"]) == ("True", "2/2 engine replicas ready")
    assert plan.patch["observedGeneration"] == 2


def test_a_draft_kv_cache_dtype_sglang_refuses_is_config_valid_false_naming_the_field() -> None:
    """It was an AssertionError in the argv builder: ReconcileFailed instead of ConfigValid."""
    bad = copy.deepcopy(BODY)
    bad["spec"]["speculative"]["draftKvCacheDtype"] = "zzz"
    plan = desired(observed(bad), SETTINGS, PassCache())
    valid = condition(plan, "ConfigValid")
    assert (valid["status"], valid["reason"]) == ("False", "InvalidSpec")
    assert "spec.speculative.draftKvCacheDtype: 'zzz' is not one of" in valid["message"]
    assert plan.writes == []


def test_a_stored_field_the_status_model_does_not_hold_is_removed() -> None:
    body, kids, memo = settled()
    stale = copy.deepcopy(body)
    stale["status"]["lastMetrics"] = {"tokensPerFortnight": 1}  # not a field the model has
    stale["status"]["legacyField"] = "x"
    plan = desired(observed(stale, kids, [], memo), SETTINGS, memo)
    assert plan.patch == {"lastMetrics": None, "legacyField": None}


def test_a_json_string_policy_state_is_planned_structured() -> None:
    body, kids, memo = settled()
    old = copy.deepcopy(body)
    old["status"]["policyState"] = json.dumps({"mode": "off", "mode_since": 5.0})
    plan = desired(observed(old, kids, [], memo), SETTINGS, memo)
    assert plan.patch == {"policyState": {**plan.patch["policyState"], "mode": "Off"}}
    assert plan.patch["policyState"]["modeSince"] == 5.0


def test_a_switch_left_in_status_does_not_outlive_auto() -> None:
    """An Auto SpecServer mid-switch to Off, then set to Enabled: it runs speculation again and
    the stale switch is cleared (it used to keep rendering the switch's target for ever)."""
    body, kids, memo = settled()
    stored = dict(
        body["status"],
        switch={"target": "Off", "previous": "On", "startedAt": NOW, "reason": "TTFTHigh"},
    )
    plan = desired(observed(dict(body, status=stored), kids, [], memo), SETTINGS, memo)
    assert plan.writes == [] and plan.deletions == []
    assert plan.patch.get("switch", "absent") is None  # the stale switch is removed
    assert serialized(plan.status)["speculationMode"] == "On"
    assert "switch" not in serialized(plan.status)


def test_an_auto_generation_renders_each_mode_once_policy_context_included(
    monkeypatch: Any,
) -> None:
    from specserver_advisor.launch import model as launch
    from specserver_advisor.lint import launchlint

    calls: list[bool] = []
    real = launchlint.build_engine_config

    def counted(spec: Any, configs: Any, speculative: bool, env: Any = None) -> Any:
        calls.append(speculative)
        return real(spec, configs, speculative, env)

    monkeypatch.setattr(launchlint, "build_engine_config", counted)
    monkeypatch.setattr("specserver_operator.core.desired.build_engine_config", counted)
    body = copy.deepcopy(BODY)
    body["spec"]["mode"] = "Auto"
    body["spec"]["autoSpeculation"] = {"evaluationIntervalSeconds": 5}
    plan = desired(observed(body), SETTINGS, PassCache())
    assert plan.decided.step is not None  # the policy was evaluated: its context was built
    assert calls.count(True) == 1, calls
    # The context is the speculative engine config's own: what replay and plan --from start from.
    rendered = real(plan_spec(body), bundled_configs(), True)
    assert rendered.policy == launch.policy_context_for(plan_spec(body), bundled_configs())


def plan_spec(body: dict[str, Any]) -> Any:
    server, _ = validated(body, PassCache())
    assert server is not None
    return server.spec


def bundled_configs() -> ModelConfigs:
    target, draft = bundled("Qwen/Qwen3-8B"), bundled("Tengyunw/qwen3_8b_eagle3")
    assert target is not None and draft is not None
    return ModelConfigs(target.config, draft.config, None, None, "bundled")
