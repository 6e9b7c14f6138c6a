"""``lint`` on a SpecServer and the operator's warnings judge the launch the operator settles.

Both read the plan of ``launch.settle`` (the spec's request lengths, its fraction and cap), not a
second plan at the linter's default 512+128 tokens: a cap the KV pool cannot hold at the
lengths the spec expects is SPEC009 in both, as ``status`` would say.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from specserver_advisor import findings
from specserver_advisor.cli.main import main
from specserver_advisor.lint.launchlint import build_engine_config
from specserver_advisor.loaders.specserver import configs_for_spec
from specserver_advisor.models import SpecServer
from stack import REPO


def long_requests() -> dict[str, Any]:
    """The Qwen3-8B EAGLE-3 L4 example (cap 16) serving 4096+512-token requests."""
    doc = yaml.safe_load((REPO / "manifests/examples/qwen3-8b-eagle3-l4.yaml").read_text())
    del doc["spec"]["modelSource"]
    doc["spec"]["engine"].update({"expectedInputTokens": 4096, "expectedOutputTokens": 512})
    return doc


def test_a_cap_the_pool_cannot_hold_at_the_spec_s_lengths_is_spec009_in_lint_and_operator(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = long_requests()
    spec = SpecServer.model_validate(doc).spec
    cfg = build_engine_config(spec, configs_for_spec(spec, {}), True)
    assert cfg.valid and cfg.plan is not None
    assert cfg.plan.fits_on < 16  # what status reports: the pool holds fewer than the cap
    assert findings.CAP_EXCEEDS_KV_POOL in [code for code, _ in cfg.warnings]
    path = tmp_path / "server.yaml"
    path.write_text(yaml.safe_dump(doc))
    main(["lint", "--select", findings.CAP_EXCEEDS_KV_POOL, "--format", "json", str(path)])
    found = json.loads(capsys.readouterr().out or "[]")
    assert [d["code"] for d in found] == [findings.CAP_EXCEEDS_KV_POOL]
    assert f"holds {cfg.plan.fits_on} requests of 4096+512 tokens" in found[0]["message"]
