"""A blocked switch that falls back to Recreate, and a ``resources.nodes`` change that cannot be
placed, end to end on the real scheduler (issue 43, Done when; the harness: scarcity.py).

- ``blockedSwitchFallback: Recreate`` with no spare GPU: at the deadline the BlueGreen switch is
  retried freeing the old engine's GPU first; the clients see the downtime (the longest wall time
  without a first token), the operator reports the one it measured (``fallbackAt`` to Ready, in
  the ``SwitchCompleted`` event and the ledger), and the two agree within what separates them
  (the operator's cycle, the agent's step);
- ``resources.nodes`` 1 -> 2 on a pool with no room for the group: the LeaderWorkerSet's pods are
  Pending with the scheduler's condition, the change is reported blocked and cancelled at the
  deadline, the old Deployment serving throughout with 0 failed client requests.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from scarcity import (
    NAME,
    USERS,
    Clients,
    Stack,
    Timer,
    apply,
    events,
    forced_spec,
    ledger,
    parse_time,
    pods,
    ready_replicas,
    scarce_stacks,
    serving,
    status,
    switch_blocked,
    unschedulable,
)
from specdocs import eagle3_auto
from test_operator_e2e import get

from stack import KubeHandle, wait_for

pytestmark = pytest.mark.cluster

DEADLINE_S = 30
STANDBY = f"{NAME}-off"
#: The LeaderWorkerSet a ``nodes: 2`` SpecServer runs on (its pods: <lws>-0, <lws>-0-1).
GROUP = f"{NAME}-lws"
#: What separates the clients' downtime from the operator's: the old engine leaves the endpoints
#: up to one operator cycle (2 s) after ``fallbackAt`` is written; the operator sees the new one
#: Ready up to one cycle after the agent (its 1 s step) routes to it; second-resolution times.
CYCLE_S, AGENT_STEP_S = 2.0, 1.0
AGREE_S = 2 * CYCLE_S + AGENT_STEP_S + 1.0
#: The agent's pace (test_closed_loop_e2e's Stack): modelled start-up / time scale, in wall
#: seconds: no downtime of a restart can be shorter.
STARTUP_WALL_S = 40 / 10


@pytest.fixture
def scarce(
    kube: KubeHandle, prom: Any, tmp_path: Path, namespace: str
) -> Iterator[Callable[..., Stack]]:
    yield from scarce_stacks(kube, prom, tmp_path, namespace)


def test_b_a_blocked_switch_falls_back_to_recreate_and_its_downtime_is_measured(
    kube: KubeHandle, namespace: str, scarce: Callable[..., Stack]
) -> None:
    timer = Timer("Recreate fallback")
    stack = scarce(nodes=1, gpus=1)
    doc = forced_spec(switchTimeoutSeconds=DEADLINE_S, blockedSwitchFallback="Recreate")
    apply(kube, namespace, doc)
    wait_for(lambda: stack.endpoint(namespace), 120, "the engine Ready")
    timer.mark("engine Ready")
    clients = Clients(stack, namespace)  # type: ignore[arg-type]
    try:
        clients.users(USERS, "chat")
        switch = wait_for(lambda: status(kube, namespace).get("switch"), 120, "a switch recorded")
        timer.mark("switch started")
        # The system acted: the standby's pod is Pending with the scheduler's condition.
        pending = wait_for(
            lambda: unschedulable(kube, namespace, STANDBY), 60, "the standby's pod Unschedulable"
        )
        assert "Insufficient nvidia.com/gpu" in pending["message"], pending
        blocked = wait_for(lambda: switch_blocked(kube, namespace), 60, "SwitchBlocked=True")
        assert blocked["reason"] == "Unschedulable", blocked
        # At the deadline: retried as Recreate, with the modelled downtime in the ledger.
        fell = wait_for(
            lambda: (s := status(kube, namespace).get("switch")) and s.get("fallback") and s,
            DEADLINE_S + 60,
            "the switch fallen back to Recreate",
        )
        timer.mark("fell back")
        assert fell["fallback"] == "Recreate" and fell["startedAt"] == switch["startedAt"], fell
        assert parse_time(fell["fallbackAt"]) - parse_time(switch["startedAt"]) >= DEADLINE_S
        entry = next(d for d in ledger(kube, namespace) if d["reason"] == "SwitchFellBack")
        assert "Unschedulable" in entry["message"] and "modelled downtime" in entry["message"]
        wait_for(lambda: not status(kube, namespace).get("switch"), 120, "the switch completed")
        timer.mark("completed")
        # The clients' first tokens come from the new engine again.
        done = time.time()
        wait_for(lambda: clients.served(done) > 0, 60, "a request served after the switch")
        end = time.time()
    finally:
        clients.stop()
    st = status(kube, namespace)
    assert st["speculationMode"] == "Off", st
    assert serving(kube, namespace) == "off"
    assert ready_replicas(kube, namespace, STANDBY) == 1
    # The operator's measured downtime, in its event and its ledger. The event is posted after
    # the status patch that ended the switch (loop/cycle.py's _report): it follows that status.
    (completed,) = wait_for(
        lambda: events(kube, namespace, "SwitchCompleted"), 30, "the SwitchCompleted event"
    )
    found = re.search(r"(\d+)s without a serving engine \(measured\)", completed["message"])
    assert found, completed["message"]
    reported = float(found.group(1))
    assert any(d["message"] == completed["message"] for d in ledger(kube, namespace))
    # The clients' downtime: the longest wall time with no first token around the fallback.
    start = parse_time(fell["fallbackAt"]) - CYCLE_S
    measured = clients.gap(start, end)
    print(f"downtime: clients saw {measured:.1f}s, the operator reported {reported:.0f}s")
    assert measured >= STARTUP_WALL_S, measured
    assert abs(measured - reported) <= AGREE_S, (measured, reported)
    # Requests in flight on the old engine drain (the agent's DRAIN_S); any that fails, and every
    # request that found no endpoint, does so within the downtime, never before or after it.
    window = (start, start + measured + AGREE_S)
    outside = [f for f in clients.failed if not window[0] <= f[0] <= window[1]]
    outside += [t for t in clients.no_endpoint if not window[0] <= t <= window[1]]
    assert outside == [], (window, outside[:5])
    print(f"{len(clients.failed)} failed, {len(clients.no_endpoint)} without an endpoint")
    timer.report()


def test_d_a_nodes_change_that_cannot_be_placed_is_cancelled_at_its_deadline(
    kube: KubeHandle, namespace: str, scarce: Callable[..., Stack]
) -> None:
    timer = Timer("nodes change")
    stack = scarce(nodes=1, gpus=2)  # the replica's two GPUs on one node; no room for a group
    doc = eagle3_auto(NAME, minDwellSeconds=3600, switchTimeoutSeconds=DEADLINE_S)
    doc["spec"]["resources"]["gpus"] = 2
    apply(kube, namespace, doc)
    wait_for(lambda: stack.endpoint(namespace), 120, "the engine Ready")
    timer.mark("engine Ready")
    clients = Clients(stack, namespace)  # type: ignore[arg-type]
    try:
        clients.users(1, "code")  # low load: Auto keeps speculation on
        two = eagle3_auto(NAME, minDwellSeconds=3600, switchTimeoutSeconds=DEADLINE_S)
        two["spec"]["resources"].update(gpus=2, nodes=2)
        apply(kube, namespace, two)
        switch = wait_for(
            lambda: (s := status(kube, namespace).get("switch")) and s.get("kind") and s,
            60,
            "the nodes change recorded",
        )
        assert switch["kind"] == "NodesChange", switch
        timer.mark("change started")
        # The system acted: the group's pods exist and the scheduler cannot place them.
        pending = wait_for(
            lambda: unschedulable(kube, namespace, GROUP), 60, "the group's pods Unschedulable"
        )
        assert get(kube, "deployment", namespace, NAME), "the old Deployment kept"
        assert "Insufficient nvidia.com/gpu" in pending["message"], pending
        blocked = wait_for(lambda: switch_blocked(kube, namespace), 60, "SwitchBlocked=True")
        assert blocked["reason"] == "Unschedulable", blocked
        assert pending["message"] in blocked["message"], (pending, blocked)
        entry = wait_for(
            lambda: next(
                (d for d in ledger(kube, namespace) if d["reason"] == "SwitchBlocked"), None
            ),
            DEADLINE_S + 60,
            "SwitchBlocked in the ledger",
        )
        timer.mark("cancelled")
        assert parse_time(entry["time"]) - parse_time(switch["startedAt"]) >= DEADLINE_S
        assert "Insufficient nvidia.com/gpu" in entry["message"], entry
        wait_for(
            lambda: (
                not [
                    p
                    for p in pods(kube, namespace)
                    if "leaderworkerset.sigs.k8s.io/name" in p["metadata"].get("labels", {})
                ]
            ),
            60,
            "the group's pods gone",
        )
        # The old Deployment serves on, and keeps serving.
        stack.wait_evaluations(2)
        since = time.time()
        wait_for(lambda: clients.served(since) > 0, 60, "a request served after the cancel")
    finally:
        clients.stop()
    assert (
        ready_replicas(kube, namespace, f"{NAME}-on") == 1
        or ready_replicas(kube, namespace, NAME) == 1
    )
    assert get(kube, "sps", namespace, NAME)
    assert clients.failed == [] and clients.no_endpoint == [], clients.failed[:5]
    timer.report()
