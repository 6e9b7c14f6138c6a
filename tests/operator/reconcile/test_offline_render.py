"""``specserver-operator render FILE`` (issue 40): offline, the objects the operator's own pass
would create; the same objects as the operator's rendering pinned in tests/golden; a refused
SpecServer exits 1 with the operator's reason; ``--version`` on all three CLIs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from specserver_operator.main import main
from stack import REPO

EXAMPLES = sorted((REPO / "manifests" / "examples").glob("*.yaml"))
GOLDEN = REPO / "tests" / "golden"


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_render_prints_what_the_operator_renders(
    path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = yaml.safe_load(path.read_text())
    doc["metadata"]["namespace"] = "llm"  # the golden files' namespace
    given = tmp_path / path.name
    given.write_text(yaml.safe_dump(doc))
    assert main(["render", str(given)]) == 0
    objects = list(yaml.safe_load_all(capsys.readouterr().out))
    golden = list(yaml.safe_load_all((GOLDEN / f"{path.stem}.yaml").read_text()))
    key = lambda o: (o["kind"], o["metadata"]["name"])  # noqa: E731
    assert sorted(objects, key=key) == sorted(golden, key=key)


def test_render_refuses_what_the_operator_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = yaml.safe_load((REPO / "manifests/examples/qwen3-8b-eagle3-l4.yaml").read_text())
    doc["spec"]["engine"]["env"] = [{"name": "HF_TOKEN", "value": "hf_secret_value"}]
    given = tmp_path / "refused.yaml"
    given.write_text(yaml.safe_dump(doc))
    assert main(["render", str(given)]) == 1
    out = capsys.readouterr()
    assert out.out == ""
    assert "InvalidSpec: spec.engine.env[0].name: HF_TOKEN is set by the operator" in out.err
    assert "hf_secret_value" not in out.err


def test_render_of_a_file_without_a_specserver_is_a_usage_error(tmp_path: Path) -> None:
    given = tmp_path / "deploy.yaml"
    given.write_text("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n")
    with pytest.raises(SystemExit) as exc:
        main(["render", str(given)])
    assert exc.value.code == 2


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("specserver_advisor.cli.main", "specserver-advisor"),
        ("specserver_operator.main", "specserver-operator"),
        ("specserver_engine.cli", "specserver-engine"),
    ],
)
def test_every_cli_prints_its_version(module: str, name: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", f"import sys, {module} as m; sys.exit(m.main(['--version']))"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{name} 0.") and "(SGLang 0.5.23)" in done.stdout
