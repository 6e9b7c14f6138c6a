"""Kubernetes' ``$(VAR)`` expansion and what the operator's containers run (issue 37, finding 1):
``expansion.expand`` behaves as k8s.io/kubernetes third_party/forked/golang/expansion does, the
spec's text is rendered so that the kubelet's expansion gives it back as written, references are
refused naming the field, and the argv of every rendered container (engine and preflight, on one
node and in a LeaderWorkerSet group) after expansion is the argv the checks judged."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from lwspods import group_pods
from specserver_advisor.launch import expansion
from specserver_advisor.launch.validation import spec_problems
from specserver_advisor.loaders.configchain import ModelConfigs
from specserver_advisor.loaders.configs import bundled
from specserver_advisor.models import SpecServer
from specserver_operator.core import podpolicy, render, speccheck
from stack import REPO

CONTEXT = {"VAR_A": "A", "VAR_B": "B", "VAR_C": "C", "VAR_REF": "$(VAR_A)", "VAR_EMPTY": ""}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # The cases of Kubernetes' own expand_test.go (TestMapReference / TestExpand), restated.
        ("$(VAR_A)", "A"),
        ("___$(VAR_B)___", "___B___"),
        ("$(VAR_A)-$(VAR_A)", "A-A"),
        ("f000-$$VAR_A", "f000-$VAR_A"),
        ("foo\\$(VAR_C)bar", "foo\\Cbar"),
        ("foo\\\\$(VAR_C)bar", "foo\\\\Cbar"),
        ("$(VAR_A)$(VAR_B)$(VAR_C)", "ABC"),
        ("$(VAR_REF)", "$(VAR_A)"),  # one pass: a value is not expanded again
        ("$$(VAR_B)_$(VAR_A)", "$(VAR_B)_A"),
        ("$$$$$$(BIG_MONEY)", "$$$(BIG_MONEY)"),
        ("$$$$$$(VAR_A)", "$$$(VAR_A)"),
        ("$$$$$$$(GOOD_ODDS)", "$$$$(GOOD_ODDS)"),
        ("$$$$$$$(VAR_A)", "$$$A"),
        ("$(VAR_EMPTY)", ""),
        ("$(VAR_DNE)", "$(VAR_DNE)"),
        ("$(VAR_A", "$(VAR_A"),
        ("$(VAR_A$(VAR_B)", "$(VAR_A$(VAR_B)"),  # the name runs to the first ")"
        ("$()", "$()"),
        ("$(VAR_A))", "A)"),
        ("$((VAR_A))", "$((VAR_A))"),
        ("${VAR_A}", "${VAR_A}"),
        ("$VAR_A", "$VAR_A"),
        ("$", "$"),
        ("$$", "$"),
        ("$$$", "$$"),
        ("foo$", "foo$"),
        ("$(VAR_A)$$", "A$"),
        ("", ""),
        ("ünï$(VAR_A)cödé$ü", "ünïAcödé$ü"),
    ],
)
def test_expansion_is_kubernetes(text: str, expected: str) -> None:
    assert expansion.expand(text, expansion.mapping_for(CONTEXT)) == expected


@given(st.text(alphabet=st.sampled_from("$()AV_R x\\"), max_size=40))
def test_escaped_text_expands_to_itself_whatever_the_environment(text: str) -> None:
    for context in ({}, CONTEXT, {"A": "--trust-remote-code", "V": "x", "": "empty"}):
        assert expansion.expand(expansion.escape(text), expansion.mapping_for(context)) == text


def test_an_env_value_sees_only_the_variables_before_it() -> None:
    env: list[dict[str, Any]] = [
        {"name": "A", "value": "x"},
        {"name": "B", "value": "$(A)-$(C)-$$(A)"},
        {"name": "C", "value": "y"},
        {"name": "T", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
        {"name": "D", "value": "$(T)"},
    ]
    got = expansion.container_env(env, {"LWS_WORKER_INDEX": "1"})
    assert got["B"] == "x-$(C)-$(A)"
    assert got["D"] == expansion.FROM_ELSEWHERE
    assert got["LWS_WORKER_INDEX"] == "1"
    container = {"command": ["run"], "args": ["$(B)", "$(LWS_WORKER_INDEX)", "$(NONE)"], "env": env}
    assert expansion.container_argv(container, {"LWS_WORKER_INDEX": "1"}) == [
        "run",
        "x-$(C)-$(A)",
        "1",
        "$(NONE)",
    ]


SMUGGLED: dict[str, Any] = {
    "extraArgs": ["--uvicorn-access-log-exclude-prefixes", "$(SMUGGLED)"],
    "env": [{"name": "SMUGGLED", "value": "--trust-remote-code"}],
}


def _doc(example: str = "qwen3-8b-eagle3-l4.yaml", **engine: Any) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((REPO / "manifests" / "examples" / example).read_text())
    doc["metadata"].update(namespace="llm", uid="u-1", generation=1)
    doc["spec"]["mode"] = "Enabled"
    doc["spec"]["engine"].update(copy.deepcopy(engine))
    return doc


def test_the_smuggling_attack_is_refused_naming_the_field() -> None:
    """The probe's attack: a value of a nargs='*' flag that the kubelet would expand into
    --trust-remote-code. A reference in an env value is refused too (the env of the engine
    and of the preflight)."""
    server = SpecServer.model_validate(_doc(**SMUGGLED))
    problems = spec_problems(server)
    assert any(
        p.startswith("spec.engine.extraArgs[1]: '$(SMUGGLED)' is a Kubernetes variable reference")
        for p in problems
    ), problems
    env = SpecServer.model_validate(_doc(env=[{"name": "X", "value": "a$(HF_TOKEN)"}]))
    assert any(p.startswith("spec.engine.env[0].value: '$(HF_TOKEN)'") for p in spec_problems(env))
    plain = SpecServer.model_validate(
        _doc(extraArgs=["--served-model-name", "cost$5$$(NOT)"], env=[{"name": "X", "value": "$"}])
    )
    assert spec_problems(plain) == []


def _rendered(doc: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """(the argv the checks judged, every pod spec the kubelet would get)."""
    server = SpecServer.model_validate(doc)
    target = bundled(server.spec.model.path)
    assert target is not None
    configs = ModelConfigs(target.config, None, None, None, "bundled")
    cfg = speccheck.render(server, configs, True)
    assert cfg.valid, cfg.message
    assert speccheck.render_problems(server, cfg, podpolicy.PodPolicy()) == []
    workload = render.build_children(server, "u-1", cfg)[0]
    if workload["kind"] == "Deployment":
        return cfg.args, [workload["spec"]["template"]["spec"]]
    return cfg.args, [pod["spec"] for pod in group_pods(workload)]


@pytest.mark.parametrize(
    ("example", "engine"),
    [
        ("qwen3-8b-eagle3-l4.yaml", {}),
        (
            "qwen3-8b-eagle3-l4.yaml",
            {
                "extraArgs": ["--served-model-name", "cost$5$$(NOT)", "--api-key", "$"],
                "env": [{"name": "SMUGGLED", "value": "--trust-remote-code"}],
            },
        ),
        ("deepseek-v3-nextn-h100-2node.yaml", {"extraArgs": ["--served-model-name", "a$$b"]}),
    ],
)
def test_every_rendered_container_runs_the_judged_argv(example: str, engine: Any) -> None:
    judged, pods = _rendered(_doc(example, **engine))
    for index, pod in enumerate(pods):
        container = pod["containers"][0]
        (preflight,) = pod["initContainers"]
        env = expansion.container_env(container.get("env") or [])
        # The operator's own references, as LeaderWorkerSet fills them in this pod.
        expected = [
            expansion.expand(a, expansion.mapping_for(env))
            if i in expansion.operator_positions(judged, len(pods))
            else a
            for i, a in enumerate(judged)
        ]
        if len(pods) > 1:
            rank = expected.index("--node-rank") + 1
            assert expected[rank] == str(index)
            assert expected[expected.index("--dist-init-addr") + 1].endswith(":20000")
        assert expansion.container_argv(container) == ["sglang", "serve", *expected]
        ran = expansion.container_argv(preflight)
        assert ran[ran.index("--") + 1 :] == expected
        assert "--trust-remote-code" not in ran
        for item in engine.get("env", []):  # values reach the engine as written
            assert env[item["name"]] == item["value"]
        assert all(a in expected for a in engine.get("extraArgs", []))


def test_a_render_that_left_text_to_expand_would_be_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The check behind ConfigValid and the webhook compares what the containers would run
    with what was judged; rendered unescaped, a literal "$$(NOT)" would run as "$(NOT)"."""
    doc = _doc(extraArgs=["--served-model-name", "cost$$(NOT)"])
    server = SpecServer.model_validate(doc)
    target = bundled(server.spec.model.path)
    assert target is not None
    cfg = speccheck.render(server, ModelConfigs(target.config, None, None, None, "bundled"), True)
    assert render.unexpanded_problem(server, cfg) is None
    monkeypatch.setattr(render, "render_args", lambda argv, nodes: list(argv))
    problem = render.unexpanded_problem(server, cfg)
    assert problem is not None and "'cost$(NOT)' where 'cost$$(NOT)' was checked" in problem
    problems = speccheck.render_problems(server, cfg, podpolicy.PodPolicy())
    assert [r for r, _ in problems] == [speccheck.INVALID_SPEC]
