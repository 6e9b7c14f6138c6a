"""``spec.speculative.draftContextFromTarget``: refusal naming it, the render, plan and lint.

A 2,048-position EAGLE-3 draft for the 131,072-position llama3-rope Llama-3.1-8B: without the
field the operator refuses it (SPEC002, the message names the field); with it the engine renders
``--json-model-override-args`` with exactly the target's own values, the plan (the context
check included) reads the draft as SGLang will, and ``plan --from`` and ``lint`` agree.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from specserver_advisor.cli.main import main
from specserver_advisor.launch.model import policy_context_for
from specserver_advisor.lint.launchlint import build_engine_config
from specserver_advisor.lint.rules import spec014_draft_rope_scaling_missing
from specserver_advisor.loaders.configchain import ModelConfigs
from specserver_advisor.models import SpecServer
from specserver_advisor.sglang import draftcontext
from specserver_operator.core.speccheck import parse
from stack import REPO, load_config

TARGET, DRAFT = load_config("llama-3.1-8b"), load_config("eagle3-2048-positions")
LLAMA = ModelConfigs(TARGET, DRAFT, None, None, "t")


def document(**speculative: Any) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(
        (REPO / "manifests/examples/qwen3-8b-eagle3-l4.yaml").read_text()
    )
    spec = doc["spec"]
    spec["model"] = {"path": "meta-llama/Llama-3.1-8B-Instruct"}
    spec["draft"] = {"path": "org/eagle3-2048"}
    spec["resources"]["gpuType"] = "H100"
    spec["engine"].pop("contextLength", None)
    spec["speculative"].update(speculative)
    spec["modelSource"] = {
        "inline": {"targetConfig": json.dumps(TARGET), "draftConfig": json.dumps(DRAFT)}
    }
    return doc


def server(**speculative: Any) -> SpecServer:
    return SpecServer.model_validate(document(**speculative))


def override_of(args: list[str]) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(args[args.index("--json-model-override-args") + 1])
    return value


def test_the_short_draft_is_refused_naming_the_field() -> None:
    cfg = build_engine_config(server().spec, LLAMA, True)
    assert not cfg.valid and cfg.reason == "SPEC002" and cfg.args == []
    assert "spec.speculative.draftContextFromTarget: true" in cfg.message


def test_with_the_field_the_render_is_exactly_the_targets_own_values() -> None:
    cfg = build_engine_config(server(draftContextFromTarget=True).spec, LLAMA, True)
    assert cfg.valid, cfg.message
    assert override_of(cfg.args) == {
        "max_position_embeddings": TARGET["max_position_embeddings"],
        "rope_scaling": TARGET["rope_scaling"],
    }
    assert cfg.resolved["contextLength"] == 131072
    assert cfg.plan is not None and cfg.plan.context.draft == 131072
    # The draft SGLang loads has the target's rope scaling: SPEC014 no longer fires.
    assert not [code for code, _ in cfg.warnings if code in ("SPEC002", "SPEC014")]
    assert policy_context_for(server(draftContextFromTarget=True).spec, LLAMA).crossover_by_accept


def test_the_off_engine_has_no_draft_and_no_override() -> None:
    cfg = build_engine_config(server(draftContextFromTarget=True).spec, LLAMA, False)
    assert cfg.valid and "--json-model-override-args" not in cfg.args


def test_a_rope_parameters_target_is_given_under_its_own_key() -> None:
    target = dict(TARGET)
    target["rope_parameters"] = dict(target.pop("rope_scaling"), rope_theta=500000.0)
    configs = ModelConfigs(target, DRAFT, None, None, "t")
    cfg = build_engine_config(server(draftContextFromTarget=True).spec, configs, True)
    assert cfg.valid, cfg.message
    assert override_of(cfg.args)["rope_parameters"] == target["rope_parameters"]


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"algorithm": "NGRAM"}, "NGRAM has no draft model"),
        ({"draft": None}, "EAGLE3 needs spec.draft"),
    ],
)
def test_the_field_where_it_cannot_apply_is_refused_naming_it(
    change: dict[str, Any], says: str
) -> None:
    doc = document(draftContextFromTarget=True)
    if "draft" in change:
        doc["spec"].pop("draft")
    else:
        doc["spec"]["speculative"] = {"algorithm": "NGRAM", "draftContextFromTarget": True}
        doc["spec"].pop("draft")
    found, problems = parse(doc)
    assert found is None
    assert [p for p in problems if draftcontext.FIELD in p and says in p], problems


def test_a_target_without_positions_is_refused_naming_the_field() -> None:
    target = {k: v for k, v in TARGET.items() if k != "max_position_embeddings"}
    configs = ModelConfigs(target, DRAFT, None, None, "t")
    cfg = build_engine_config(server(draftContextFromTarget=True).spec, configs, True)
    assert not cfg.valid and draftcontext.FIELD in cfg.message
    assert "max_position_embeddings" in cfg.message


def test_extra_args_still_may_not_set_the_override() -> None:
    doc = document()
    doc["spec"]["engine"]["extraArgs"] = ["--json-model-override-args", "{}"]
    cfg = build_engine_config(SpecServer.model_validate(doc).spec, LLAMA, True)
    assert not cfg.valid and cfg.reason == "OwnedFlagInExtraArgs"


def test_lint_fix_line_for_a_draft_without_rope_scaling_names_the_field() -> None:
    assert "spec.speculative.draftContextFromTarget" in spec014_draft_rope_scaling_missing.FIX


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    rc = main(list(argv))
    return rc, capsys.readouterr().out


def test_plan_from_and_lint_say_the_launch_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    short, fixed = tmp_path / "short.yaml", tmp_path / "fixed.yaml"
    short.write_text(yaml.safe_dump(document()))
    fixed.write_text(yaml.safe_dump(document(draftContextFromTarget=True)))
    assert cli(capsys, "plan", "--from", str(short))[1].startswith("won't start")
    rc, out = cli(capsys, "plan", "--from", str(fixed))
    assert rc == 0 and out.startswith("starts as given"), out
    assert "--json-model-override-args" in out
    _, linted = cli(capsys, "lint", str(fixed))
    assert "SPEC002" not in linted and "SPEC014" not in linted, linted
    assert "SPEC002" in cli(capsys, "lint", str(short))[1]
