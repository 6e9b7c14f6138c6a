"""The linter on the operator's own LeaderWorkerSets (issue 27): every multi-node example in
manifests/examples/, rendered by the operator's renderer with its Service, lints clean (leader
and worker both read), and the same object with a worker mistake planted draws its rule, so
the clean result is the linter reading the object, not skipping it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from specserver_advisor.cli.main import main
from specserver_advisor.lint.launchlint import build_engine_config
from specserver_advisor.loaders.configchain import ModelConfigs
from specserver_advisor.loaders.configs import bundled
from specserver_advisor.models import SpecServer
from specserver_operator.core import render
from stack import REPO

MULTI_NODE = [
    p
    for p in sorted((REPO / "manifests" / "examples").glob("*.yaml"))
    if (yaml.safe_load(p.read_text())["spec"]["resources"].get("nodes") or 1) > 1
]


def rendered(example: Path) -> list[dict[str, Any]]:
    server = SpecServer.model_validate(yaml.safe_load(example.read_text()))
    target = bundled(server.spec.model.path)
    assert target is not None
    configs = ModelConfigs(target.config, None, None, None, "bundled")
    cfg = build_engine_config(server.spec, configs, server.spec.mode.value != "Disabled")
    assert cfg.valid, cfg
    return render.build_children(server, "uid-1", cfg)


def test_there_is_a_multi_node_example() -> None:
    assert MULTI_NODE


@pytest.mark.parametrize("example", MULTI_NODE, ids=lambda p: p.stem)
def test_the_operators_rendered_leaderworkerset_lints_clean(
    example: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    children = rendered(example)
    assert [c["kind"] for c in children] == ["LeaderWorkerSet", "Service"]
    path = tmp_path / "rendered.yaml"
    path.write_text(yaml.safe_dump_all(children))
    assert main(["lint", str(path)]) == 0
    assert "All checks passed (1 file, 2 launches)" in capsys.readouterr().out
    # A worker claiming the leader's rank (a literal 0) is found in the same object.
    lws = children[0]
    worker = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    worker["args"][worker["args"].index("--node-rank") + 1] = "0"
    path.write_text(yaml.safe_dump_all(children))
    main(["lint", "--format", "json", str(path)])
    assert "MN002" in capsys.readouterr().out
