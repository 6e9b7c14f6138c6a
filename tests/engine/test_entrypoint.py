"""The engine pod's entrypoint: preflight on real files, argv composition, the image lint."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from specserver_engine import preflight
from specserver_engine.cli import main
from stack import REPO, load_config

GPU = {
    "available": True,
    "count": 1,
    "name": "NVIDIA L4",
    "free_bytes": int(21.7 * 2**30),
    "total_bytes": 23034 * 2**20,
}


def model_dir(root: Path, name: str, config: str | None, raw: str | None = None) -> Path:
    path = root / name
    path.mkdir()
    if raw is not None:
        (path / "config.json").write_text(raw)
    elif config:
        (path / "config.json").write_text(json.dumps(load_config(config)))
    return path


def args(target: Path, draft: Path | None, *extra: str) -> list[str]:
    out = ["--model-path", str(target), "--mem-fraction-static", "0.85"]
    if draft:
        out += ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", str(draft)]
    return out + list(extra)


def run_cli(tmp_path: Path, *argv: str) -> tuple[int, dict[str, Any], str]:
    log = tmp_path / "termination-log"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "specserver_engine.cli",
            "preflight",
            "--termination-log",
            str(log),
            *argv,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.returncode, json.loads(log.read_text()), done.stdout + done.stderr


def test_preflight_passes_on_good_files(tmp_path: Path) -> None:
    target = model_dir(tmp_path, "t", "qwen3-8b")
    draft = model_dir(tmp_path, "d", "qwen3-8b-eagle3")
    code, report = preflight.run(args(target, draft), "L4", True, {}, gpu=GPU)
    assert code == 0 and report["ok"]
    assert report["resolved"]["max_running_requests"] == 48
    assert report["kv_pool_tokens"]["with_draft"] > 5000


def test_preflight_missing_and_unreadable_configs(tmp_path: Path) -> None:
    missing = model_dir(tmp_path, "empty", None)
    code, report, out = run_cli(tmp_path, "--no-require-gpu", "--", *args(missing, None))
    assert code == 1 and not report["ok"] and report["failed_check"] == "configs"
    assert out.strip().startswith("preflight: ") and "config.json" in out
    broken = model_dir(tmp_path, "broken", None, raw="{oops")
    code, report, out = run_cli(tmp_path, "--no-require-gpu", "--", *args(broken, None))
    assert code == 1 and "not valid JSON" in report["message"]


def test_preflight_draft_context_mismatch(tmp_path: Path) -> None:
    target = model_dir(tmp_path, "llama", "llama-3.1-8b")
    draft = model_dir(tmp_path, "short", "eagle3-2048-positions")
    code, report = preflight.run(
        args(target, draft, "--context-length", "40960"), "L4", True, {}, gpu=GPU
    )
    assert code == 1 and report["failed_check"] == "context"
    assert "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1" in report["message"]


def test_preflight_without_a_gpu(tmp_path: Path) -> None:
    target = model_dir(tmp_path, "t", "qwen3-8b")
    code, report, out = run_cli(tmp_path, "--", *args(target, None))
    assert code == 1 and report["failed_check"] == "gpu"
    assert "no GPU" in out
    assert len((tmp_path / "termination-log").read_bytes()) <= preflight.TERMINATION_LIMIT


def test_serve_dry_run_prints_argv_and_refuses_bad_flags(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert (
        main(
            [
                "serve",
                "--dry-run",
                "--",
                "--model-path",
                "m",
                "--port",
                "8000",
                "--speculative-algorithm",
                "EAGLE3",
            ]
        )
        == 0
    )
    argv = json.loads(capsys.readouterr().out)
    assert argv[:2] == ["sglang", "serve"] and argv[2:4] == ["--model-path", "m"]
    assert main(["serve", "--dry-run", "--", "--model-path", "m", "--no-such-flag", "1"]) == 2
    assert "unrecognized arguments: --no-such-flag" in capsys.readouterr().err


def test_dockerfile_is_pinned_non_root_and_lint_clean() -> None:
    dockerfile = REPO / "engine-image" / "Dockerfile"
    text = dockerfile.read_text()
    assert "FROM lmsysorg/sglang:v0.5.23-runtime" in text
    assert 'ENTRYPOINT ["specserver-engine"]' in text
    users = [ln.split()[1] for ln in text.splitlines() if ln.startswith("USER ")]
    assert users[-1] not in ("0", "root")
    hadolint = Path(sys.executable).parent / "hadolint"
    done = subprocess.run([str(hadolint), str(dockerfile)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
