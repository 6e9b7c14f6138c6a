"""``plan`` across nodes (issue 27): ``--nnodes``, the node count a model that does not fit
needs, and one plan for a multi-node SpecServer, its LeaderWorkerSet and its flags."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from specserver_advisor.cli.main import main
from specserver_advisor.lint.launchlint import build_engine_config
from specserver_advisor.loaders.configchain import ModelConfigs
from specserver_advisor.loaders.configs import bundled
from specserver_advisor.models import SpecServer
from stack import REPO

DATA = REPO / "tests" / "data"
SPEC = DATA / "deepseek-v3-two-nodes.yaml"
HAND_WRITTEN_LWS = DATA / "deepseek-v3-two-nodes-lws.yaml"
DEEPSEEK = ["--model", "deepseek-ai/DeepSeek-V3", "--gpu", "H100", "--concurrency", "1,8,32"]
#: The flags a SpecServer with resources.nodes owns (``multinode.multinode_args``).
MULTINODE_FLAGS = ("--nnodes", "--node-rank", "--dist-init-addr")


def plan_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    rc = main(["plan", *argv, "--format", "json"])
    return rc, json.loads(capsys.readouterr().out)


def plan_text(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str]]:
    rc = main(["plan", *argv])
    return rc, capsys.readouterr().out.splitlines()


def test_a_group_across_two_nodes_pays_the_inter_node_link_with_the_same_memory_per_gpu(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc, one = plan_json(capsys, *DEEPSEEK, "--gpus", "16")
    assert rc == 0
    rc, two = plan_json(capsys, *DEEPSEEK, "--gpus", "16", "--nnodes", "2")
    assert rc == 0
    assert two["flags"]["nnodes"] == 2
    # tp 16 either way: the same weights and KV pool on every GPU ...
    assert two["memory"] == one["memory"]
    assert two["kv_pool_tokens"] == one["kv_pool_tokens"]
    # ... but the all-reduces of every layer cross the inter-node link: each step is slower.
    for a, b in zip(one["curves"], two["curves"], strict=True):
        assert b["off"]["tpot_ms"] > a["off"]["tpot_ms"]
        assert b["on"]["tpot_ms"] > a["on"]["tpot_ms"]


def test_the_text_plan_shows_the_nodes_and_a_snippet_the_operator_accepts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc, lines = plan_text(capsys, *DEEPSEEK, "--gpus", "16", "--nnodes", "2")
    assert rc == 0
    memory = next(line for line in lines if line.startswith("memory on "))
    assert memory.startswith("memory on 16 x H100 (2 nodes x 8): ")
    start = lines.index("spec:")
    body = yaml.safe_load("\n".join(lines[start : lines.index("", start)]))
    spec = SpecServer.model_validate(
        {"apiVersion": "specserver.io/v1alpha1", "kind": "SpecServer", "metadata": {}, **body}
    ).spec
    assert (spec.resources.gpus, spec.resources.nodes) == (16, 2)
    assert "--nnodes" not in spec.engine.extra_args  # resources.nodes renders it


def test_a_model_too_big_for_one_node_is_told_the_nodes_and_the_advice_starts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc, out = plan_json(capsys, *DEEPSEEK, "--gpus", "8")
    assert rc == 1
    message = out["verdict"]["message"]
    assert "needs >= 16 GPUs" in message
    assert (
        "16 GPUs are 2 nodes of 8 x H100: set resources.gpus 16 and resources.nodes 2 "
        "(plan --gpus 16 --nnodes 2)" in message
    )
    rc, fixed = plan_json(capsys, *DEEPSEEK, "--gpus", "16", "--nnodes", "2")
    assert rc == 0, fixed["verdict"]
    # A DGX Spark (GB10) is one GPU per node: the nodes are the GPUs.
    rc, spark = plan_json(capsys, *DEEPSEEK[:2], "--gpu", "GB10", "--gpus", "2")
    assert rc == 1
    assert (
        "nodes of 1 x GB10: set resources.gpus 8 and resources.nodes 8"
        in (spark["verdict"]["message"])
    )


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--gpus", "16", "--nnodes", "3"], "--nnodes 3: --tp-size 16 does not divide over 3"),
        (["--gpus", "16", "--nnodes=99"], "--nnodes 99: expected a node count in 1..64"),
        (["--gpus", "64", "--nnodes", "2"], "32 GPUs per node, above the maximum 16"),
    ],
)
def test_a_node_count_that_makes_no_launch_is_refused_naming_the_flag(
    flags: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", *DEEPSEEK, *flags]) == 2
    assert named in capsys.readouterr().err


def _configs() -> ModelConfigs:
    target = bundled("deepseek-ai/DeepSeek-V3")
    assert target is not None
    return ModelConfigs(target.config, None, None, None, "bundled")


def _rendered_lws(tmp_path: Path) -> Path:
    """The operator's LeaderWorkerSet for ``SPEC``, as its renderer writes it."""
    from specserver_operator.core import render

    server = SpecServer.model_validate(yaml.safe_load(SPEC.read_text()))
    cfg = build_engine_config(server.spec, _configs(), True)
    children = render.build_children(server, "uid-1", cfg)
    lws = next(c for c in children if c["kind"] == "LeaderWorkerSet")
    path = tmp_path / "rendered-lws.yaml"
    path.write_text(yaml.safe_dump(lws))
    return path


def test_the_hand_written_lws_carries_the_launch_models_args_on_leader_and_worker() -> None:
    spec = SpecServer.model_validate(yaml.safe_load(SPEC.read_text())).spec
    args = build_engine_config(spec, _configs(), True).args
    tmpl = yaml.safe_load(HAND_WRITTEN_LWS.read_text())["spec"]["leaderWorkerTemplate"]
    assert tmpl["size"] == spec.resources.nodes
    for role in ("leaderTemplate", "workerTemplate"):
        engine = tmpl[role]["spec"]["containers"][0]
        assert engine["args"] == args, role


#: What a plan predicts (the parts that must agree between its three sources).
PLAN_KEYS = ("memory", "kv_pool_tokens", "max_running_requests", "curves", "context")


def test_a_specserver_its_leaderworkerset_and_plan_nnodes_give_one_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, from_spec = plan_json(capsys, "--from", str(SPEC))
    assert rc == 0, from_spec["verdict"]
    rc, from_lws = plan_json(capsys, "--from", str(_rendered_lws(tmp_path)), "--gpu", "H100")
    assert rc == 0, from_lws["verdict"]
    # The SpecServer's own flags, the multi-node ones left to --nnodes.
    argv, flags = from_spec["argv"], []
    k = 0
    while k < len(argv):
        if argv[k] in MULTINODE_FLAGS:
            k += 2
            continue
        flags.append(argv[k])
        k += 1
    assert "--nnodes" not in flags
    rc, from_flags = plan_json(capsys, "--gpu", "H100", "--nnodes", "2", *flags)
    assert rc == 0, from_flags["verdict"]
    for key in PLAN_KEYS:
        assert from_lws[key] == from_spec[key], key
        assert from_flags[key] == from_spec[key], key
    assert from_spec["crossover_concurrency"] == from_lws["crossover_concurrency"]
    assert from_spec["crossover_concurrency"] == from_flags["crossover_concurrency"]
    # Each planned the leader of a 2-node group: 16 ranks, 8 a node.
    for out in (from_spec, from_lws, from_flags):
        assert (out["flags"]["tp_size"], out["flags"]["nnodes"]) == (16, 2)


def test_plan_from_a_leaderworkerset_plans_its_group_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["plan", "--from", str(HAND_WRITTEN_LWS), "--gpu", "H100", "--launch", "2"]) == 2
    assert "holds 1 launches" in capsys.readouterr().err  # the worker is the leader's launch


def test_a_leader_whose_nnodes_is_not_the_group_size_is_noted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = yaml.safe_load(HAND_WRITTEN_LWS.read_text())
    doc["spec"]["leaderWorkerTemplate"]["size"] = 4
    path = tmp_path / "lws.yaml"
    path.write_text(yaml.safe_dump(doc))
    _, out = plan_json(capsys, "--from", str(path), "--gpu", "H100")
    notes = out["resolved"]["notes"]
    assert any("--nnodes 2 but the LeaderWorkerSet group has 4 pods" in n for n in notes), notes
