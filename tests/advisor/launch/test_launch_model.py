"""One launch model: lint reads a SpecServer as the operator renders it, and the operator's
warnings are the lint rules' findings on that launch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from specserver_advisor.lint.engine import Options, lint
from specserver_advisor.lint.launchlint import build_engine_config
from specserver_advisor.lint.specservers import launch_from_specserver
from specserver_advisor.loaders.configchain import ModelConfigs
from specserver_advisor.loaders.configs import bundled
from specserver_advisor.loaders.yamlnodes import load_all
from specserver_advisor.models import SpecServer

SPEC: dict[str, Any] = {
    "apiVersion": "specserver.io/v1alpha1",
    "kind": "SpecServer",
    "metadata": {"name": "ngram"},
    "spec": {
        "model": {"path": "meta-llama/Llama-3.1-8B-Instruct", "revision": "v2"},
        "speculative": {
            "algorithm": "NGRAM",
            "numDraftTokens": 8,
            "draftKvCacheDtype": "fp8_e4m3",
            "ngram": {"minBfsBreadth": 2, "maxBfsBreadth": 8, "maxTrieDepth": 12},
        },
        "mode": "Auto",
        "engine": {"port": 31000, "maxRunningRequests": 24, "memFractionStatic": 0.85},
        "resources": {"gpus": 1, "gpuType": "A10G"},
    },
}


def llama() -> ModelConfigs:
    target = bundled("meta-llama/Llama-3.1-8B-Instruct")
    assert target is not None
    return ModelConfigs(target.config, None, None, None, "bundled")


def test_lint_reads_a_specserver_with_the_operators_argv(tmp_path: Path) -> None:
    path = tmp_path / "sps.yaml"
    path.write_text(yaml.safe_dump(SPEC))
    launch = launch_from_specserver(str(path), load_all(path.read_text())[0])
    cfg = build_engine_config(SpecServer.model_validate(SPEC).spec, llama(), True)
    assert cfg.valid, cfg.message
    # The flags the old lint copy left out are there, exactly as the operator renders them.
    for flag in ("--port", "--revision", "--speculative-ngram-max-trie-depth"):
        assert flag in launch.args
    assert "--speculative-draft-kv-cache-dtype" in launch.args
    assert launch.args == cfg.args
    # Each flag points into the spec block that set it.
    lines = path.read_text().splitlines()
    engine = lines.index("  engine:")
    end = next(k for k in range(engine + 1, len(lines)) if not lines[k].startswith("    "))
    assert engine < launch.position_of("port").line - 1 < end


def test_operator_warnings_are_the_lint_rules_findings(tmp_path: Path) -> None:
    spec = {**SPEC, "spec": {**SPEC["spec"]}}
    spec["spec"]["speculative"] = {**SPEC["spec"]["speculative"], "acceptThresholdSingle": 0.5}
    cfg = build_engine_config(SpecServer.model_validate(spec).spec, llama(), True)
    assert cfg.valid
    assert "SPEC006" in [code for code, _ in cfg.warnings]
    path = tmp_path / "sps.yaml"
    path.write_text(yaml.safe_dump(spec))
    found, _ = lint([path], Options(gpu="A10G", env={}))
    by_lint = {(d.code, d.message) for d in found if d.severity != "info"}
    assert set(cfg.warnings) <= by_lint
