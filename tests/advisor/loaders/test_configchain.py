"""The one config-source chain: order, what is asked, what the author is told; lint follows it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from specserver_advisor.cli.main import main
from specserver_advisor.loaders import configchain
from specserver_advisor.loaders.configchain import ConfigSourceError, Lookup, ModelConfigs
from specserver_advisor.loaders.configs import bundled
from specserver_advisor.models import SpecServer, SpecServerSpec
from specserver_advisor.sglang.configcheck import LoadedConfig

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "manifests" / "examples" / "qwen3-8b-eagle3-l4.yaml"


def example(**model_source: Any) -> tuple[dict[str, Any], SpecServerSpec]:
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["spec"]["modelSource"] = model_source
    return doc, SpecServer.model_validate(doc).spec


def test_inline_configs_come_first_and_later_sources_are_not_asked() -> None:
    target = bundled("Qwen/Qwen3-8B")
    assert target is not None
    _, spec = example(
        inline={
            "targetConfig": json.dumps(target.config),
            "draftConfig": '{"architectures": ["X"]}',
        }
    )
    asked: list[str] = []

    def later(spec: SpecServerSpec) -> Lookup:
        asked.append("later")
        return Lookup(None)

    found = configchain.first_configs(spec, [configchain.inline, later], "hint")
    assert (found.source, found.draft, asked) == ("inline", {"architectures": ["X"]}, [])


def test_no_source_names_the_missing_reference_the_hint_and_every_note() -> None:
    _, spec = example()

    def only_target(ref: str, revision: str | None) -> LoadedConfig | None:
        return LoadedConfig(ref, {}, None, "t") if ref == spec.model.path else None

    def noted(spec: SpecServerSpec) -> Lookup:
        return Lookup(None, "endpoint not allowed")

    sources = [configchain.inline, noted, configchain.references(only_target)]
    with pytest.raises(ConfigSourceError) as caught:
        configchain.first_configs(spec, sources, "give inline configs")
    assert str(caught.value) == (
        "no config for Tengyunw/qwen3_8b_eagle3: give inline configs; endpoint not allowed"
    )


def test_references_give_both_configs_with_sizes_or_none() -> None:
    _, spec = example()

    def load(ref: str, revision: str | None) -> LoadedConfig:
        return LoadedConfig(ref, {"ref": ref, "rev": revision}, 7, "here")

    found = configchain.references(load)(spec).configs
    assert found == ModelConfigs(
        {"ref": "Qwen/Qwen3-8B", "rev": "main"},
        {"ref": "Tengyunw/qwen3_8b_eagle3", "rev": None},
        7,
        7,
        "here",
    )


def test_lint_checks_a_specserver_with_its_inline_configs_as_the_operator_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The inline draft supports 2,048 positions; the referenced one (bundled) 40,960. The
    # operator plans with the inline one and refuses the 40,960-token context: so must lint.
    target, draft = bundled("Qwen/Qwen3-8B"), bundled("Tengyunw/qwen3_8b_eagle3")
    assert target is not None and draft is not None
    short = dict(draft.config, max_position_embeddings=2048)
    doc, _ = example(
        inline={"targetConfig": json.dumps(target.config), "draftConfig": json.dumps(short)}
    )
    path = tmp_path / "sps.yaml"
    path.write_text(yaml.safe_dump(doc))
    main(["lint", "--select", "SPEC002", "--format", "json", str(path)])
    assert [d["code"] for d in json.loads(capsys.readouterr().out or "[]")] == ["SPEC002"]
