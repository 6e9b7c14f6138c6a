"""A replica across nodes (issue 27): the multi-node flags the one rendering owns, SGLang's parser
on the leader's view of them, and the topology checks that name the field."""

from __future__ import annotations

from typing import Any

import pytest

from specserver_advisor.launch import multinode
from specserver_advisor.launch.args import argv_of, owned_in_extra, specserver_args
from specserver_advisor.models import SpecServerSpec
from specserver_advisor.sglang.flags import parse_server_argv


def _spec(extra: list[str] | None = None, **resources: Any) -> SpecServerSpec:
    extra = extra or []
    return SpecServerSpec.model_validate(
        {
            "model": {"path": "deepseek-ai/DeepSeek-V3"},
            "speculative": {"algorithm": "NEXTN", "numSteps": 1, "eagleTopk": 1},
            "resources": {"gpuType": "H100", **resources},
            "engine": {"extraArgs": extra},
        }
    )


def test_two_nodes_render_the_lws_environment_and_the_leader_parses() -> None:
    argv = argv_of(specserver_args(_spec(gpus=16, nodes=2), True, True))
    i = argv.index("--nnodes")
    assert argv[i : i + 6] == [
        "--nnodes",
        "2",
        "--node-rank",
        "$(LWS_WORKER_INDEX)",
        "--dist-init-addr",
        "$(LWS_LEADER_ADDRESS):20000",
    ]
    # as written, SGLang's int parser refuses the reference; as the leader sees it, it parses
    assert parse_server_argv(argv).issues
    leader = parse_server_argv(multinode.as_leader(argv, 2))
    assert not leader.issues
    assert (leader.get("nnodes"), leader.get("node_rank"), leader.get("tp_size")) == (2, 0, 16)


def test_one_node_renders_no_multinode_flag() -> None:
    argv = argv_of(specserver_args(_spec(gpus=8), True, True))
    assert not {"--nnodes", "--node-rank", "--dist-init-addr"} & set(argv)


@pytest.mark.parametrize("flag", ["--nnodes", "--node-rank", "--dist-init-addr", "--nnode"])
def test_extra_args_may_not_set_the_multinode_flags(flag: str) -> None:
    why = owned_in_extra([flag, "2"])
    assert why is not None and "the operator renders it" in why


@pytest.mark.parametrize(
    ("resources", "field", "words"),
    [
        ({"gpus": 12, "nodes": 5}, "spec.resources.gpus", "do not divide"),
        ({"gpus": 32, "nodes": 1}, "spec.resources.gpus", "32 GPUs per node"),
        (
            {"gpus": 16, "nodes": 2, "extra": ["--pp-size", "2"]},
            "spec.engine.extraArgs",
            "--pp-size 2",
        ),
        (
            {"gpus": 16, "nodes": 2, "extra": ["--dp-size=2"]},
            "spec.engine.extraArgs",
            "without --enable-dp",
        ),
        (
            {"gpus": 16, "nodes": 2, "extra": ["--enable-dp-attention", "--dp-size", "3"]},
            "spec.engine.extraArgs",
            "must divide",
        ),
    ],
)
def test_topology_problems_name_the_field(
    resources: dict[str, Any], field: str, words: str
) -> None:
    problems = multinode.topology_problems(_spec(**resources))
    assert any(p.startswith(field) for p in problems)
    assert any(words in p for p in problems), problems


def test_engine_port_may_not_sit_on_the_rendezvous_ports() -> None:
    spec = _spec(gpus=16, nodes=2)
    spec.engine.port = multinode.DIST_INIT_PORT + 1
    assert any(p.startswith("spec.engine.port") for p in multinode.topology_problems(spec))
    spec.engine.port = 30000
    assert multinode.topology_problems(spec) == []
    dp = _spec(gpus=16, nodes=2, extra=["--enable-dp-attention", "--dp-size", "8"])
    assert multinode.topology_problems(dp) == []


def test_extra_args_ports_may_not_sit_on_the_rendezvous_ports() -> None:
    clash = _spec(gpus=16, nodes=2, extra=["--nccl-port", str(multinode.DIST_INIT_PORT + 1)])
    assert any("--nccl-port" in p for p in multinode.topology_problems(clash))
    # on one node there is no rendezvous: the same port is the user's to take
    assert multinode.topology_problems(_spec(gpus=8, extra=["--nccl-port", "20001"])) == []
