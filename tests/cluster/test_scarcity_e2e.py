"""A BlueGreen switch when GPUs are scarce, end to end on the real scheduler (issue 43, Done when).

The real kube-scheduler places pods on a pool of fixed-size GPU nodes the node agent plays
(scripts/nodeagent.py ``--nodes``/``--node-gpus``, a pool of the test's own: tests/cluster/
scarcity.py), the operator runs as a process with Prometheus, and the engines are simulated at the
closed-loop tests' pace. Load forces an Auto switch from speculation on to off
(scarcity.FORCED_SWITCH); the standby engine the BlueGreen switch starts beside the old one cannot
get its GPU:

- no spare GPU (one 1-GPU node): the standby's pod is Pending with the scheduler's
  ``Unschedulable`` condition, the SpecServer says ``SwitchBlocked`` with the scheduler's own
  message within one evaluation, and at the deadline (``switchTimeoutSeconds``) the switch is
  cancelled; the old engine serves throughout (0 failed client requests, never without an
  endpoint) and the ledger has ``SwitchBlocked``;
- a ResourceQuota on ``requests.nvidia.com/gpu`` of the replica's GPUs with room on the nodes: the
  apiserver refuses the standby's pod and ``QuotaExceeded`` with its message is the cause.

Recreate fallback and a ``nodes`` change are in test_scarcity_fallback_e2e.py, back-off under a
starved cluster in test_scarcity_backoff_e2e.py (slow cases in files of their own: the cluster
tier runs ``-n 2 --dist loadfile``).
"""

from __future__ import annotations

import json
import re
import threading
import urllib.request
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
    ready_replicas,
    scarce_stacks,
    serving,
    status,
    switch_blocked,
    unschedulable,
)
from test_operator_e2e import condition, get

from stack import KubeHandle, wait_for

pytestmark = pytest.mark.cluster

#: The switch deadline: the smallest the spec allows, so the test waits the least.
DEADLINE_S = 30
STANDBY = f"{NAME}-off"
BLOCKED = "SwitchBlocked"


@pytest.fixture
def scarce(
    kube: KubeHandle, prom: Any, tmp_path: Path, namespace: str
) -> Iterator[Callable[..., Stack]]:
    yield from scarce_stacks(kube, prom, tmp_path, namespace)


def blocked_gauge(stack: Stack, namespace: str) -> dict[str, float]:
    """specserver_switch_blocked{namespace,name,reason} of this SpecServer, by reason."""
    url = f"http://127.0.0.1:{stack.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as resp:
        text = resp.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("specserver_switch_blocked{") and f'namespace="{namespace}"' in line:
            reason = re.search(r'reason="([^"]*)"', line)
            out[reason.group(1) if reason else ""] = float(line.rsplit(" ", 1)[1])
    return out


class Selectors:
    """Every value the Service's mode selector took while it ran (the old engine must keep it)."""

    def __init__(self, kube: KubeHandle, namespace: str) -> None:
        self.seen: set[str | None] = set()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(kube, namespace), daemon=True)
        self.thread.start()

    def _run(self, kube: KubeHandle, namespace: str) -> None:
        while not self.stopping.wait(0.5):
            self.seen.add(serving(kube, namespace))

    def stop(self) -> set[str | None]:
        self.stopping.set()
        self.thread.join(timeout=10)
        return self.seen


def test_a_bluegreen_switch_with_no_spare_gpu_is_blocked_then_cancelled_at_its_deadline(
    kube: KubeHandle, namespace: str, scarce: Callable[..., Stack]
) -> None:
    timer = Timer("no spare GPU")
    stack = scarce(nodes=1, gpus=1)
    apply(kube, namespace, forced_spec(switchTimeoutSeconds=DEADLINE_S))
    wait_for(lambda: stack.endpoint(namespace), 120, "the engine Ready")
    timer.mark("engine Ready")
    clients = Clients(stack, namespace)  # type: ignore[arg-type]
    selectors = Selectors(kube, namespace)
    try:
        clients.users(USERS, "chat")
        switch = wait_for(lambda: status(kube, namespace).get("switch"), 120, "a switch recorded")
        assert switch["target"] == "Off" and switch["reason"] == "TTFTSLOBreached", switch
        timer.mark("switch started")
        # The system acted: the standby Deployment was scaled up, the scheduler tried its pod.
        # The switch is recorded before the engine is touched (reconcile/apply.py), so the
        # scale-up follows the status within the same pass, not with it.
        wait_for(
            lambda: (
                (get(kube, "deployment", namespace, STANDBY) or {}).get("spec", {}).get("replicas")
                == 1
            ),
            30,
            "the standby Deployment scaled to 1",
        )
        pending = wait_for(
            lambda: unschedulable(kube, namespace, STANDBY), 60, "the standby's pod Unschedulable"
        )
        assert pending["message"].startswith("0/1 nodes are available"), pending
        assert "Insufficient nvidia.com/gpu" in pending["message"], pending
        evaluations = stack.metric("specserver_evaluation_duration_seconds_count")
        blocked = wait_for(lambda: switch_blocked(kube, namespace), 60, "SwitchBlocked=True")
        # Within one evaluation of the pod being Pending (+1: the one under way then).
        seen_after = stack.metric("specserver_evaluation_duration_seconds_count") - evaluations
        assert seen_after <= 2, seen_after
        timer.mark("SwitchBlocked")
        assert blocked["reason"] == "Unschedulable", blocked
        assert pending["message"] in blocked["message"], (pending, blocked)
        assert STANDBY in blocked["message"], blocked
        gauge = wait_for(
            lambda: blocked_gauge(stack, namespace).get("Unschedulable"), 30, "the gauge"
        )
        assert gauge == 1.0 and sum(blocked_gauge(stack, namespace).values()) == 1.0
        (warning,) = wait_for(
            lambda: events(kube, namespace, BLOCKED), 30, "the SwitchBlocked event"
        )
        assert warning["type"] == "Warning" and "Insufficient nvidia.com/gpu" in warning["message"]
        # Fixed when the switch started (the record the wait above returned): read again here,
        # a slow machine could find the switch already cancelled at its deadline.
        deadline = switch.get("deadline")
        assert deadline and parse_time(deadline) - parse_time(switch["startedAt"]) == DEADLINE_S

        # At the deadline the switch is cancelled: the ledger says why and how long it waited.
        entry = wait_for(
            lambda: next(
                (d for d in ledger(kube, namespace) if d["reason"] == "SwitchBlocked"), None
            ),
            DEADLINE_S + 60,
            "SwitchBlocked in the ledger",
        )
        timer.mark("cancelled")
        waited = parse_time(entry["time"]) - parse_time(switch["startedAt"])
        assert waited >= DEADLINE_S, entry
        assert "Insufficient nvidia.com/gpu" in entry["message"], entry
        said = re.search(r"waited (\d+)s", entry["message"])
        assert said and int(said.group(1)) >= DEADLINE_S, entry
        assert entry["mode"] == "On", entry
        wait_for(
            lambda: (get(kube, "deployment", namespace, STANDBY) or {})["spec"]["replicas"] == 0,
            30,
            "the standby scaled back to zero",
        )
        c = wait_for(
            lambda: (
                (c := condition(get(kube, "sps", namespace, NAME), "SwitchBlocked"))
                and c["status"] == "False"
                and c
            ),
            30,
            "SwitchBlocked=False",
        )
        assert c["reason"] == "NotBlocked", c
        since = parse_time(switch["startedAt"])
        assert clients.served(since) > 0
    finally:
        clients.stop()
        seen = selectors.stop()
    st = status(kube, namespace)
    assert st["speculationMode"] == "On", st
    assert ready_replicas(kube, namespace, f"{NAME}-on") == 1
    # Never without a serving engine, 0 failed client requests.
    assert seen == {"on"}, seen
    assert clients.failed == [] and clients.no_endpoint == [], (
        clients.failed[:5],
        clients.no_endpoint[:5],
    )
    print(f"{len(clients.ok)} requests served, 0 failed")
    timer.report()


def test_c_a_gpu_quota_refusal_is_the_reported_cause(
    kube: KubeHandle, namespace: str, scarce: Callable[..., Stack]
) -> None:
    timer = Timer("quota")
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "gpus"},
        # The replica's GPUs: one engine fits, the standby does not.
        "spec": {"hard": {"requests.nvidia.com/gpu": "1"}},
    }
    apply(kube, namespace, quota)
    # The apiserver admits pods against a quota only once its controller has counted it.
    wait_for(
        lambda: (get(kube, "resourcequota", namespace, "gpus") or {}).get("status", {}).get("hard"),
        60,
        "the quota counted",
    )
    stack = scarce(nodes=1, gpus=2)  # room on the node for the standby
    apply(kube, namespace, forced_spec(switchTimeoutSeconds=DEADLINE_S))
    wait_for(lambda: stack.endpoint(namespace), 120, "the engine Ready")
    timer.mark("engine Ready")
    clients = Clients(stack, namespace)  # type: ignore[arg-type]
    try:
        clients.users(USERS, "chat")
        wait_for(lambda: status(kube, namespace).get("switch"), 120, "a switch recorded")
        timer.mark("switch started")
        # The system acted: the standby's ReplicaSet tried to create its pod and was refused.
        refused = wait_for(
            lambda: next(
                (
                    c
                    for rs in json.loads(
                        kube.kubectl("get", "replicasets", "-n", namespace, "-o", "json").stdout
                    )["items"]
                    if rs["metadata"]["name"].startswith(STANDBY)
                    for c in rs.get("status", {}).get("conditions") or []
                    if c["type"] == "ReplicaFailure" and "exceeded quota" in c["message"]
                ),
                None,
            ),
            60,
            "the standby's pod refused by the quota",
        )
        assert "requests.nvidia.com/gpu" in refused["message"], refused
        assert unschedulable(kube, namespace, STANDBY) is None  # refused, not Pending
        blocked = wait_for(lambda: switch_blocked(kube, namespace), 60, "SwitchBlocked=True")
        timer.mark("SwitchBlocked")
        assert blocked["reason"] == "QuotaExceeded", blocked
        quoted = refused["message"].split("exceeded quota", 1)[1]
        assert "exceeded quota" + quoted in blocked["message"], (refused, blocked)
        assert serving(kube, namespace) == "on"
    finally:
        clients.stop()
    assert clients.failed == [] and clients.no_endpoint == [], clients.failed[:5]
    timer.report()
