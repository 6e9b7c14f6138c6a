"""SPEC016 on SpecServers agrees with the operator: the fraction it computes is the one checked.

A SpecServer without ``engine.memFractionStatic`` is rendered by the operator with a computed
fraction when SGLang's heuristic leaves no KV cache (``launch_fraction.computed_fraction``), so
``lint`` must not report SPEC016 for it unless the operator refuses it too. A plain server
launch gets no computed fraction: SGLang's heuristic is what runs, and SPEC016 stays.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from specserver_advisor import findings
from specserver_advisor.cli.main import main
from specserver_advisor.lint.launchlint import build_engine_config
from specserver_advisor.loaders.specserver import configs_for_spec
from specserver_advisor.models import Mode, SpecServer

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((REPO / "manifests" / "examples").glob("*.yaml"))


def lint_codes(capsys: pytest.CaptureFixture[str], path: Path) -> list[str]:
    main(["lint", "--select", "SPEC016", "--format", "json", str(path)])
    return [d["code"] for d in json.loads(capsys.readouterr().out or "[]")]


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_an_example_without_mem_fraction_gets_spec016_only_when_the_operator_refuses_it(
    example: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = yaml.safe_load(example.read_text())
    doc["spec"].get("engine", {}).pop("memFractionStatic", None)
    path = tmp_path / example.name
    path.write_text(yaml.safe_dump(doc))
    spec = SpecServer.model_validate(doc).spec
    operator = build_engine_config(
        spec, configs_for_spec(spec, {}), speculative=spec.mode != Mode.DISABLED
    )
    refused = not operator.valid and operator.reason == findings.NO_KV_MEMORY
    assert lint_codes(capsys, path) == (["SPEC016"] if refused else [])


def test_the_l4_example_without_mem_fraction_is_computed_not_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The case that used to disagree: SGLang's 0.701 heuristic leaves Qwen3-8B + EAGLE-3 no KV
    # cache on an L4, the operator renders a larger fraction, lint said "won't start".
    doc = yaml.safe_load((REPO / "manifests/examples/qwen3-8b-eagle3-l4.yaml").read_text())
    del doc["spec"]["engine"]["memFractionStatic"]
    spec = SpecServer.model_validate(doc).spec
    operator = build_engine_config(spec, configs_for_spec(spec, {}), speculative=True)
    assert operator.valid and operator.mem_fraction_static_source == "Computed"
    path = tmp_path / "sps.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert lint_codes(capsys, path) == []


def test_an_explicit_fraction_too_low_is_spec016_in_the_operators_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = yaml.safe_load((REPO / "manifests/examples/qwen3-8b-eagle3-l4.yaml").read_text())
    doc["spec"]["engine"]["memFractionStatic"] = 0.7
    spec = SpecServer.model_validate(doc).spec
    operator = build_engine_config(spec, configs_for_spec(spec, {}), speculative=True)
    path = tmp_path / "sps.yaml"
    path.write_text(yaml.safe_dump(doc))
    main(["lint", "--select", "SPEC016", "--format", "json", str(path)])
    found = json.loads(capsys.readouterr().out)
    assert [d["message"] for d in found] == [operator.message]


def test_a_plain_launch_without_mem_fraction_still_gets_spec016(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "serve.sh"
    script.write_text(
        "# lint: gpu=L4\n"
        "python -m sglang.launch_server --model-path Qwen/Qwen3-8B "
        "--speculative-algorithm EAGLE3 --speculative-draft-model-path Tengyunw/qwen3_8b_eagle3\n"
    )
    main(["lint", "--gpu", "L4", "--select", "SPEC016", "--format", "json", str(script)])
    assert [d["code"] for d in json.loads(capsys.readouterr().out or "[]")] == ["SPEC016"]
