"""SPEC009 on launches without speculation: a cap above what the whole KV pool holds queues too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specserver_advisor.cli.main import main


def spec009(capsys: pytest.CaptureFixture[str], tmp_path: Path, flags: str) -> list[str]:
    script = tmp_path / "serve.sh"
    script.write_text(
        "python -m sglang.launch_server --model-path Qwen/Qwen3-8B --mem-fraction-static 0.85 "
        + flags
        + "\n"
    )
    main(["lint", "--gpu", "L4", "--select", "SPEC009", "--format", "json", str(script)])
    return [d["message"] for d in json.loads(capsys.readouterr().out or "[]")]


def test_a_plain_launch_whose_cap_exceeds_its_pool_is_spec009(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Qwen3-8B BF16 alone on an L4 at 0.85: ~23k KV tokens, about 36 requests of 512+128.
    (message,) = spec009(capsys, tmp_path, "--max-running-requests 200")
    assert "KV pool without speculation holds" in message and "on L4" in message
    assert spec009(capsys, tmp_path, "--max-running-requests 16") == []
