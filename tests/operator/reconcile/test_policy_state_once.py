"""One form per evaluation: ``status.policyState`` is parsed once per pass and written once.

The pure core (desired.py) is fed an ``Observed`` of an Auto SpecServer whose status holds a
policy state; every path a pass can take through the policy (a due evaluation, a switch being
followed, a pass between evaluations) reads the stored state exactly once
(``policystate.parse``, at observe.py's snapshot) and serialises a state exactly once, for the
status it builds (``policystate.to_status``: the policy's new state, or the one read).
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest

from specserver_advisor.loaders.configchain import ModelConfigs
from specserver_advisor.loaders.configs import bundled
from specserver_advisor.policy.model import Observation
from specserver_operator.core import policystate
from specserver_operator.core.autopilot import iso
from specserver_operator.core.desired import desired
from specserver_operator.core.observed import Observed
from specserver_operator.core.passcache import PassCache
from specserver_operator.reconcile.observe import validated
from specserver_operator.reconcile.runsettings import Settings

NOW, NOW_TS = "2026-11-30T12:00:00Z", 1_800_000_000.0
BODY: dict[str, Any] = {
    "apiVersion": "specserver.io/v1alpha1",
    "kind": "SpecServer",
    "metadata": {"name": "chat", "namespace": "llm", "uid": "u-1", "generation": 1},
    "spec": {
        "model": {"path": "Qwen/Qwen3-8B"},
        "draft": {"path": "Tengyunw/qwen3_8b_eagle3"},
        "speculative": {"algorithm": "EAGLE3", "numSteps": 3, "eagleTopk": 1, "numDraftTokens": 4},
        "mode": "Auto",
        "autoSpeculation": {"evaluationIntervalSeconds": 5},
        "engine": {"memFractionStatic": 0.85},
        "resources": {"gpuType": "L4"},
    },
}
#: Distinct stored states, so no conversion memoised by another test answers for this one.
_SINCE = itertools.count(1_700_000_000)


def stored_state() -> dict[str, Any]:
    """A policy state as status holds it (structured, camelCase, a learned band)."""
    return {
        "mode": "On",
        "modeSince": float(next(_SINCE)),
        "switchTimes": [NOW_TS - 900.0],
        "lastSwitch": NOW_TS - 900.0,
        "bandStreak": 2,
        "lastBand": "4@2.6",
        "bands": {"4@2.6": {"on": {"score": 400.0, "samples": 2, "at": NOW_TS - 10.0}}},
        "bandsSavedAt": NOW_TS - 10.0,
    }


def snapshot(status: dict[str, Any], memo: PassCache) -> Observed:
    """What observe.py reads for ``BODY`` with ``status`` (bundled configs, fresh signals)."""
    body = dict(copy.deepcopy(BODY), status=status)
    server, invalid = validated(body, memo)
    target, draft = bundled("Qwen/Qwen3-8B"), bundled("Tengyunw/qwen3_8b_eagle3")
    assert server is not None and target is not None and draft is not None
    signals = Observation(ts=NOW_TS, accept_length=2.6, running=4.0, queued=0.0,
                          output_tok_s=400.0, ttft_p99_s=0.5, age_s=1.0)  # fmt: skip
    return Observed(
        body=body,
        server=server,
        invalid=invalid,
        configs=ModelConfigs(target.config, draft.config, None, None, "bundled"),
        metrics=signals,
        metrics_error=None,
        now=NOW,
        now_ts=NOW_TS,
    )


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Calls of the one reading and the one writing of the stored policy state."""
    calls = {"parse": 0, "to_status": 0}
    real_parse, real_write = policystate.parse, policystate.to_status

    def parse(stored: Any) -> Any:
        calls["parse"] += 1
        return real_parse(stored)

    def to_status(state: Any) -> Any:
        calls["to_status"] += 1
        return real_write(state)

    monkeypatch.setattr(policystate, "parse", parse)
    monkeypatch.setattr(policystate, "to_status", to_status)
    return calls


def test_a_due_evaluation_parses_the_stored_state_once_and_writes_it_once(
    counted: dict[str, int],
) -> None:
    plan = desired(snapshot({"policyState": stored_state()}, PassCache()), Settings(), PassCache())
    assert plan.decided.step is not None and plan.decided.step.decision is not None
    assert counted == {"parse": 1, "to_status": 1}
    assert plan.status.policy_state is not None  # the typed status holds what was written


@pytest.mark.parametrize(("age_s", "result"), [(30.0, None), (2000.0, "failed")])
def test_a_switch_being_followed_parses_the_stored_state_once(
    counted: dict[str, int], age_s: float, result: str | None
) -> None:
    """Followed (not Ready yet), or rolled back (not Ready within switchTimeoutSeconds)."""
    switch = {
        "target": "Off",
        "previous": "On",
        "startedAt": iso(NOW_TS - age_s),
        "reason": "LoadAboveCrossover",
    }
    status = {"policyState": stored_state(), "switch": switch}
    plan = desired(snapshot(status, PassCache()), Settings(), PassCache())
    assert plan.decided.step is not None and plan.decided.step.switch_result == result
    assert counted == {"parse": 1, "to_status": 1}


def test_a_pass_between_evaluations_parses_the_stored_state_once(counted: dict[str, int]) -> None:
    memo = PassCache()
    memo.last_evaluation["u-1"] = NOW_TS  # evaluated this instant: the interval has not passed
    plan = desired(snapshot({"policyState": stored_state()}, memo), Settings(), memo)
    assert plan.decided.step is None
    assert counted == {"parse": 1, "to_status": 1}
    assert plan.status.policy_state is not None and plan.status.policy_state.mode == "On"


def test_a_switch_the_schema_refuses_is_typed_away_not_followed() -> None:
    """``status.switch`` is read typed at the snapshot too: one a tenant wrote without its
    start time is no switch (the pass evaluates, and the patch removes it); read as a dict it
    raised KeyError out of the whole pass."""
    broken = {"target": "Off", "previous": "On", "reason": "Forged"}  # no startedAt
    memo = PassCache()
    plan = desired(
        snapshot({"policyState": stored_state(), "switch": broken}, memo), Settings(), memo
    )
    assert plan.decided.step is not None and plan.decided.step.switch_result is None
    assert plan.patch.get("switch", "kept") is None
