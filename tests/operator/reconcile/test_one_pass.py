"""One pass from spec to engine: a SpecServer pass renders its argv once and plans it once.

The seams counted are our own: ``launch_args.render_spec`` (a SpecServer becomes SGLang flags)
and ``plan.make_plan`` (one launch planned), wrapped with counters wherever the pass can reach
them (the launch model, and the lint rules the operator's warnings come from). The operator's
desired-state path (engine config, its lint warnings, Auto's policy context) and the advisor's
``plan --from`` on a SpecServer both go through ``launch.settle``; neither renders nor plans the
spec again. (Before settle, on a80971e, the operator's Auto pass rendered this spec 3 times and
planned it 3 times: the spec's flags, the rendering with the cap, the policy context's own;
``plan --from`` rendered it 5 times and planned it 6.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from specserver_advisor.cli.main import main
from specserver_advisor.launch import args as launch_args
from specserver_advisor.launch import model as launch
from specserver_advisor.launch.args import argv_of, spec_env, specserver_args
from specserver_advisor.launch.model import MAX_PLANS, launch_from_argv, plan_launch, settle
from specserver_advisor.lint.rules import _base as rules_base
from specserver_advisor.loaders.configchain import ModelConfigs
from specserver_advisor.loaders.configs import bundled
from specserver_advisor.models import SpecServer
from specserver_advisor.perf.plan import policy_context
from specserver_advisor.policy.model import NEUTRAL_CONTEXT
from specserver_operator.core.desired import desired
from specserver_operator.core.observed import Observed
from specserver_operator.core.passcache import PassCache
from specserver_operator.reconcile.observe import validated
from specserver_operator.reconcile.runsettings import Settings
from stack import REPO

EXAMPLE = REPO / "manifests" / "examples" / "qwen3-8b-eagle3-l4.yaml"


def auto_body() -> dict[str, Any]:
    """The Qwen3-8B EAGLE-3 L4 example (mode Auto, its fraction and cap given), with the
    bundled configs instead of a volume."""
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["metadata"].update({"namespace": "llm", "uid": "u-1", "generation": 1})
    del doc["spec"]["modelSource"]
    doc["spec"]["autoSpeculation"] = {"evaluationIntervalSeconds": 5}
    return doc


def configs() -> ModelConfigs:
    target, draft = bundled("Qwen/Qwen3-8B"), bundled("Tengyunw/qwen3_8b_eagle3")
    assert target is not None and draft is not None
    return ModelConfigs(target.config, draft.config, None, None, "bundled")


class Counts:
    def __init__(self) -> None:
        self.renders = 0
        self.plans = 0


@pytest.fixture
def counts(monkeypatch: pytest.MonkeyPatch) -> Counts:
    """Counters around the render and the plan, wherever the launch model's callers reach them."""
    seen = Counts()
    render, plan = launch_args.render_spec, launch.make_plan

    def counted_render(*args: Any, **kwargs: Any) -> Any:
        seen.renders += 1
        return render(*args, **kwargs)

    def counted_plan(*args: Any, **kwargs: Any) -> Any:
        seen.plans += 1
        return plan(*args, **kwargs)

    for module in (launch_args, launch):
        monkeypatch.setattr(module, "render_spec", counted_render)
    for module in (launch, rules_base):
        monkeypatch.setattr(module, "make_plan", counted_plan)
    return seen


def test_an_operator_pass_renders_and_plans_the_spec_once(counts: Counts) -> None:
    body = auto_body()
    memo = PassCache()
    server, invalid = validated(body, memo)
    assert server is not None, invalid
    observed = Observed(
        body=body,
        server=server,
        invalid=invalid,
        configs=configs(),
        children={},
        autoscalers=[],
        now="2026-11-30T12:00:00Z",
        now_ts=1_800_000_000.0,
    )
    plan = desired(observed, Settings(), memo)
    assert plan.decided.step is not None  # Auto evaluated: its policy context was built
    assert plan.decided.cfg is not None and plan.decided.cfg.valid
    assert plan.decided.cfg.speculative  # the On engine, whose plan the context came from
    assert (counts.renders, counts.plans) == (1, 1)


def test_plan_from_a_specserver_renders_and_plans_it_once(
    counts: Counts, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "server.yaml"
    path.write_text(yaml.safe_dump(auto_body()))
    assert main(["plan", "--from", str(path), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "--max-running-requests" in out["argv"]
    assert (counts.renders, counts.plans) == (1, 1)


def test_a_spec_leaving_fraction_and_cap_to_the_operator_is_rendered_once(
    counts: Counts,
) -> None:
    """The fraction and the cap each cost one more plan of the same rendering (the fixed
    point's bound); the plan kept is the rendered launch's own."""
    doc = auto_body()
    for key in ("memFractionStatic", "maxRunningRequests"):
        del doc["spec"]["engine"][key]
    spec = SpecServer.model_validate(doc).spec
    cfg = settle(spec, configs(), True)
    assert cfg.valid, cfg.message
    assert cfg.mem_fraction_static_source == "Computed"
    assert cfg.max_running_requests_source == "Computed"
    assert counts.renders == 1 and counts.plans == MAX_PLANS
    assert cfg.plan is not None
    rendered = launch_from_argv(cfg.args, spec_env(spec), configs(), cfg.plan.scenario.gpu)
    assert rendered.plan is not None and rendered.plan.mem == cfg.plan.mem


def test_the_policy_context_is_planned_with_the_spec_s_own_cap() -> None:
    """A computed cap is sized for the mode rendered (the Off engine's would differ): Auto's
    context is the one of the launch without it, from the plan settle made before the cap."""
    doc = auto_body()
    del doc["spec"]["engine"]["maxRunningRequests"]
    spec = SpecServer.model_validate(doc).spec
    cfg = settle(spec, configs(), True)
    assert cfg.valid and cfg.max_running_requests_source == "Computed" and cfg.plan is not None
    own = plan_launch(
        spec,
        configs(),
        cfg.plan.scenario.gpu,
        argv_of(specserver_args(spec, True)),
        spec_env(spec),
    )
    expected = policy_context(own, spec.auto_speculation, engine_adapts_steps=False)
    assert cfg.policy == expected and cfg.policy != NEUTRAL_CONTEXT
    assert settle(spec, configs(), False).policy == NEUTRAL_CONTEXT  # Auto plans the On launch
