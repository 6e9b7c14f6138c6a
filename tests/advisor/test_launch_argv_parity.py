"""An argv Launch carries the rule findings a SpecServer's launch carries.

For every example SpecServer, the argv the operator renders, planned back from argv alone
(``launch.launch_from_argv``, as preflight and the simulated engine do), starts and has the
warnings the operator put in ConfigValid.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from specserver_advisor.gpus import lookup_gpu
from specserver_advisor.launch import build_engine_config, launch_from_argv
from specserver_advisor.launch_args import spec_env
from specserver_advisor.loaders.specserver import configs_for_spec
from specserver_advisor.models import Mode, SpecServer

REPO = Path(__file__).resolve().parents[2]
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
    launch = launch_from_argv(cfg.args, spec_env(spec), configs, gpu)
    assert launch.failure() is None
    assert launch.findings() == cfg.warnings
    assert launch.speculative == speculative


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
