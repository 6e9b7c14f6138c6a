"""What the schema lets through but Kubernetes or SGLang would not: each is refused with the
field's path (validation.py), and long or odd SpecServer names get short, valid child names
(names.py)."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from specserver_advisor.launch.validation import context_problems, spec_problems
from specserver_advisor.models import SpecServer
from specserver_operator.core.names import child_name

BASE: dict[str, Any] = {
    "metadata": {"name": "x", "namespace": "llm"},
    "spec": {
        "model": {"path": "Qwen/Qwen3-8B"},
        "draft": {"path": "Tengyunw/qwen3_8b_eagle3"},
        "speculative": {"algorithm": "EAGLE3"},
        "resources": {"gpuType": "L4"},
    },
}


def with_(path: str, value: Any) -> SpecServer:
    doc = copy.deepcopy(BASE)
    node = doc["spec"]
    *parents, last = path.split(".")
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return SpecServer.model_validate(doc)


def test_a_plain_spec_has_no_problems() -> None:
    assert spec_problems(SpecServer.model_validate(BASE)) == []


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        ("replicas", 2**40, "spec.replicas"),
        ("engine.startupTimeoutSeconds", 2**62, "spec.engine.startupTimeoutSeconds"),
        ("resources.gpus", 100000, "spec.resources.gpus"),
        ("speculative.numSteps", 10**9, "spec.speculative.numSteps"),
        ("engine.expectedInputTokens", 10**15, "spec.engine.expectedInputTokens"),
        ("resources.cpu", "lots", "spec.resources.cpu"),
        ("resources.memory", "64 GiB", "spec.resources.memory"),
        ("engine.env", [{"name": "FOO=BAR", "value": "1"}], "spec.engine.env[0].name"),
        ("engine.env", [{"name": "HF_TOKEN", "value": "x"}], "spec.engine.env[0].name"),
        ("engine.env", [{"name": "A"}, {"name": "A"}], "spec.engine.env[1].name"),
        ("resources.gpuResourceName", "gpu", "spec.resources.gpuResourceName"),
        ("resources.gpuResourceName", "nvidia.com/g pu", "spec.resources.gpuResourceName"),
        ("resources.nodeSelector", {"bad key!": "x"}, "spec.resources.nodeSelector"),
        ("resources.nodeSelector", {"gpu": "a b"}, "spec.resources.nodeSelector[gpu]"),
        ("modelSource.volume", {"hostPath": "/m", "mountPath": "/dev/shm"}, "mountPath"),
        ("modelSource.volume", {"hostPath": "/m", "mountPath": "models"}, "mountPath"),
        ("modelSource.volume", {"hostPath": "/m", "mountPath": "/a/../proc"}, "mountPath"),
        ("resources.tolerations", [{"operator": "Maybe"}], "tolerations[0].operator"),
        ("speculative.draftKvCacheDtype", "zzz", "spec.speculative.draftKvCacheDtype"),
        ("model.path", "Qwen/Qwen3-8B\x00--trust-remote-code", "spec.model.path"),
        ("draft.revision", "main\n", "spec.draft.revision"),
    ],
)
def test_each_problem_names_its_field(path: str, value: Any, field: str) -> None:
    problems = spec_problems(with_(path, value))
    assert problems, f"{path}={value!r} passed"
    assert field in problems[0]


def test_expected_tokens_must_fit_the_context() -> None:
    server = with_("engine.expectedInputTokens", 40000)
    assert "40128 tokens do not fit the 32768-token context" in context_problems(server, 32768)[0]
    assert context_problems(server, 131072) == []
    assert context_problems(with_("engine.contextLength", 4096), 131072) == []


@pytest.mark.parametrize(
    "name",
    ["a" * 253, "7b-model", "qwen3.8b", "x" * 60, "-".join(["ab"] * 40), "1.2.3", "9"],
)
def test_child_names_are_short_valid_and_distinct(name: str) -> None:
    base = child_name(name)
    assert re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", base), base
    assert len(base + "-off") <= 63
    assert child_name(name + "0") != base


def test_a_name_that_fits_is_kept() -> None:
    assert child_name("qwen3-8b") == "qwen3-8b"
    assert child_name("a" * 59) == "a" * 59


def _two_nodes(name: str, env: list[dict[str, str]] | None = None) -> SpecServer:
    doc = copy.deepcopy(BASE)
    doc["metadata"]["name"] = name
    doc["spec"]["resources"].update(gpus=16, nodes=2, gpuType="H100")
    doc["spec"]["engine"] = {"env": env or []}
    return SpecServer.model_validate(doc)


def test_a_multi_node_name_must_leave_room_for_the_group_pods() -> None:
    """LWS names the worker StatefulSet <lws>-<g> (its controller-revision-hash label adds 11)
    and the pods <lws>-<g>-<w>: a base past 41 characters would make names Kubernetes refuses.
    The same name on one node is shortened as every child name is, and accepted."""
    long = "a" * 50
    assert any(p.startswith("metadata.name") for p in spec_problems(_two_nodes(long)))
    assert spec_problems(_two_nodes("a" * 41)) == []
    one_node = copy.deepcopy(BASE)
    one_node["metadata"]["name"] = long
    assert spec_problems(SpecServer.model_validate(one_node)) == []


@pytest.mark.parametrize(
    "name", ["LWS_WORKER_INDEX", "LWS_LEADER_ADDRESS", "SGLANG_DISTRIBUTED_INIT_METHOD_OVERRIDE"]
)
def test_a_multi_node_group_reserves_the_rendezvous_env(name: str) -> None:
    problems = spec_problems(_two_nodes("ds", [{"name": name, "value": "0"}]))
    assert any(p.startswith("spec.engine.env[0].name") for p in problems), problems
