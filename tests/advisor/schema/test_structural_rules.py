"""One table of structural rules (specserver_advisor.structural) and every enforcer: the CRD's CEL
rules (generated and committed in crds/), ``spec_problems``, the admission webhook's review,
ConfigValid (the reconcile pass's InvalidSpec) and lint. A rule in one and missing in another
fails here; the API server's own refusal is shown on the real
stack (tests/cluster/test_kube_stack.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from specserver_advisor.launch.validation import spec_problems
from specserver_advisor.lint.specservers import SpecServerError, launch_from_specserver
from specserver_advisor.models import SpecServer
from specserver_advisor.schema.crd import build_crd
from specserver_advisor.structural import RULES, Maximum, MaxItems, NoWhitespace, violation
from specserver_operator.core.passcache import PassCache
from specserver_operator.reconcile.observe import validated
from specserver_operator.webhook.admission import review_specserver
from stack import REPO

EXAMPLE = REPO / "manifests" / "examples" / "qwen3-8b-eagle3-l4.yaml"


def _spec_schema(crd: dict[str, Any]) -> dict[str, Any]:
    root = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    spec: dict[str, Any] = root["properties"]["spec"]
    return spec


def _cel_rules(node: dict[str, Any], path: tuple[str, ...] = ()) -> dict[tuple[str, ...], list]:
    """Every ``x-kubernetes-validations`` list below ``node``, by CRD path."""
    out = {}
    if "x-kubernetes-validations" in node:
        out[path] = node["x-kubernetes-validations"]
    for key, child in (node.get("properties") or {}).items():
        out.update(_cel_rules(child, (*path, key)))
    if "items" in node:
        out.update(_cel_rules(node["items"], (*path, "[]")))
    return out


def test_the_crds_cel_rules_are_exactly_the_tables() -> None:
    found = _cel_rules(_spec_schema(build_crd()))
    wanted: dict[tuple[str, ...], list[dict[str, str]]] = {}
    for rule in RULES:
        wanted.setdefault(rule.path, []).append(rule.cel())
    assert found == wanted


def test_the_committed_crd_carries_them() -> None:
    committed = yaml.safe_load((REPO / "crds" / "specserver.yaml").read_text())
    assert _cel_rules(_spec_schema(committed)) == _cel_rules(_spec_schema(build_crd()))


def test_each_message_names_its_field() -> None:
    for rule in RULES:
        assert rule.message().startswith(f"{rule.field}: ")
        assert rule.cel()["message"] == rule.message()


def _breaking(rule: Any) -> Any:
    if isinstance(rule, Maximum):
        return rule.maximum + 1
    if isinstance(rule, MaxItems):
        return ["--x"] * (rule.maximum + 1)
    assert isinstance(rule, NoWhitespace)
    return "two words"


def _doc_breaking(rule: Any, value: Any) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    doc["metadata"]["namespace"] = "llm"
    if rule.path[:2] == ("speculative", "ngram"):
        doc["spec"]["speculative"] = {"algorithm": "NGRAM"}
        doc["spec"].pop("draft", None)
    node = doc["spec"]
    for key in rule.path[:-1]:
        node = node.setdefault(key, {})
    node[rule.path[-1]] = value
    return doc


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.field)
def test_spec_problems_reports_each_rule_with_the_tables_message(rule: Any) -> None:
    value = _breaking(rule)
    try:
        server = SpecServer.model_validate(_doc_breaking(rule, value))
    except ValidationError as exc:  # the model bounds it too (before spec_problems runs)
        assert rule.path[-1] in str(exc)
        return
    problems = spec_problems(server)
    expected = violation(rule, value)
    assert expected is not None and expected.startswith(rule.field)
    assert expected in problems
    # At the bound the rule holds: spec_problems says nothing about that field.
    fine = copy.deepcopy(_doc_breaking(rule, value))
    node = fine["spec"]
    for key in rule.path[:-1]:
        node = node[key]
    if isinstance(rule, Maximum):
        node[rule.path[-1]] = rule.maximum
    elif isinstance(rule, MaxItems):
        node[rule.path[-1]] = ["--x"] * rule.maximum
    else:
        node[rule.path[-1]] = "registry.local/engine:1"
    ok = spec_problems(SpecServer.model_validate(fine))
    assert not [p for p in ok if p.startswith(f"{rule.field}:")], ok


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.field)
def test_the_webhook_configvalid_and_lint_refuse_each_rule_with_the_tables_message(
    rule: Any,
) -> None:
    value = _breaking(rule)
    doc = _doc_breaking(rule, value)
    doc["metadata"].update(uid="u-1", generation=1)
    expected = violation(rule, value)
    assert expected is not None
    try:
        SpecServer.model_validate(doc)
    except ValidationError:  # the model bounds it first: every enforcer says so, naming it
        expected = rule.path[-1]
    # The admission webhook (no model config needed to refuse it).
    assert any(expected in p for p in review_specserver(doc).problems)
    # ConfigValid: the reconcile pass's validation (core.desired makes it InvalidSpec's message).
    server, invalid = validated(doc, PassCache())
    assert server is None and invalid is not None and expected in invalid
    # lint: the SpecServer is refused, the diagnostic naming the rule's message.
    with pytest.raises(SpecServerError) as refused:
        launch_from_specserver("s.yaml", doc)
    assert expected in str(refused.value)
