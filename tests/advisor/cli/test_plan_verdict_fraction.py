"""`plan`'s no-KV advice is the fraction the operator renders; `--plot` says what it draws."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from specserver_advisor.cli.main import main
from specserver_advisor.lint.launchlint import build_engine_config
from specserver_advisor.loaders.specserver import configs_for_spec
from specserver_advisor.models import SpecServer

SPEC = {
    "apiVersion": "specserver.io/v1alpha1",
    "kind": "SpecServer",
    "metadata": {"name": "q"},
    "spec": {
        "model": {"path": "Qwen/Qwen3-8B"},
        "draft": {"path": "Tengyunw/qwen3_8b_eagle3"},
        "speculative": {"algorithm": "EAGLE3", "numSteps": 3, "eagleTopk": 1, "numDraftTokens": 4},
        "mode": "Enabled",
        "engine": {"image": "lmsysorg/sglang:v0.5.23-runtime"},
        "resources": {"gpus": 1, "gpuType": "L4"},
    },
}


def test_the_no_kv_verdict_advises_the_operators_computed_fraction(
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec = SpecServer.model_validate(SPEC).spec
    operator = build_engine_config(spec, configs_for_spec(spec, {}), speculative=True)
    assert operator.valid and operator.mem_fraction_static_source == "Computed"
    argv = ["plan", "--model", "Qwen/Qwen3-8B", "--draft", "Tengyunw/qwen3_8b_eagle3"]
    argv += ["--gpu", "L4", "--steps", "3", "--topk", "1", "--draft-tokens", "4"]
    assert main(argv) == 1
    first = capsys.readouterr().out.splitlines()[0]
    advised = re.search(r"set --mem-fraction-static ([0-9.]+)$", first)
    assert advised, first
    assert float(advised.group(1)) == operator.mem_fraction_static


def test_plot_refuses_png_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["plan", "--model", "Qwen/Qwen3-8B", "--gpu", "H100"]
    argv += ["--speculative-algorithm", "NGRAM", "--plot", str(tmp_path / "p.png")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "PNG is not supported" in err and ".svg" in err
    assert not (tmp_path / "p.png").exists()
