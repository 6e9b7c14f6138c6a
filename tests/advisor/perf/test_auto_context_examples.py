"""The operator's Auto context for every example in ``manifests/examples``.

Each speculative example's context (``launch.policy_context_for``, what the operator starts mode
Auto from) has a finite crossover at the draft's prior accept length or a stated reason why
none exists (``plan_auto.no_crossover_reason``), and an accept-length floor below the draft's
typical accept length; ``plan --from`` prints the reason, never ``inf``.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from specserver_advisor.cli.main import main
from specserver_advisor.cli.plantext import POLICY_CROSSOVER
from specserver_advisor.launch.model import policy_context_for
from specserver_advisor.loaders.specserver import configs_for_spec
from specserver_advisor.models import SpecServer, SpecServerSpec
from specserver_advisor.perf.autocontext import (
    crossover_at_prior,
    floor_and_typical,
    no_crossover_reason,
)
from specserver_advisor.policy.model import NEUTRAL_CONTEXT
from stack import REPO

EXAMPLES = sorted((REPO / "manifests" / "examples").glob("*.yaml"))


def specs(path: Path) -> list[SpecServerSpec]:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d and d.get("kind") == "SpecServer"]
    return [SpecServer.model_validate(d).spec for d in docs]


def test_every_example_holds_a_specserver() -> None:
    assert EXAMPLES and all(specs(p) for p in EXAMPLES)


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_auto_context_has_a_crossover_or_a_reason_and_a_floor_below_typical(
    example: Path,
) -> None:
    for spec in specs(example):
        ctx = policy_context_for(spec, configs_for_spec(spec, {}))
        assert ctx != NEUTRAL_CONTEXT, "every example has a KV pool to reason on"
        cross = crossover_at_prior(ctx)
        reason = no_crossover_reason(ctx, spec)
        assert (math.isfinite(cross) and cross > 0) == (reason is None), (cross, reason)
        floor, typical = floor_and_typical(ctx, spec)
        assert floor < typical, (
            f"{example.name}: Auto's accept-length floor {floor} is not below the draft's "
            f"typical accept length {typical} (break-even {ctx.break_even_accept})"
        )


def test_the_cap_reason_is_the_mechanism() -> None:
    """The L4 example has no crossover because its maxRunningRequests caps both engines:
    without the cap the same launch has a finite one."""
    (spec,) = specs(REPO / "manifests" / "examples" / "qwen3-8b-eagle3-l4.yaml")
    configs = configs_for_spec(spec, {})
    reason = no_crossover_reason(policy_context_for(spec, configs), spec)
    assert reason is not None and "maxRunningRequests 16" in reason
    uncapped = spec.model_copy(
        update={"engine": spec.engine.model_copy(update={"max_running_requests": None})}
    )
    ctx = policy_context_for(uncapped, configs)
    assert no_crossover_reason(ctx, uncapped) is None
    assert 1 < crossover_at_prior(ctx) < math.inf


def test_plan_from_an_auto_example_states_the_reason_not_inf(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["plan", "--from", str(REPO / "manifests/examples/qwen3-8b-eagle3-l4.yaml")]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith(POLICY_CROSSOVER))
    assert "none: spec.engine.maxRunningRequests 16 caps both engines" in line
    assert "inf" not in line
