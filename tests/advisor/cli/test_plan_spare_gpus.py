"""``plan`` says how many spare GPUs a speculation switch of the planned shape needs.

Per ``switchStrategy``: BlueGreen starts every replica again beside the old one (replicas x
gpus, whole nodes for a group across nodes), RollingUpdate with a surge of one starts one
replica (its whole nodes across nodes; none with maxSurge 0, a restart in place), Recreate
none (it takes the downtime). Checked on the committed examples, in text and JSON, and for a
SpecServer with more replicas.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from specserver_advisor.cli.main import main
from stack import REPO

EXAMPLES = REPO / "manifests" / "examples"


def plan_json(path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    main(["plan", "--from", str(path), "--format", "json"])
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


def test_a_bluegreen_specserver_needs_each_replicas_gpus(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = yaml.safe_load((EXAMPLES / "qwen3-8b-eagle3-l4-bluegreen.yaml").read_text())
    doc["spec"]["replicas"] = 3
    path = tmp_path / "three.yaml"
    path.write_text(yaml.safe_dump(doc))
    spare = plan_json(path, capsys)["switch_spare_gpus"]
    assert (spare["replicas"], spare["gpus_per_replica"], spare["switch_strategy"]) == (
        3,
        1,
        "BlueGreen",
    )
    shapes = spare["strategies"]
    assert shapes["BlueGreen"] == {"gpus": 3, "nodes": 0, "keeps_serving": True}
    assert shapes["RollingUpdate"] == {"gpus": 1, "nodes": 0, "keeps_serving": True}
    assert shapes["Recreate"] == {"gpus": 0, "nodes": 0, "keeps_serving": False}
    assert spare["deadline_s"] == 900  # the example's switchTimeoutSeconds
    main(["plan", "--from", str(path)])
    text = capsys.readouterr().out
    line = next(x for x in text.splitlines() if x.startswith("spare GPUs"))
    assert "(this SpecServer: BlueGreen)" in line and "BlueGreen 3 x L4" in line
    assert "RollingUpdate 1 x L4 (maxSurge 1)" in line and "~900s" in line


def test_a_group_across_nodes_needs_whole_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    spare = plan_json(EXAMPLES / "deepseek-v3-nextn-h100-2node.yaml", capsys)["switch_spare_gpus"]
    assert (spare["gpus_per_replica"], spare["nodes_per_replica"]) == (16, 2)
    shapes = spare["strategies"]
    assert shapes["BlueGreen"]["gpus"] == 16 and shapes["BlueGreen"]["nodes"] == 2
    # A LeaderWorkerSet's RollingUpdate defaults to no surge: it restarts in place.
    assert spare["max_surge"] == 0 and shapes["RollingUpdate"]["gpus"] == 0
    # The derived deadline outlasts the modelled start-up of 2 x 8 H100 loading DeepSeek-V3.
    assert spare["deadline_s"] > spare["startup_s"] > 60


def test_a_plain_launch_is_one_replica_with_a_derived_deadline(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["plan", "--model", "Qwen/Qwen3-8B", "--draft", "Tengyunw/qwen3_8b_eagle3"]
    argv += ["--gpu", "H100", "--tp-size", "2", "--format", "json"]
    main(argv)
    spare = json.loads(capsys.readouterr().out)["switch_spare_gpus"]
    assert spare["switch_strategy"] is None and spare["replicas"] == 1
    assert spare["strategies"]["BlueGreen"]["gpus"] == 2
    assert spare["strategies"]["RollingUpdate"]["gpus"] == 2
    assert spare["deadline_s"] >= spare["startup_s"] + 600
