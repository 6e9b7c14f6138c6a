"""CLI conventions (issue 40): an unknown option exits 2 naming it (plan, replay, fleetsim),
never "won't start"; ``plan --model-dir`` looks repo ids up in local folders as ``lint`` does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specserver_advisor.cli.main import main
from specserver_advisor.loaders.configs import bundled


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (
            ["plan", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--concurency", "1,8"],
            "--concurency",
        ),
        (
            ["plan", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--input-lenght=9"],
            "--input-lenght",
        ),
        (
            ["plan", "--from", "x.yaml", "--speculative-algorithmm", "NGRAM"],
            "--speculative-algorithmm",
        ),
        (["plan", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--spec", "1"], "--spec"),
    ],
)
def test_plan_names_an_unknown_option_and_exits_2(
    argv: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert f"option '{named}'" in out.err and "won't start" not in out.err


def test_plan_suggests_the_option_meant(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--concurency", "1,8"]
    assert main(argv) == 2
    assert "did you mean --concurrency?" in capsys.readouterr().err


def test_an_sglang_flag_still_passes_through_plan(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--algorithm", "NGRAM"]
    assert main([*argv, "--gpu", "H100", "--page-size", "16", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["flags"]["page_size"] == 16


@pytest.mark.parametrize(
    "argv",
    [
        ["replay", "--observations", "obs.jsonl", "--bogus-flag", "1"],
        ["fleetsim", "--bogus-flag"],
    ],
)
def test_replay_and_fleetsim_name_an_unknown_option_and_exit_2(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--bogus-flag" in err and f"specserver-advisor {argv[0]}: error" in err


def _model_dir(tmp_path: Path, repo: str, source: str) -> Path:
    found = bundled(source)
    assert found is not None
    folder = tmp_path / "models" / repo
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(found.config))
    return tmp_path / "models"


def test_plan_model_dir_resolves_a_repo_id_offline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A repo id no bundled config knows: found under --model-dir, as lint finds it."""
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    root = _model_dir(tmp_path, "acme/private-llama", "meta-llama/Llama-3.1-8B-Instruct")
    argv = ["plan", "--model", "acme/private-llama", "--algorithm", "NGRAM", "--gpu", "H100"]
    assert main(argv) == 2  # not found without it
    assert "acme/private-llama" in capsys.readouterr().err
    assert main([*argv, "--model-dir", str(root), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["flags"]["model_path"] == "acme/private-llama"
    # PATH=DIR: a container path mapped to a local folder; a SpecServer through --from too
    script = tmp_path / "serve.sh"
    script.write_text(
        "python -m sglang.launch_server --model-path /models/acme/private-llama "
        "--speculative-algorithm NGRAM\n"
    )
    mapped = ["--model-dir", f"/models={root}", "--gpu", "H100"]
    assert main(["plan", "--from", str(script), *mapped]) == 0
    capsys.readouterr()
    sps = tmp_path / "sps.yaml"
    sps.write_text(
        "apiVersion: specserver.io/v1alpha1\nkind: SpecServer\nmetadata: {name: p}\n"
        "spec:\n  model: {path: acme/private-llama}\n  speculative: {algorithm: NGRAM}\n"
        "  resources: {gpus: 1, gpuType: H100}\n"
    )
    assert main(["plan", "--from", str(sps)]) == 2
    capsys.readouterr()
    assert main(["plan", "--from", str(sps), "--model-dir", str(root)]) == 0
