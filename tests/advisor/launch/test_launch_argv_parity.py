"""An argv Launch carries what a SpecServer's launch carries: rule findings, Auto's context.

For every example SpecServer, the argv the operator renders, planned back from argv alone
(``launch.launch_from_argv``, as preflight and the simulated engine do), starts and has the
warnings the operator put in ConfigValid and, at the spec's expected request lengths (an argv
does not carry them), the policy context the operator starts Auto from.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from specserver_advisor.gpus import lookup_gpu
from specserver_advisor.launch.args import spec_env
from specserver_advisor.launch.model import launch_from_argv, policy_context_for
from specserver_advisor.launch.multinode import as_leader
from specserver_advisor.lint.launchlint import build_engine_config, launch_findings
from specserver_advisor.loaders.specserver import configs_for_spec
from specserver_advisor.models import Mode, SpecServer
from specserver_advisor.policy.model import NEUTRAL_CONTEXT

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((REPO / "manifests" / "examples").glob("*.yaml"))


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_an_argv_launch_has_the_operators_findings_and_policy_context(example: Path) -> None:
    spec = SpecServer.model_validate(yaml.safe_load(example.read_text())).spec
    configs = configs_for_spec(spec, {})
    speculative = spec.mode != Mode.DISABLED
    cfg = build_engine_config(spec, configs, speculative=speculative)
    if not cfg.valid:
        pytest.skip(f"the operator refuses it: {cfg.reason}")
    gpu = lookup_gpu(spec.resources.gpu_type)
    # The argv as the engine process gets it: Kubernetes expands LeaderWorkerSet's $(VAR)s.
    args = as_leader(cfg.args, spec.resources.nodes)
    launch = launch_from_argv(args, spec_env(spec), configs, gpu)
    assert launch.failure() is None
    assert launch_findings(launch) == cfg.warnings
    assert launch.speculative == speculative
    if speculative:
        # A computed cap is sized for the mode rendered; Auto's context compares both modes
        # without it. A cap the spec gives binds both engines, and the context plans with it.
        argv = list(args)
        if cfg.max_running_requests_source == "Computed":
            k = argv.index("--max-running-requests")
            del argv[k : k + 2]
        lengths = spec.engine.expected_input_tokens, spec.engine.expected_output_tokens
        ctx = launch_from_argv(argv, spec_env(spec), configs, gpu).policy_context(
            spec.auto_speculation, *lengths
        )
        assert ctx == policy_context_for(spec, configs)
        assert ctx != NEUTRAL_CONTEXT  # every speculative example has a KV pool to reason on


def test_an_argv_launch_sglang_refuses_says_why() -> None:
    spec = SpecServer.model_validate(yaml.safe_load(EXAMPLES[0].read_text())).spec
    configs = configs_for_spec(spec, {})
    launch = launch_from_argv(
        ["--model-path", spec.model.path, "--speculative-algorithm", "NOPE"],
        {},
        configs,
        lookup_gpu(spec.resources.gpu_type),
    )
    failure = launch.failure()
    assert failure is not None and "NOPE" in failure[1]
    assert launch.policy_context() == NEUTRAL_CONTEXT
