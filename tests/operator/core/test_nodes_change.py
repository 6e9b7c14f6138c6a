"""A ``resources.nodes`` change between one node and several, with a deadline (nodeschange.py).

Observed snapshots in, PassPlan out: a SpecServer on one node (a Deployment) set to two (a
LeaderWorkerSet) whose group is never placed; the cause is what observe.py read
(``Observed.blocked``). The children are what the API server holds once each plan is written.
The old Deployment serves at every step until a Recreate fallback deletes it on purpose.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from passinputs import NOW_TS, SETTINGS, observed
from pendingpods import pending_pod

from specserver_operator.core import blocked as why
from specserver_operator.core.desired import PassPlan, desired
from specserver_operator.core.hashes import HASH_ANNOTATION
from specserver_operator.core.observed import Observed
from specserver_operator.core.passcache import PassCache
from specserver_operator.core.statusmodel import serialized
from specserver_operator.core.switching import iso, parse_time

Kids = dict[tuple[str, str], dict[str, Any]]
LWS, DEPLOY = ("LeaderWorkerSet", "chat-lws"), ("Deployment", "chat")
NO_GPU = "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."
DEADLINE_S = 300


def body(
    mode: str = "Enabled", fallback: str | None = None, strategy: str = "Recreate"
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "model": {"path": "Qwen/Qwen3-8B"},
        "draft": {"path": "Tengyunw/qwen3_8b_eagle3"},
        "speculative": {"algorithm": "EAGLE3", "numSteps": 3, "eagleTopk": 1, "numDraftTokens": 4},
        "mode": mode,
        "engine": {"memFractionStatic": 0.85},
        "resources": {"gpuType": "L4", "gpus": 2},
        "replicas": 1,
    }
    if fallback is not None:
        spec["autoSpeculation"] = {
            "switchTimeoutSeconds": DEADLINE_S,
            "blockedSwitchFallback": fallback,
            "switchStrategy": strategy,
        }
    return {
        "apiVersion": "specserver.io/v1alpha1",
        "kind": "SpecServer",
        "metadata": {"name": "chat", "namespace": "llm", "uid": "u-1", "generation": 1},
        "spec": spec,
    }


def written(plan: PassPlan, kids: Kids, not_ready: tuple[str, ...] = ()) -> Kids:
    """The children once ``plan`` was written; ``not_ready`` were not placed (no Ready pod)."""
    out = {k: v for k, v in kids.items() if k not in plan.deletions}
    assert plan.rendered is not None
    for write in plan.writes:
        obj = copy.deepcopy(plan.rendered.object(write.child))
        obj["metadata"].setdefault("annotations", {})[HASH_ANNOTATION] = write.child.digest
        obj["metadata"]["generation"] = 1
        if obj["kind"] in ("Deployment", "LeaderWorkerSet"):
            n = obj["spec"]["replicas"]
            ready = 0 if obj["metadata"]["name"] in not_ready else n
            obj["status"] = {
                "replicas": n,
                "readyReplicas": ready,
                "updatedReplicas": n,
                "observedGeneration": 1,
            }
        out[(obj["kind"], obj["metadata"]["name"])] = obj
    return out


def snapshot(
    server: dict[str, Any], kids: Kids, memo: PassCache, now: float, new: tuple[str, str] = LWS
) -> Observed:
    """What observe.py reads at ``now``: the new workload's pods are unschedulable."""
    found = dataclasses.replace(observed(server, kids, [], memo), now=iso(now), now_ts=now)
    if new not in kids:
        return found
    return dataclasses.replace(found, pods=(pending_pod(kids[new], why.UNSCHEDULABLE, NO_GPU),))


def status(plan: PassPlan) -> dict[str, Any]:
    return serialized(plan.status)


def cond(plan: PassPlan, type_: str) -> dict[str, Any]:
    return next(c for c in status(plan)["conditions"] if c["type"] == type_)


def settle(server: dict[str, Any], _kids: Kids, plan: PassPlan) -> dict[str, Any]:
    """The SpecServer once ``plan``'s status (its intent first) was written."""
    return dict(server, status=status(plan))


def to_two_nodes(
    mode: str = "Enabled", fallback: str | None = "Cancel"
) -> tuple[dict[str, Any], Kids, PassCache, PassPlan]:
    """One node serving, then ``resources.nodes: 2``: the change recorded and the new kind
    written, its group not placed."""
    memo = PassCache()
    server = body(mode, fallback)
    first = desired(snapshot(server, {}, memo, NOW_TS - 60), SETTINGS, memo)
    kids = written(first, {})
    server = settle(server, kids, first)
    server = copy.deepcopy(server)
    server["spec"]["resources"]["nodes"] = 2
    server["metadata"]["generation"] = 2
    plan = desired(snapshot(server, kids, memo, NOW_TS), SETTINGS, memo)
    return settle(server, kids, plan), written(plan, kids, ("chat-lws",)), memo, plan


def test_a_nodes_change_is_recorded_intent_first_with_its_deadline() -> None:
    _, kids, _, plan = to_two_nodes()
    assert plan.intent is not None
    record = plan.intent["switch"]
    assert record["kind"] == "NodesChange"
    assert (record["fromNodes"], record["toNodes"], record["generation"]) == (1, 2, 2)
    assert record["deadline"] == iso(NOW_TS + DEADLINE_S)
    assert LWS in kids and DEPLOY in kids  # the old Deployment keeps serving beside it
    assert cond(plan, "Ready")["status"] == "True"  # read from the serving Deployment
    assert "worker-index" not in str(kids[("Service", "chat")]["spec"]["selector"])


def test_without_autospeculation_the_defaults_give_the_deadline() -> None:
    _, _, _, plan = to_two_nodes(fallback=None)
    assert plan.intent is not None
    record = plan.intent["switch"]
    assert parse_time(record["deadline"]) > NOW_TS  # switch_deadline_s of the modelled start


def test_followed_until_its_deadline_then_cancelled_and_held() -> None:
    server, kids, memo, _ = to_two_nodes()
    before = desired(snapshot(server, kids, memo, NOW_TS + DEADLINE_S - 1), SETTINGS, memo)
    assert before.deletions == [] and status(before)["switch"].get("heldUntil") is None
    at = NOW_TS + DEADLINE_S
    plan = desired(snapshot(server, kids, memo, at), SETTINGS, memo)
    assert plan.deletions == [LWS]  # the new kind goes; the old is neither written nor deleted
    assert plan.intent is not None and plan.intent["switch"]["heldUntil"]  # recorded first
    assert all((w.child.kind, w.child.name) != DEPLOY for w in plan.writes)
    record = status(plan)["switch"]
    assert record["heldUntil"] == iso(at + DEADLINE_S) and record["attempts"] == 1
    entry = status(plan)["decisions"][-1]
    assert entry["reason"] == "SwitchBlocked" and NO_GPU in entry["message"]
    progressing = cond(plan, "Progressing")
    assert (progressing["status"], progressing["reason"]) == ("False", "SwitchBlocked")
    assert cond(plan, "Ready")["status"] == "True"
    server, kids = settle(server, kids, plan), written(plan, kids)
    assert LWS not in kids and kids[DEPLOY]["status"]["readyReplicas"] == 1
    # Held: not retried every cycle.
    held = desired(snapshot(server, kids, memo, at + 60), SETTINGS, memo)
    assert all(w.child.kind != "LeaderWorkerSet" for w in held.writes) and held.deletions == []
    assert cond(held, "Progressing")["reason"] == "SwitchBlocked"
    assert cond(held, "Ready")["status"] == "True"
    # The back-off passed: tried again, with a fresh deadline and the attempts kept.
    again = desired(snapshot(server, kids, memo, at + DEADLINE_S), SETTINGS, memo)
    assert again.intent is not None
    assert again.intent["switch"]["heldUntil"] is None  # a merge patch: the hold is removed
    assert again.intent["switch"]["attempts"] == 1
    assert any((w.child.kind, w.child.name) == LWS for w in again.writes)


def test_a_new_generation_retries_a_held_change_and_one_node_again_ends_it() -> None:
    server, kids, memo, _ = to_two_nodes()
    at = NOW_TS + DEADLINE_S
    plan = desired(snapshot(server, kids, memo, at), SETTINGS, memo)
    server, kids = settle(server, kids, plan), written(plan, kids)
    edited = copy.deepcopy(server)
    edited["metadata"]["generation"] = 3
    edited["spec"]["replicas"] = 1
    edited["spec"]["engine"]["memFractionStatic"] = 0.8
    retried = desired(snapshot(edited, kids, memo, at + 10), SETTINGS, memo)
    assert retried.intent is not None and retried.intent["switch"]["generation"] == 3
    assert any((w.child.kind, w.child.name) == LWS for w in retried.writes)
    back = copy.deepcopy(server)
    back["metadata"]["generation"] = 4
    back["spec"]["resources"]["nodes"] = 1
    ended = desired(snapshot(back, kids, memo, at + 10), SETTINGS, memo)
    assert "switch" not in status(ended) and ended.patch.get("switch", "kept") is None


def test_blocked_with_recreate_deletes_the_old_kind_first_and_measures_the_downtime() -> None:
    server, kids, memo, _ = to_two_nodes(fallback="Recreate")
    at = NOW_TS + DEADLINE_S
    plan = desired(snapshot(server, kids, memo, at), SETTINGS, memo)
    assert plan.intent is not None
    record = plan.intent["switch"]
    assert record["fallback"] == "Recreate" and record["fallbackAt"] == iso(at)
    assert record["deadline"] == iso(at + DEADLINE_S)
    assert plan.intent["decisions"][-1]["reason"] == "SwitchFellBack"
    assert "modelled downtime" in plan.intent["decisions"][-1]["message"]
    assert DEPLOY in plan.deletions and LWS not in plan.deletions
    server, kids = settle(server, kids, plan), written(plan, kids, ("chat-lws",))
    # A restarted operator (empty caches) carries on: no second fallback, the old stays gone.
    resumed = desired(snapshot(server, kids, PassCache(), at + 20), SETTINGS, PassCache())
    assert resumed.intent is None and status(resumed)["switch"]["fallback"] == "Recreate"
    kids[LWS]["status"]["readyReplicas"] = 1  # placed on the freed GPUs, Ready 120s later
    done = desired(snapshot(server, kids, memo, at + 120), SETTINGS, memo)
    assert "switch" not in status(done)
    entry = status(done)["decisions"][-1]
    assert (
        entry["reason"] == "SwitchCompleted" and "120s without a serving engine" in entry["message"]
    )
    assert any(e[1] == "SwitchCompleted" and "120s" in e[2] for e in done.events)


def test_a_recreate_fallback_not_ready_by_its_deadline_is_a_failed_switch() -> None:
    server, kids, memo, _ = to_two_nodes(fallback="Recreate")
    at = NOW_TS + DEADLINE_S
    plan = desired(snapshot(server, kids, memo, at), SETTINGS, memo)
    server, kids = settle(server, kids, plan), written(plan, kids, ("chat-lws",))
    late = desired(snapshot(server, kids, memo, at + DEADLINE_S), SETTINGS, memo)
    assert status(late)["decisions"][-1]["reason"] == "SwitchFailed"
    assert cond(late, "Progressing")["reason"] == "SwitchFailed"
    assert "switch" not in status(late)


def test_auto_holds_its_mode_while_a_nodes_change_is_under_way() -> None:
    server, kids, memo, plan = to_two_nodes(mode="Auto")
    assert plan.intent is not None and plan.intent["switch"]["kind"] == "NodesChange"
    assert plan.evaluated_at is None  # the policy did not run: one switch at a time
    later = desired(snapshot(server, kids, memo, NOW_TS + 60), SETTINGS, memo)
    assert later.evaluated_at is None and status(later)["switch"]["kind"] == "NodesChange"


def test_while_the_new_kind_starts_progressing_says_so_and_ready_reads_the_old() -> None:
    server, kids, memo, _ = to_two_nodes()
    plan = desired(snapshot(server, kids, memo, NOW_TS + 30), SETTINGS, memo)
    progressing = cond(plan, "Progressing")
    assert (progressing["status"], progressing["reason"]) == ("True", "NodesChange")
    assert "Deployment chat serves" in progressing["message"]
    assert cond(plan, "Ready")["status"] == "True"


def change(
    first: int, then: int, strategy: str, new: tuple[str, str]
) -> tuple[dict[str, Any], Kids, PassCache]:
    """``first`` nodes serving under ``strategy``, then ``then``: the change recorded."""
    memo = PassCache()
    server = copy.deepcopy(body(fallback="Cancel", strategy=strategy))
    server["spec"]["resources"]["nodes"] = first
    plan = desired(snapshot(server, {}, memo, NOW_TS - 60, new), SETTINGS, memo)
    kids = written(plan, {})
    server = copy.deepcopy(settle(server, kids, plan))
    server["spec"]["resources"]["nodes"] = then
    server["metadata"]["generation"] = 2
    plan = desired(snapshot(server, kids, memo, NOW_TS, new), SETTINGS, memo)
    assert plan.intent is not None and plan.intent["switch"]["kind"] == "NodesChange"
    return settle(server, kids, plan), written(plan, kids, (new[1],)), memo


def test_several_nodes_to_one_is_cancelled_the_same_way() -> None:
    server, kids, memo = change(2, 1, "Recreate", DEPLOY)
    assert kids[LWS]["status"]["readyReplicas"] == 1 and DEPLOY in kids
    plan = desired(snapshot(server, kids, memo, NOW_TS + DEADLINE_S, DEPLOY), SETTINGS, memo)
    assert plan.deletions == [DEPLOY]  # the new Deployment goes, the group serves on
    assert status(plan)["decisions"][-1]["reason"] == "SwitchBlocked"
    assert cond(plan, "Ready")["status"] == "True"


def test_a_bluegreen_nodes_change_keeps_the_serving_mode_and_drops_the_new_kind() -> None:
    new = ("LeaderWorkerSet", "chat-on")
    server, kids, memo = change(1, 2, "BlueGreen", new)
    assert kids[("Deployment", "chat-on")]["status"]["readyReplicas"] == 1 and new in kids
    plan = desired(snapshot(server, kids, memo, NOW_TS + DEADLINE_S, new), SETTINGS, memo)
    assert status(plan)["decisions"][-1]["reason"] == "SwitchBlocked"
    assert set(plan.deletions) == {k for k in kids if k[0] == "LeaderWorkerSet"}
    kids = written(plan, kids)
    assert kids[("Deployment", "chat-on")]["status"]["readyReplicas"] == 1
    selector = kids[("Service", "chat")]["spec"]["selector"]
    assert selector == {"specserver.io/name": "chat", "specserver.io/mode": "on"}
