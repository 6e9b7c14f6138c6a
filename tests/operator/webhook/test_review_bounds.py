"""A review's work is bounded before it starts (issue 38): the largest AdmissionReview the
webhook accepts (4 MiB) costs well under a second of CPU, whatever it holds: 200,000 unknown
extraArgs are refused by their count before one is parsed as a flag."""

from __future__ import annotations

import json
import time
from typing import Any

import yaml

from specserver_operator.webhook.admission import MAX_BODY, admission_response, answer_body
from stack import REPO


def _example() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(
        (REPO / "manifests/examples/qwen3-8b-eagle3-l4.yaml").read_text()
    )
    doc["metadata"]["namespace"] = "tenant-a"
    return doc


def _body(obj: dict[str, Any]) -> bytes:
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "u-1", "operation": "CREATE", "namespace": "tenant-a", "object": obj},
    }
    return json.dumps(review).encode()


def _answer(body: bytes) -> tuple[dict[str, Any], float]:
    start = time.process_time()
    answer = answer_body(body, admission_response)
    return answer, time.process_time() - start


def test_many_unknown_extra_args_are_refused_by_count_within_the_cpu_budget() -> None:
    obj = _example()
    extra = [f"--x{i}" for i in range(200_000)]
    obj["spec"]["engine"]["extraArgs"] = extra
    body = _body(obj)
    assert len(body) < MAX_BODY
    answer, spent = _answer(body)
    response = answer["response"]
    assert response["allowed"] is False
    assert "spec.engine.extraArgs" in response["status"]["message"]
    assert "256" in response["status"]["message"]
    assert spent < 1.0, f"{spent:.2f} s of CPU for one review"


def test_the_most_extra_args_accepted_are_reviewed_within_the_cpu_budget() -> None:
    obj = _example()
    obj["spec"]["engine"]["extraArgs"] = [f"--x{i}-" + "y" * 4000 for i in range(256)]
    answer, spent = _answer(_body(obj))
    assert answer["response"]["allowed"] is False  # unknown flags
    assert spent < 1.0, f"{spent:.2f} s of CPU for one review"
