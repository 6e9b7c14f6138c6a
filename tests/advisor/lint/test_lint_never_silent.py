"""``lint`` never goes quiet on what it did not check (issue 30): a rule that cannot run for
lack of a config or a GPU fact says which rules and why, ``--model-dir PATH=DIR`` maps the
absolute paths launches use in containers, and a directory run names the files where it found
no launch."""

from __future__ import annotations

from pathlib import Path

import pytest

from specserver_advisor.cli.main import main
from stack import REPO

MODELS = REPO / "tests" / "advisor" / "fixtures" / "models"
LAUNCH = (
    "python3 -m sglang.launch_server --model-path {target} --speculative-algorithm EAGLE3 "
    "--speculative-draft-model-path {draft} --speculative-num-steps 3 --speculative-eagle-topk 1 "
    "--speculative-num-draft-tokens 4 --host 0.0.0.0 --enable-metrics --max-running-requests 16"
    "{extra}\n"
)


def script(tmp_path: Path, target: str, draft: str, extra: str = "") -> Path:
    path = tmp_path / "serve.sh"
    path.write_text("#!/bin/bash\n" + LAUNCH.format(target=target, draft=draft, extra=extra))
    return path


def lint(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["lint", *argv])
    return code, capsys.readouterr().out


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-hf-home"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hf-home" / "hub"))


def test_a_draft_config_not_found_offline_is_said_not_passed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The target's config is built in, the draft's is nowhere offline: SGLang may refuse at
    draft load, so the draft rules' silence is an INFO001 naming the draft, not a pass."""
    path = script(tmp_path, "Qwen/Qwen3-8B", "someorg/qwen3-8b-eagle3-private")
    code, out = lint(capsys, str(path))
    assert code == 0
    assert "All checks passed" not in out
    (line,) = [ln for ln in out.splitlines() if "INFO001" in ln]
    assert "the draft's config (someorg/qwen3-8b-eagle3-private) was not found" in line
    assert "SPEC002 and SPEC014" in line


@pytest.mark.parametrize("gpu", ["L4x", "Gaudi3", "MI250X"])
def test_an_unknown_gpu_names_the_rules_off_and_the_valid_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], gpu: str
) -> None:
    path = script(tmp_path, "llama", "short-draft", " --context-length 2048")
    _, out = lint(capsys, "--model-dir", str(MODELS), "--gpu", gpu, str(path))
    (line,) = [ln for ln in out.splitlines() if "INFO005" in ln]
    assert f"unknown GPU {gpu!r}, so SPEC009 and SPEC016" in line
    assert "valid names: L4, A10G" in line and "H100" in line and "H200" in line
    _, out = lint(capsys, "--model-dir", str(MODELS), "--gpu", "l4", str(path))
    assert "INFO005" not in out


def test_model_dir_maps_an_absolute_container_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``/models/llama`` in the container is ``fixtures/models/llama`` here: with the pair the
    context rule runs (SPEC002: the short draft), and INFO001's own fix says how."""
    path = script(tmp_path, "/models/llama", "/models/short-draft", " --context-length 40960")
    code, out = lint(capsys, "--model-dir", str(MODELS), str(path))
    (line,) = [ln for ln in out.splitlines() if "INFO001" in ln]
    assert "the target's config (/models/llama) was not found" in line
    assert "fix: Pass --model-dir /models/llama=DIR" in out
    code, out = lint(capsys, "--model-dir", f"/models={MODELS}", str(path))
    assert code == 1
    assert "INFO001" not in out and "SPEC002" in out
    code, out = lint(capsys, "--model-dir", f"/models/llama={MODELS / 'llama'}", str(path))
    assert "the draft's config (/models/short-draft) was not found" in out


def test_a_model_dir_pair_without_an_absolute_path_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = script(tmp_path, "/models/llama", "/models/short-draft")
    assert main(["lint", "--model-dir", "models=local", str(path)]) == 2
    err = capsys.readouterr().err
    assert "--model-dir 'models=local': a PATH=DIR pair needs an absolute PATH" in err
    assert "Traceback" not in err


def test_model_dir_pairs_in_the_settings_are_relative_to_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "local").symlink_to(MODELS)
    (tmp_path / ".specserver-advisor.yaml").write_text("model-dirs: ['/models=local']\n")
    path = script(tmp_path, "/models/llama", "/models/short-draft", " --context-length 40960")
    monkeypatch.chdir(tmp_path)
    _, out = lint(capsys, str(path))
    assert "INFO001" not in out and "SPEC002" in out


def test_a_directory_run_names_the_files_with_no_launch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script(tmp_path, "llama", "short-draft", " --context-length 2048")
    (tmp_path / "notes.sh").write_text("#!/bin/bash\necho hello\n")
    (tmp_path / "values.yaml").write_text("replicas: 2\n")
    _, out = lint(capsys, "--model-dir", str(MODELS), str(tmp_path))
    last = out.splitlines()[-1]
    assert last.startswith("No SGLang launch, benchmark command or SpecServer found in 2 files:")
    assert str(tmp_path / "notes.sh") in last and str(tmp_path / "values.yaml") in last
    assert "serve.sh" not in last
