"""A switch's deadline, its cancel and its Recreate fallback, through the pure core.

Observed snapshots in, PassPlan out (desired.py): an Auto SpecServer serving On switches to
Off, its new engine never Ready; the cause is what observe.py read (``Observed.blocked``). The
children are what the API server would hold once each plan was written; a named workload has
no Ready pod. At every step the Service selects a Deployment that has Ready replicas, except
in the Recreate fallback (its downtime is the point of it).
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest
from passinputs import NOW_TS, SETTINGS, observed
from pendingpods import pending_pod

from specserver_advisor.policy.model import Decision, PolicyState, Reason, SpecMode
from specserver_operator.core import autopilot
from specserver_operator.core import blocked as why
from specserver_operator.core.blocked import Blocked
from specserver_operator.core.desired import PassPlan, desired
from specserver_operator.core.hashes import HASH_ANNOTATION
from specserver_operator.core.observed import Observed
from specserver_operator.core.passcache import PassCache
from specserver_operator.core.statusmodel import serialized
from specserver_operator.core.switching import iso

Kids = dict[tuple[str, str], dict[str, Any]]
NO_GPU = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are"
DEADLINE_S = 600


def body(strategy: str = "BlueGreen", fallback: str = "Cancel") -> dict[str, Any]:
    return {
        "apiVersion": "specserver.io/v1alpha1",
        "kind": "SpecServer",
        "metadata": {"name": "chat", "namespace": "llm", "uid": "u-1", "generation": 1},
        "spec": {
            "model": {"path": "Qwen/Qwen3-8B"},
            "draft": {"path": "Tengyunw/qwen3_8b_eagle3"},
            "speculative": {
                "algorithm": "EAGLE3",
                "numSteps": 3,
                "eagleTopk": 1,
                "numDraftTokens": 4,
            },
            "mode": "Auto",
            "engine": {"memFractionStatic": 0.85},
            "resources": {"gpuType": "L4"},
            "replicas": 1,
            "autoSpeculation": {
                "switchStrategy": strategy,
                "switchTimeoutSeconds": DEADLINE_S,
                "blockedSwitchFallback": fallback,
            },
        },
    }


def written(plan: PassPlan, kids: Kids, not_ready: tuple[str, ...] = ()) -> Kids:
    """The children once ``plan`` was written and rolled out; ``not_ready`` have no Ready pod."""
    out = {k: v for k, v in kids.items() if k not in plan.deletions}
    assert plan.rendered is not None
    for write in plan.writes:
        obj = copy.deepcopy(plan.rendered.object(write.child))
        obj["metadata"].setdefault("annotations", {})[HASH_ANNOTATION] = write.child.digest
        obj["metadata"]["generation"] = 1
        if obj["kind"] == "Deployment":
            n = obj["spec"]["replicas"]
            ready = 0 if obj["metadata"]["name"] in not_ready else n
            obj["status"] = {"readyReplicas": ready, "updatedReplicas": n, "observedGeneration": 1}
        out[(obj["kind"], obj["metadata"]["name"])] = obj
    return out


def snapshot(
    server: dict[str, Any], kids: Kids, memo: PassCache, now: float, cause: Blocked | None
) -> Observed:
    """What observe.py reads at ``now``: with ``cause``, the standby's pod held by it."""
    found = observed(server, kids, [], memo)
    found = dataclasses.replace(found, now=iso(now), now_ts=now)
    if cause is not None:
        workload = kids[("Deployment", cause.workload)]
        pod = pending_pod(workload, cause.reason, cause.message)
        found = dataclasses.replace(found, pods=(pod,))
    return found


def after(server: dict[str, Any], plan: PassPlan) -> dict[str, Any]:
    """The SpecServer once the plan's status (its intent first) was written."""
    status = serialized(plan.status)
    return dict(server, status=status)


def serving(kids: Kids) -> tuple[str, int]:
    """The Deployment the Service selects and its Ready replicas."""
    mode = kids[("Service", "chat")]["spec"]["selector"].get("specserver.io/mode")
    name = f"chat-{mode}" if mode else "chat"
    return name, kids[("Deployment", name)]["status"]["readyReplicas"]


def replicas(kids: Kids, name: str) -> int:
    return int(kids[("Deployment", name)]["spec"]["replicas"])


def switching_to_off(
    strategy: str = "BlueGreen", fallback: str = "Cancel", started: float = NOW_TS
) -> tuple[dict[str, Any], Kids, PassCache]:
    """On serving, then a switch to Off recorded at ``started`` (its intent, as auto_step
    writes it) and its children written: the Off engine starting, not Ready."""
    memo = PassCache()
    server = body(strategy, fallback)
    first = desired(snapshot(server, {}, memo, started - 60, None), SETTINGS, memo)
    kids = written(first, {})
    server = after(server, first)
    status = server["status"]
    status["switch"] = {
        "target": "Off",
        "previous": "On",
        "startedAt": iso(started),
        "reason": "TTFTSLOBreached",
        "deadline": iso(started + DEADLINE_S),
    }
    status["policyState"] = dict(status["policyState"], switchTimes=[started])
    plan = desired(snapshot(server, kids, memo, started + 1, None), SETTINGS, memo)
    new = "chat-off" if strategy == "BlueGreen" else "chat"
    return after(server, plan), written(plan, kids, (new,)), memo


def scarce(workload: str = "chat-off") -> Blocked:
    return Blocked(why.UNSCHEDULABLE, NO_GPU, workload)


def ledger(plan: PassPlan) -> list[dict[str, Any]]:
    return list(serialized(plan.status).get("decisions") or [])


def test_a_new_switch_records_its_deadline_before_the_engine_is_touched(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    memo = PassCache()
    server = body()
    first = desired(snapshot(server, {}, memo, NOW_TS, None), SETTINGS, memo)
    kids, server = written(first, {}), after(server, first)
    assert server["status"]["policyState"]["mode"] == "On"

    def switch_off(*_: Any, **__: Any) -> Any:  # the policy's reasons are tests/advisor/policy
        state = PolicyState(mode=SpecMode.ON)
        return (
            Decision(NOW_TS, SpecMode.OFF.action, Reason.TTFT_SLO_BREACHED, SpecMode.ON),
            state,
            state,
        )

    monkeypatch.setattr(autopilot, "evaluate", switch_off)
    now = NOW_TS + 30
    plan = desired(snapshot(server, kids, memo, now, None), SETTINGS, memo)
    assert plan.intent is not None
    record = plan.intent["switch"]
    assert (record["target"], record["previous"], record["startedAt"]) == ("Off", "On", iso(now))
    assert record["deadline"] == iso(now + DEADLINE_S)  # switchTimeoutSeconds


def test_a_blocked_standby_is_followed_until_its_deadline_not_cancelled_before() -> None:
    server, kids, memo = switching_to_off()
    for now in (NOW_TS + 60, NOW_TS + DEADLINE_S - 1):
        plan = desired(snapshot(server, kids, memo, now, scarce()), SETTINGS, memo)
        assert serialized(plan.status)["switch"]["target"] == "Off"
        kids = written(plan, kids, ("chat-off",))
        assert serving(kids) == ("chat-on", 1) and replicas(kids, "chat-off") == 1


def test_a_blocked_bluegreen_switch_is_cancelled_at_its_deadline_and_backs_off() -> None:
    server, kids, memo = switching_to_off()
    assert serving(kids) == ("chat-on", 1) and replicas(kids, "chat-off") == 1
    now = NOW_TS + DEADLINE_S
    plan = desired(snapshot(server, kids, memo, now, scarce()), SETTINGS, memo)
    status = serialized(plan.status)
    assert "switch" not in status and plan.patch["switch"] is None
    kids = written(plan, kids, ("chat-off",))
    # The standby is scaled back to zero; the Service never left the serving On engine.
    assert serving(kids) == ("chat-on", 1) and replicas(kids, "chat-off") == 0
    entry = ledger(plan)[-1]
    assert entry["reason"] == "SwitchBlocked" and entry["mode"] == "On"
    assert NO_GPU in entry["message"] and f"waited {DEADLINE_S}s" in entry["message"]
    state = status["policyState"]
    assert state["mode"] == "On" and state["blockedAttempts"] == 1
    assert state["blockedUntil"] > now  # Auto does not retry every cycle
    assert any(e[1] == "SwitchBlocked" and NO_GPU in e[2] for e in plan.events)


def test_a_blocked_rolling_update_switch_is_cancelled_to_its_old_template() -> None:
    server, kids, memo = switching_to_off("RollingUpdate")
    template = kids[("Deployment", "chat")]["spec"]["template"]["metadata"]["labels"]
    assert template["specserver.io/mode"] == "off"  # the surge pod in the new mode is pending
    now = NOW_TS + DEADLINE_S
    plan = desired(snapshot(server, kids, memo, now, scarce("chat")), SETTINGS, memo)
    kids = written(plan, kids)
    labels = kids[("Deployment", "chat")]["spec"]["template"]["metadata"]["labels"]
    assert labels["specserver.io/mode"] == "on"
    assert ledger(plan)[-1]["reason"] == "SwitchBlocked"


def test_an_image_pull_at_the_deadline_is_a_failed_switch_not_a_blocked_one() -> None:
    server, kids, memo = switching_to_off(fallback="Recreate")
    pull = Blocked(why.IMAGE_PULL, 'Back-off pulling image "sglang:nope"', "chat-off")
    plan = desired(snapshot(server, kids, memo, NOW_TS + DEADLINE_S, pull), SETTINGS, memo)
    entry = ledger(plan)[-1]
    assert entry["reason"] == "SwitchFailed" and "sglang:nope" in entry["message"]
    assert "blockedUntil" not in serialized(plan.status)["policyState"]  # no back-off
    kids = written(plan, kids, ("chat-off",))
    assert serving(kids) == ("chat-on", 1) and replicas(kids, "chat-off") == 0


def test_no_cause_known_at_the_deadline_is_a_failed_switch() -> None:
    server, kids, memo = switching_to_off(fallback="Recreate")
    plan = desired(snapshot(server, kids, memo, NOW_TS + DEADLINE_S, None), SETTINGS, memo)
    assert ledger(plan)[-1]["reason"] == "SwitchFailed"
    assert serving(written(plan, kids)) == ("chat-on", 1)


def fell_back() -> tuple[dict[str, Any], Kids, PassCache, PassPlan]:
    server, kids, memo = switching_to_off(fallback="Recreate")
    now = NOW_TS + DEADLINE_S
    plan = desired(snapshot(server, kids, memo, now, scarce()), SETTINGS, memo)
    return server, kids, memo, plan


def test_a_blocked_switch_falls_back_to_recreate_intent_first() -> None:
    _, kids, _, plan = fell_back()
    now = NOW_TS + DEADLINE_S
    # The fallback is recorded before any child changes (an operator restarted in between
    # finds it and carries it out).
    assert plan.intent is not None
    record = plan.intent["switch"]
    assert record["fallback"] == "Recreate" and record["fallbackAt"] == iso(now)
    assert record["deadline"] == iso(now + DEADLINE_S)  # a second deadline
    assert record["startedAt"] == iso(NOW_TS)
    assert plan.intent["policyState"]["switchTimes"][-1] == now  # counted in the budget
    entry = plan.intent["decisions"][-1]
    assert entry["reason"] == "SwitchFellBack" and "modelled downtime" in entry["message"]
    kids = written(plan, kids, ("chat-off",))
    # The old mode's GPUs are freed first and the Service moves at once: the downtime taken.
    assert replicas(kids, "chat-on") == 0 and replicas(kids, "chat-off") == 1
    assert serving(kids)[0] == "chat-off"


def test_a_fallback_completes_with_its_measured_downtime() -> None:
    server, kids, memo, plan = fell_back()
    server, kids = after(server, plan), written(plan, kids, ("chat-off",))
    ready_at = NOW_TS + DEADLINE_S + 95
    # The Off engine got the freed GPUs: Ready 95s after the fallback.
    kids[("Deployment", "chat-off")]["status"]["readyReplicas"] = 1
    done = desired(snapshot(server, kids, memo, ready_at, None), SETTINGS, memo)
    assert "switch" not in serialized(done.status)
    entry = ledger(done)[-1]
    assert entry["reason"] == "SwitchCompleted"
    assert "95s without a serving engine" in entry["message"]
    assert any(e[1] == "SwitchCompleted" and "95s" in e[2] for e in done.events)
    assert serving(written(done, kids)) == ("chat-off", 1)


def test_a_fallback_not_ready_by_its_deadline_rolls_back_as_failed() -> None:
    server, kids, memo, plan = fell_back()
    server, kids = after(server, plan), written(plan, kids, ("chat-off",))
    late = NOW_TS + 2 * DEADLINE_S
    plan = desired(snapshot(server, kids, memo, late, scarce()), SETTINGS, memo)
    entry = ledger(plan)[-1]
    assert entry["reason"] == "SwitchFailed" and "Recreate fallback" in entry["message"]
    assert "switch" not in serialized(plan.status)
    server = after(server, plan)
    kids = written(plan, kids, ("chat-off", "chat-on"))
    # Rolled back to On: the idle Off engine is freed first (On needs its GPUs), the Service
    # goes back to On at once.
    assert replicas(kids, "chat-off") == 0 and replicas(kids, "chat-on") == 1
    assert serving(kids)[0] == "chat-on"


def test_no_budget_left_cancels_instead_of_falling_back() -> None:
    server, kids, memo = switching_to_off(fallback="Recreate")
    state = server["status"]["policyState"]
    state["switchTimes"] = [NOW_TS - 2900, NOW_TS - 2000, NOW_TS - 1000, NOW_TS]  # 4 an hour
    plan = desired(snapshot(server, kids, memo, NOW_TS + DEADLINE_S, scarce()), SETTINGS, memo)
    assert plan.intent is not None and plan.intent["switch"] is None  # no fallback
    assert ledger(plan)[-1]["reason"] == "SwitchBlocked"
    kids = written(plan, kids, ("chat-off",))
    assert serving(kids) == ("chat-on", 1) and replicas(kids, "chat-off") == 0


def test_an_operator_restarted_mid_fallback_resumes_it() -> None:
    """The fallback intent was written, then the operator died before touching the engine: a
    fresh operator (empty caches) frees the old engine and waits for the new one; it never
    falls back twice nor counts the retry again."""
    server, kids, _, plan = fell_back()
    assert plan.intent is not None
    stored = dict(server["status"], **plan.intent)
    server = dict(server, status=stored)
    memo = PassCache()  # a new process
    later = NOW_TS + DEADLINE_S + 30
    resumed = desired(snapshot(server, kids, memo, later, scarce()), SETTINGS, memo)
    assert resumed.intent is None and ledger(resumed) == stored["decisions"]
    assert serialized(resumed.status)["switch"]["fallback"] == "Recreate"
    kids = written(resumed, kids, ("chat-off",))
    assert replicas(kids, "chat-on") == 0 and replicas(kids, "chat-off") == 1


def test_a_blocked_rolling_update_falls_back_to_no_surge() -> None:
    server, kids, memo = switching_to_off("RollingUpdate", "Recreate")
    strategy = kids[("Deployment", "chat")]["spec"]["strategy"]["rollingUpdate"]
    assert strategy == {"maxSurge": 1, "maxUnavailable": 0}  # the surge pod waits for a GPU
    now = NOW_TS + DEADLINE_S
    plan = desired(snapshot(server, kids, memo, now, scarce("chat")), SETTINGS, memo)
    assert plan.intent is not None and plan.intent["switch"]["fallback"] == "Recreate"
    kids = written(plan, kids, ("chat",))
    deployment = kids[("Deployment", "chat")]["spec"]
    # An old pod goes first, its GPU for the new one; the template stays the new mode's.
    assert deployment["strategy"]["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": 1}
    assert deployment["template"]["metadata"]["labels"]["specserver.io/mode"] == "off"


def test_a_cancel_is_recorded_first_so_a_restart_in_between_keeps_its_cause() -> None:
    """The cancel's status is written before the standby is scaled back (whose pods, and the
    cause they showed, then go): an operator killed in between finishes the cancel, without a
    second ledger entry or back-off, the Service on the old engine throughout."""
    server, kids, _ = switching_to_off()
    plan = desired(
        snapshot(server, kids, PassCache(), NOW_TS + DEADLINE_S, scarce()), SETTINGS, PassCache()
    )
    assert plan.intent is not None and plan.intent["switch"] is None
    assert plan.intent["decisions"][-1]["reason"] == "SwitchBlocked"
    stored = dict(server["status"], **plan.intent)
    stored.pop("switch")
    restarted = dict(server, status=stored)
    memo = PassCache()
    later = desired(snapshot(restarted, kids, memo, NOW_TS + DEADLINE_S + 5, None), SETTINGS, memo)
    assert later.intent is None and ledger(later) == stored["decisions"]
    kids = written(later, kids, ("chat-off",))
    assert serving(kids) == ("chat-on", 1) and replicas(kids, "chat-off") == 0
