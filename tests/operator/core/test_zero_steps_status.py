"""The operator's side of SGLang's zero-step tier: the policy context, the status it writes.

An Auto SpecServer whose On engine runs ``--speculative-adaptive`` with a cap above the 64 tier:
the policy context knows the batch from which its tiers may run zero steps, and a cycle whose
``sglang:spec_num_steps`` read 0 there writes ``EngineZeroSteps=True`` (the engine acted),
``lastMetrics.specNumSteps`` 0 and a decision that did not score the readings.
"""

from __future__ import annotations

import math
from typing import Any

from specserver_advisor.launch.model import policy_context_for
from specserver_advisor.lint.launchlint import build_engine_config
from specserver_advisor.loaders.configchain import ModelConfigs
from specserver_advisor.models import SpecServer
from specserver_advisor.policy import zerosteps
from specserver_advisor.policy.model import ON, Observation
from specserver_operator.core.autopilot import auto_step
from stack import load_config

QWEN = ModelConfigs(load_config("qwen3-8b"), load_config("qwen3-8b-eagle3"), None, None, "t")


def server(adaptive: bool = True, cap: int = 96) -> SpecServer:
    speculative: dict[str, Any] = {"algorithm": "EAGLE3", "eagleTopk": 1, "adaptive": adaptive}
    if not adaptive:
        speculative.update(numSteps=3, numDraftTokens=4)
    return SpecServer.model_validate(
        {
            "apiVersion": "specserver.io/v1alpha1",
            "kind": "SpecServer",
            "metadata": {"name": "x", "namespace": "llm"},
            "spec": {
                "model": {"path": "Qwen/Qwen3-8B"},
                "draft": {"path": "Tengyunw/qwen3_8b_eagle3"},
                "speculative": speculative,
                "mode": "Auto",
                "engine": {"maxRunningRequests": cap},
                "resources": {"gpuType": "H100"},
            },
        }
    )


def reading(running: float, steps: float) -> Observation:
    return Observation(
        ts=100.0,
        mode=ON,
        accept_length=1.0 if steps == 0 else 2.4,
        ttft_p99_s=0.3,
        running=running,
        queued=0.0,
        output_tok_s=5000.0,
        age_s=1.0,
        spec_num_steps=steps,
    )


def test_the_policy_context_knows_the_tiers_it_rendered() -> None:
    s = server()
    assert policy_context_for(s.spec, QWEN).zero_step_batch == 8
    assert math.isinf(policy_context_for(server(adaptive=False).spec, QWEN).zero_step_batch)
    # The rendered engine warns about the overlap (lint's SPEC018 on the operator's argv).
    warnings = dict(build_engine_config(s.spec, QWEN, True).warnings)
    assert "always runs 0" in warnings["SPEC018"] and "EngineZeroSteps" in warnings["SPEC018"]
    assert "SPEC018" not in dict(build_engine_config(server(cap=48).spec, QWEN, True).warnings)


def test_a_zero_step_cycle_says_the_engine_acted() -> None:
    s = server()
    ctx = policy_context_for(s.spec, QWEN)
    step = auto_step(s.spec, {}, None, None, reading(80, 0), None, ctx, "on", True, 100.0)
    assert step.steps_condition is not None
    status, reason, message = step.steps_condition
    assert (status, reason) == ("True", zerosteps.REASON)
    assert "0 draft steps" in message and "does not score" in message
    assert step.status["lastMetrics"]["specNumSteps"] == 0
    assert step.status["lastDecisionReason"] == zerosteps.REASON
    assert step.decision is not None and step.decision.inputs.accept_length is None


def test_a_drafting_cycle_and_a_fixed_engine() -> None:
    s = server()
    ctx = policy_context_for(s.spec, QWEN)
    step = auto_step(s.spec, {}, None, None, reading(20, 1), None, ctx, "on", True, 100.0)
    assert step.steps_condition == (
        "False",
        "DraftStepsRunning",
        "SGLang's adaptive tier runs draft steps",
    )
    fixed = server(adaptive=False)
    step = auto_step(
        fixed.spec,
        {},
        None,
        None,
        reading(80, 0),
        None,
        policy_context_for(fixed.spec, QWEN),
        "on",
        True,
        100,
    )
    assert step.steps_condition is None
