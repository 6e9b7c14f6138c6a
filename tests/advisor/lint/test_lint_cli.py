"""``lint`` is never silent: rule selection, configuration discovery, stdin, excludes, Helm
templates, suppression scope, YAML error positions, ``explain`` for every code."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from specserver_advisor.cli.main import main
from specserver_advisor.lint.rules import ENGINE_CODES, RULES, documentation
from stack import REPO

FIXTURES = REPO / "tests" / "advisor" / "fixtures"
SPEC011_FAIL = FIXTURES / "spec011" / "fail.sh"
LAUNCH = (
    "python -m sglang.launch_server --model-path Qwen/Qwen3-8B --speculative-algorithm EAGLE3 "
    "--speculative-draft-model-path Tengyunw/qwen3_8b_eagle3 --max-running-requests 8"
)


#: A Deployment's first lines, up to its one container's name (the test adds the rest).
DEPLOYMENT_HEAD = (
    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\nspec:\n  template:\n"
    "    spec:\n      containers:\n        - name: e\n"
)


def lint(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str], str]:
    """Exit code, the codes found (json), stderr."""
    code = main(["lint", "--format", "json", *argv])
    out, err = capsys.readouterr()
    return code, [d["code"] for d in json.loads(out or "[]")], err


@pytest.mark.parametrize(
    ("select", "expected"),
    [
        ("SPEC011", ["SPEC011"]),
        ("SPEC001,SPEC011", ["SPEC011"]),
        ("metrics-disabled", ["SPEC011"]),
        ("SPEC01", ["SPEC011"]),
        ("SPEC", ["SPEC011"]),
        ("ALL", ["SPEC011"]),
        ("BENCH", []),
    ],
)
def test_select_takes_comma_lists_names_and_prefixes(
    capsys: pytest.CaptureFixture[str], select: str, expected: list[str]
) -> None:
    rc, found, _ = lint(capsys, "--select", select, str(SPEC011_FAIL))
    assert found == expected and rc == (1 if expected else 0)


@pytest.mark.parametrize(
    "argv",
    [
        ["--select", "NOPE001"],
        ["--select", "SPEC011,NOPE"],
        ["--ignore", "spec-typo"],
        ["--extend-select", "X9"],
    ],
)
def test_unknown_codes_exit_2_with_the_valid_choices(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    assert main(["lint", *argv, str(SPEC011_FAIL)]) == 2
    err = capsys.readouterr().err
    assert "unknown rule" in err and "SPEC011 (metrics-disabled)" in err and "POD" in err


def test_ignore_and_extend_select_combine(capsys: pytest.CaptureFixture[str]) -> None:
    assert lint(capsys, "--ignore", "SPEC0", str(SPEC011_FAIL))[1] == []
    rc, found, _ = lint(
        capsys, "--select", "BENCH", "--extend-select", "SPEC011", str(SPEC011_FAIL)
    )
    assert found == ["SPEC011"] and rc == 1


def test_config_is_discovered_up_to_the_repository_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path / "repo"
    deep = repo / "deploy" / "engines"
    deep.mkdir(parents=True)
    (repo / ".git").mkdir()
    (repo / "pyproject.toml").write_text('[tool.specserver-advisor]\nignore = "SPEC011, SPEC001"\n')
    (tmp_path / ".specserver-advisor.yaml").write_text("select: [BENCH]\n")  # above the root
    monkeypatch.chdir(deep)
    assert lint(capsys, str(SPEC011_FAIL))[1] == []
    (deep / ".specserver-advisor.yaml").write_text("extend-select: [SPEC011]\nignore: []\n")
    assert lint(capsys, str(SPEC011_FAIL))[1] == ["SPEC011"]


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        (".specserver-advisor.yaml", "ignroe: [SPEC011]\n", "unknown key(s) ignroe; valid: select"),
        ("pyproject.toml", '[tool.specserver-advisor]\nselect = ["NOPE"]\n', "unknown rule"),
        (".specserver-advisor.yaml", "- a list\n", "expected a mapping"),
        (".specserver-advisor.yaml", "fail-on: fatal\n", "fail-on must be one of"),
        (".specserver-advisor.yaml", "select: {a: 1}\n", "must be a list of strings"),
    ],
)
def test_bad_configuration_exits_2_naming_the_problem(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    name: str,
    content: str,
    message: str,
) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / name).write_text(content)
    monkeypatch.chdir(tmp_path)
    assert main(["lint", str(SPEC011_FAIL)]) == 2
    assert message in capsys.readouterr().err


def test_stdin_is_read_for_dash(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(f"#!/bin/sh\n{LAUNCH}\n"))
    assert main(["lint", "-"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("-:2:") and "SPEC011" in out
    deployment = (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  template:\n"
        "    spec:\n      containers:\n        - name: e\n"
        f"          command: [bash, -c, '{LAUNCH} --enable-metrics --host 0.0.0.0']\n"
    )
    monkeypatch.setattr("sys.stdin", io.StringIO(deployment))
    rc, found, _ = lint(capsys, "--stdin-filename", "rendered.yaml", "--select", "SPEC", "-")
    assert rc == 0 and found == []


def test_excludes_and_helm_templates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    chart = tmp_path / "chart"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: engine\nversion: 0.1.0\n")
    template = chart / "templates" / "deployment.yaml"
    template.write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\n"
        "spec:\n  template:\n    spec:\n      containers:\n"
        '        {{- include "engine.containers" . | nindent 8 }}\n'
    )
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "run.sh").write_text(f"{LAUNCH}\n")
    (tmp_path / "run.sh").write_text(f"{LAUNCH}\n")
    rc, found, _ = lint(capsys, "--select", "SPEC011", "--exclude", "old", str(tmp_path))
    assert found == ["SPEC011"], "the chart template is skipped and old/ is excluded"
    # The pre-commit hook passes files explicitly: excludes still apply, and the chart is
    # reported as not linted (INFO003 with the helm template command), never as clean.
    rc, found, err = lint(capsys, str(template))
    assert (rc, found) == (0, ["INFO003"]) and "nothing linted" in err and "1 excluded" in err
    # Given explicitly with the defaults replaced, a template is an INFO, not an input error.
    rc, found, _ = lint(capsys, "--exclude", ".git", str(template))
    assert (rc, found) == (0, ["INFO003"])
    rc, found, _ = lint(capsys, "--extend-exclude", "*.sh", str(tmp_path))
    assert found == ["INFO003"] and rc == 0
    main(["lint", "--format", "json", str(tmp_path / "chart")])
    (info,) = json.loads(capsys.readouterr().out)
    assert info["path"].endswith("chart/Chart.yaml") and info["severity"] == "info"
    assert f"helm template {tmp_path / 'chart'} | specserver-advisor lint -" in info["message"]


def test_nothing_linted_is_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "notes.txt").write_text("hello\n")
    assert main(["lint", str(tmp_path)]) == 2
    assert "nothing linted: no YAML, JSON, shell, Markdown" in capsys.readouterr().err
    (tmp_path / "README.md").write_text("hello\n")  # a form the finder reads: it says so
    assert main(["lint", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "README.md:1:1: INFO006 [info] no-launch-taken: no SGLang launch taken from this " in out
    assert "(read as Markdown: it never names SGLang)" in out
    (tmp_path / "README.md").unlink()
    (tmp_path / "values.yaml").write_text("replicas: 2\n")
    assert main(["lint", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == (
        "No SGLang launch, benchmark command or SpecServer found (1 file, 0 launches)."
    )


def test_suppression_scope_is_one_command_or_one_object(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "run.sh"
    script.write_text(
        f"{LAUNCH}  # specserver-advisor: ignore[SPEC011] first only\n"
        f"{LAUNCH} --port 30001\n"
        "# specserver-advisor: ignore[metrics-disabled] rule names work\n"
        f"{LAUNCH} --port 30002\n"
    )
    main(["lint", "--format", "json", "--select", "SPEC011,SUPP001", str(script)])
    found = [(d["line"], d["code"]) for d in json.loads(capsys.readouterr().out)]
    assert found == [(2, "SPEC011")]
    deployment = tmp_path / "deploy.yaml"
    deployment.write_text(
        "apiVersion: apps/v1\nkind: Deployment\n"
        "metadata:  # specserver-advisor: ignore[SPEC011] the whole object\n"
        "  name: a\nspec:\n  template:\n    spec:\n      containers:\n        - name: e\n"
        f"          command: [bash, -c, '{LAUNCH} --host 0.0.0.0']\n"
        "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: b}\nspec:\n  template:\n"
        "    spec:\n      containers:\n        - name: e\n"
        f"          command: [bash, -c, '{LAUNCH} --host 0.0.0.0']\n"
    )
    main(["lint", "--format", "json", "--select", "SPEC011,SUPP001", str(deployment)])
    found = [(d["line"], d["code"]) for d in json.loads(capsys.readouterr().out)]
    assert found == [(20, "SPEC011")]


def test_unknown_code_in_a_suppression_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "run.sh"
    script.write_text(f"{LAUNCH} --enable-metrics  # specserver-advisor: ignore[SPEC0011]\n")
    rc, found, _ = lint(capsys, str(script))
    assert found == ["SUPP001"] and rc == 1


def test_yaml_errors_point_at_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: 1\nb: 2\nc:\n  - x\n  d: [1, 2\n")
    main(["lint", "--format", "json", str(bad)])
    (d,) = json.loads(capsys.readouterr().out)
    assert d["code"] == "INPUT001" and f"line {d['line']}, column {d['column']}" in d["message"]
    assert d["line"] == 5


@pytest.mark.parametrize("code", sorted(set(RULES) | set(ENGINE_CODES)))
def test_explain_every_code(capsys: pytest.CaptureFixture[str], code: str) -> None:
    assert main(["explain", code]) == 0
    out = capsys.readouterr().out
    doc = documentation()[code]
    assert out.startswith(f"{code} {doc.name} ({doc.severity})")
    assert "Why it matters:" in out and f"Fix: {doc.fix}" in out
    assert main(["explain", doc.name]) == 0


def test_suppression_at_a_function_call_covers_the_launch_inside(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "run.sh"
    script.write_text(
        f'serve() {{\n  {LAUNCH} --port "$1"\n}}\n'
        "serve 30000  # specserver-advisor: ignore[SPEC011] a dev server\n"
        "serve 30001\n"
    )
    main(["lint", "--format", "json", "--select", "SPEC011,SUPP001", str(script)])
    found = [(d["line"], d["code"]) for d in json.loads(capsys.readouterr().out)]
    assert found == [(2, "SPEC011")], "only the 30001 launch is reported"


def test_kubernetes_env_references_in_args(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deployment = tmp_path / "deploy.yaml"
    deployment.write_text(
        DEPLOYMENT_HEAD + "          image: lmsysorg/sglang:v0.5.23\n"
        "          command: [python3, -m, sglang.launch_server]\n"
        '          args: [--model-path, "$(MODEL)", --max-running-requests, "$(CAP)",\n'
        "                 --speculative-algorithm, EAGLE3, --speculative-draft-model-path,\n"
        "                 Tengyunw/qwen3_8b_eagle3, --host, 0.0.0.0, --enable-metrics,\n"
        '                 --served-model-name, "$$(literal)"]\n'
        "          env:\n            - {name: MODEL, value: Qwen/Qwen3-8B}\n"
        "            - name: CAP\n              valueFrom: {configMapKeyRef: {name: c, key: cap}}\n"
        "          resources: {limits: {nvidia.com/gpu: 1}}\n"
    )
    main(["lint", "--format", "json", "--select", "SPEC,INFO", str(deployment)])
    found = [(d["line"], d["code"], d["message"]) for d in json.loads(capsys.readouterr().out)]
    assert [(line, code) for line, code, _ in found] == [(11, "INFO002")]
    assert found[0][2].startswith("$CAP ")


def test_model_dirs_in_a_config_file_are_relative_to_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / ".git").mkdir()
    models = FIXTURES / "models"
    (tmp_path / "models").symlink_to(models)
    config = tmp_path / ".specserver-advisor.yaml"
    config.write_text("select: [INFO001]\n")
    script = tmp_path / "run.sh"
    script.write_text(f"{LAUNCH.replace('Qwen/Qwen3-8B', 'llama')} --enable-metrics\n")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    assert lint(capsys, str(script))[1] == ["INFO001"]
    config.write_text("model-dirs: [models]\nselect: [INFO001]\n")
    assert lint(capsys, str(script))[1] == [], "found in tmp_path/models, not sub/models"


def test_quoted_template_expressions_in_values_are_info(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deployment = tmp_path / "deploy.yaml"
    deployment.write_text(
        DEPLOYMENT_HEAD + '          image: "{{ .Values.image }}"\n'
        "          command: [python3, -m, sglang.launch_server]\n"
        '          args: [--model-path, "{{ .Values.model }}", --tp-size, "{{ .Values.tp }}",\n'
        "                 --host, 0.0.0.0, --enable-metrics]\n"
        "          resources: {limits: {nvidia.com/gpu: 1}}\n"
    )
    main(["lint", "--format", "json", str(deployment)])
    found = [(d["code"], d["message"]) for d in json.loads(capsys.readouterr().out)]
    assert [c for c, _ in found] == ["INFO002", "INFO002"]
    assert found[0][1].startswith("{{ .Values.model }} is a template expression")


def test_a_suppression_on_the_line_above_any_finding_works(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 40: a standalone comment right above a finding that is not on the launch's line
    (an ``export`` before the launch, an env entry, an args item) suppresses it, not SUPP001."""
    script = tmp_path / "run.sh"
    script.write_text(
        "#!/bin/sh\n# specserver-advisor: ignore[SPEC003] the draft was retrained\n"
        "export SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1\n"
        f"{LAUNCH} --enable-metrics\n"
    )
    main(["lint", "--format", "json", "--select", "SPEC003,SUPP001", str(script)])
    assert json.loads(capsys.readouterr().out) == []
    deployment = tmp_path / "deploy.yaml"
    deployment.write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\nspec:\n  template:\n"
        "    spec:\n      containers:\n        - name: e\n"
        "          command: [python3, -m, sglang.launch_server]\n"
        "          args:\n            - --model-path=Qwen/Qwen3-8B\n"
        "            - --enable-metrics\n"
        "          env:\n"
        "            # specserver-advisor: ignore[POD004] a throwaway test cluster\n"
        "            - {name: HF_TOKEN, value: hf_x}\n"
        "            - {name: OTHER, value: x}\n"
    )
    main(["lint", "--format", "json", "--select", "POD004,SUPP001", str(deployment)])
    assert json.loads(capsys.readouterr().out) == []
    # a trailing comment on a command line does not reach the line below it
    script.write_text(
        "#!/bin/sh\necho hi  # specserver-advisor: ignore[SPEC003] not standalone\n"
        "export SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1\n"
        f"{LAUNCH} --enable-metrics\n"
    )
    main(["lint", "--format", "json", "--select", "SPEC003,SUPP001", str(script)])
    found = sorted(d["code"] for d in json.loads(capsys.readouterr().out))
    assert found == ["SPEC003", "SUPP001"]
