"""Generated hostile SpecServers against the webhook's review and the operator's ConfigValid.

Every leaf field of the CRD's spec schema (crds/specserver.yaml; the inline model configs are
covered by tests/cluster/test_webhook_hostile.py through an HF endpoint) is given values of the
wrong type, out of range, huge, empty and odd, one at a time, in the flagship example. Each
review must answer (never an exception: fail closed is the last resort, not the way a bad
field is reported), echo its uid, and come well within the deadline; and whatever the webhook
admits, the operator's own pass (desired.py, with the same bundled configs) must find valid:
the two run one check (speccheck.py) and must not drift apart.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import yaml
from passinputs import SETTINGS, condition, observed

from specserver_advisor.loaders.configs import bundled
from specserver_operator.core.desired import desired
from specserver_operator.core.passcache import PassCache
from specserver_operator.webhook.admission import admission_response, answer_body
from specserver_operator.webhook.secretreview import Caller
from stack import REPO

CRD = yaml.safe_load((REPO / "crds" / "specserver.yaml").read_text())
VALUES: dict[str | None, list[Any]] = {
    "integer": [0, -1, 2**63, "1", 1.5, None],
    "number": [0, -1.0, 1e308, "x", None],
    "string": ["", "x" * 5000, "a\x00b", " a b ", 7, None],
    "boolean": ["yes", 2, None],
    "array": [[None], "x", [{}] * 300, [[1]]],
    "object": [{"k" * 300: "v"}, [], "x"],
}


def _leaves(node: dict[str, Any], path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    if node.get("type") == "object" and "properties" in node:
        out = []
        for key, child in node["properties"].items():
            out += _leaves(child, (*path, key))
        return out
    return [(path, node.get("type"))]


SPEC = CRD["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
CASES = [
    (".".join(path), value)
    for path, kind in _leaves(SPEC)
    if path[:2] != ("modelSource", "inline")
    for value in VALUES.get(kind, [])
]


def base() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(
        (REPO / "manifests/examples/qwen3-8b-eagle3-l4.yaml").read_text()
    )
    doc["metadata"].update(namespace="llm", uid="u-1", generation=1)
    del doc["spec"]["engine"]["memFractionStatic"]  # the operator computes it
    del doc["spec"]["modelSource"]["hfTokenSecretRef"]
    return doc


def test_the_generator_covers_every_spec_field() -> None:
    fields = {path for path, _ in CASES}
    assert len(fields) >= 60, len(fields)
    assert {"speculative.draftKvCacheDtype", "engine.env", "resources.tolerations"} <= fields


@pytest.mark.parametrize(("path", "value"), CASES, ids=lambda v: repr(v)[:24])
def test_every_generated_specserver_gets_an_answer_and_the_operator_agrees(
    path: str, value: Any
) -> None:
    doc = base()
    node = doc["spec"]
    *parents, last = path.split(".")
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    review = {"request": {"uid": "r", "operation": "CREATE", "namespace": "llm", "object": doc}}
    started = time.process_time()  # CPU time: the verdict holds on a busy machine
    response = answer_body(
        json.dumps(review).encode(),
        lambda r: admission_response(r, lambda _: {"allowed": True}, Caller(True, "apiserver")),
    )["response"]
    assert time.process_time() - started < 2.0
    assert response["uid"] == "r" and isinstance(response["allowed"], bool)
    message = response.get("status", {}).get("message", "")
    assert "the review failed" not in message, message  # a field's problem is named, not raised
    assert "Traceback" not in message
    if not response["allowed"]:
        return
    spec = doc["spec"]
    if bundled(spec["model"]["path"]) is None or bundled(spec["draft"]["path"]) is None:
        return  # configs the operator would look for elsewhere (its ConfigValid says so)
    plan = desired(observed(doc), SETTINGS, PassCache())
    valid = condition(plan, "ConfigValid")
    assert valid["status"] == "True", (path, value, valid)
