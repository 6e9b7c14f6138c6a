"""The simulated engine and preflight plan the operator's rendered argv as the operator does.

Both go through the advisor's launch model (``launch.launch_from_argv``): for every example
SpecServer, the argv the operator renders, handed to the simulator and to preflight, gives the
KV pool and resolved shape the operator wrote to ``status.resolved``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from specserver_advisor.launch.multinode import as_leader
from specserver_advisor.lint.launchlint import build_engine_config
from specserver_advisor.loaders.specserver import configs_for_spec
from specserver_advisor.models import Mode, SpecServer
from specserver_engine import preflight
from specserver_engine.sim.config import build_sim_config

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "manifests" / "examples").glob("*.yaml"))


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_the_simulator_and_preflight_see_the_operators_launch(
    example: Path, tmp_path: Path
) -> None:
    spec = SpecServer.model_validate(yaml.safe_load(example.read_text())).spec
    configs = configs_for_spec(spec, {})
    cfg = build_engine_config(spec, configs, speculative=spec.mode != Mode.DISABLED)
    if not cfg.valid:
        pytest.skip(f"the operator refuses it: {cfg.reason}")
    resolved = cfg.resolved
    # What the leader's process sees: Kubernetes expands LeaderWorkerSet's $(VAR)s in args.
    args = as_leader(cfg.args, spec.resources.nodes)
    sim = build_sim_config([*args, "--sim-gpu", spec.resources.gpu_type], env={})
    assert sim.pool_tokens == resolved["kvPoolTokens"]
    assert sim.plan.resolution.get("speculative_num_draft_tokens") == resolved["numDraftTokens"]
    assert cfg.plan is not None and sim.plan.mem.settings == cfg.plan.mem.settings

    # Preflight reads real files: the operator's configs, written where the argv points.
    def write(ref: str, config: dict[str, object] | None) -> str:
        d = tmp_path / ref.replace("/", "--")
        d.mkdir(exist_ok=True)
        (d / "config.json").write_text(json.dumps(config))
        return str(d)

    argv = list(args)
    argv[argv.index("--model-path") + 1] = write(spec.model.path, configs.target)
    if "--speculative-draft-model-path" in argv and spec.draft is not None:
        k = argv.index("--speculative-draft-model-path") + 1
        argv[k] = write(spec.draft.path, configs.draft)
    for flag in ("--revision", "--speculative-draft-model-revision"):
        if flag in argv:
            k = argv.index(flag)
            del argv[k : k + 2]
    code, report = preflight.run(argv, spec.resources.gpu_type, False, {}, gpu={})
    assert code == 0, report
    pools = report["kv_pool_tokens"]
    speculative = resolved["algorithm"] is not None
    # Bundled configs carry no checkpoint sizes: both sides size weights from the shape.
    assert configs.target_weight_bytes is None
    assert pools["with_draft" if speculative else "without_draft"] == resolved["kvPoolTokens"]
