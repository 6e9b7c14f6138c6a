"""The harness of the GPU-scarcity tests (issue 43): the closed-loop Stack (the operator and the
node agent as processes, against the session's apiserver, scheduler and Prometheus) with a pool
of fixed-size GPU nodes of the test's own, users through the Service counted as the demo counts
them (test_multinode_e2e's Clients), and readers of what the scheduler, the apiserver and the
operator said.

The pool is named after the test's namespace (its ``t<N>`` counter, ``--node-prefix``): the
agent deletes every other agent node at its start (scripts/nodeagent.py), so no Node an earlier
test's agent registered in the same control plane offers the scheduler a GPU, and no pod an
earlier test left bound counts against the pool.
"""

from __future__ import annotations

import calendar
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from test_closed_loop_e2e import NAME, Stack, apply, status
from test_multinode_e2e import Clients
from test_operator_e2e import condition, get

from stack import KubeHandle, events, stop_shared_operators, wait_for

__all__ = ["NAME", "Clients", "Stack", "apply", "events", "status"]

#: A switch the tests force: any measured TTFT breaches a 1 ms SLO, so the first evaluation with
#: load decides to switch speculation off (test_closed_loop_e2e's killed-mid-switch case: 4 users
#: against 2 running requests at most keep a queue the breach counts). ``minDwellSeconds`` and the
#: hourly budget never hold a retry: what holds it is the scarcity handling under test.
FORCED_SWITCH = {
    "switchStrategy": "BlueGreen",
    "ttftP99SloSeconds": 0.001,
    "disableAfterBreaches": 1,
    "minDwellSeconds": 0,
    "maxSwitchesPerHour": 60,
    "staleAfterSeconds": 20,
}
USERS, MAX_RUNNING = 4, 2


def forced_spec(**auto: Any) -> dict[str, Any]:
    """test_closed_loop_e2e's Qwen3-8B EAGLE3 SpecServer on one L4 with the forced switch."""
    from specdocs import eagle3_auto

    doc = eagle3_auto(NAME, **{**FORCED_SWITCH, **auto})
    doc["spec"]["engine"]["maxRunningRequests"] = MAX_RUNNING
    return doc


def parse_time(value: str) -> float:
    """An RFC 3339 UTC time the operator wrote (second resolution), as epoch seconds."""
    return float(calendar.timegm(time.strptime(value[:19], "%Y-%m-%dT%H:%M:%S")))


def pods(kube: KubeHandle, namespace: str) -> list[dict[str, Any]]:
    done = kube.kubectl("get", "pods", "-n", namespace, "-o", "json", check=False)
    return list(json.loads(done.stdout)["items"]) if done.returncode == 0 else []


def unschedulable(kube: KubeHandle, namespace: str, prefix: str) -> dict[str, Any] | None:
    """The scheduler's PodScheduled=False/Unschedulable condition of a Pending pod whose name
    starts with ``prefix`` (None: no such pod yet)."""
    for pod in pods(kube, namespace):
        name = pod["metadata"]["name"]
        if not name.startswith(prefix) or pod["status"].get("phase") != "Pending":
            continue
        for c in pod["status"].get("conditions") or []:
            if c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable":
                return dict(c, pod=name)
    return None


def switch_blocked(kube: KubeHandle, namespace: str) -> dict[str, Any] | None:
    """The SpecServer's SwitchBlocked condition while True."""
    c = condition(get(kube, "sps", namespace, NAME), "SwitchBlocked")
    return c if c and c["status"] == "True" else None


def ledger(kube: KubeHandle, namespace: str) -> list[dict[str, Any]]:
    return list(status(kube, namespace).get("decisions") or [])


def ready_replicas(kube: KubeHandle, namespace: str, name: str) -> int:
    return int(
        ((get(kube, "deployment", namespace, name) or {}).get("status") or {}).get("readyReplicas")
        or 0
    )


def serving(kube: KubeHandle, namespace: str) -> str | None:
    svc = get(kube, "service", namespace, NAME) or {}
    return (svc.get("spec") or {}).get("selector", {}).get("specserver.io/mode")


class Timer:
    """Each test's wall duration, printed (the brief asks for them; never asserted)."""

    def __init__(self, what: str) -> None:
        self.what, self.start = what, time.monotonic()
        self.marks: list[str] = []

    def mark(self, what: str) -> None:
        self.marks.append(f"{what} +{time.monotonic() - self.start:.0f}s")

    def report(self) -> None:
        print(f"{self.what}: {time.monotonic() - self.start:.0f}s ({'; '.join(self.marks)})")


def scarce_stacks(
    kube: KubeHandle, prom: Any, tmp_path: Path, namespace: str
) -> Iterator[Callable[..., Stack]]:
    """The body of each test file's ``scarce`` fixture. Factory: the Stack with a pool of
    ``nodes`` nodes of ``gpus`` GPUs each (named after the test's namespace), and its operator;
    stopped after the test."""
    stop_shared_operators()  # this operator is the only one
    started: list[Stack] = []

    def make(nodes: int, gpus: int) -> Stack:
        s = Stack(kube, prom, tmp_path)
        started.append(s)
        # The namespace's own counter (t<N>): a node name is a 63-byte hostname label.
        prefix = namespace.split("-", 1)[0] + "-"
        s.start_agent("--nodes", str(nodes), "--node-gpus", str(gpus), "--node-prefix", prefix)
        # Only the pool's nodes are Ready and offer GPUs (the stale ones are gone).
        wait_for(
            lambda: pool(kube) == {f"specserver-dev-node-{prefix}{i}" for i in range(nodes)},
            60,
            f"the pool of {nodes} x {gpus} GPUs alone",
        )
        s.start_operator()
        return s

    try:
        yield make
    finally:
        # What the cluster held at the end (shown with a failure).
        kinds = "deployments,leaderworkersets.leaderworkerset.x-k8s.io,pods,resourcequotas"
        print(kube.kubectl("get", kinds, "-n", namespace, "-o", "wide", check=False).stdout)
        print(json.dumps((get(kube, "sps", namespace, NAME) or {}).get("status"), indent=1))
        for s in started:
            s.stop()
            log = tmp_path / "operator.log"
            print(log.read_text()[-4000:] if log.exists() else "no operator log")
            print_engine_logs(s.state)


def print_engine_logs(state: Path) -> None:
    """The node agent's log and each engine's last lines (an engine that exited frees its GPU:
    the scheduler then places what was Pending, which a failure here must show)."""
    agent = state / "agent.log"
    print(agent.read_text()[-3000:] if agent.exists() else "no node agent log")
    for engine in sorted((state / "agent").glob("*.log")):
        print(f"--- {engine.name}")
        print("\n".join(engine.read_text(errors="replace").splitlines()[-15:]))


def pool(kube: KubeHandle) -> set[str]:
    """The Ready nodes that offer a GPU."""
    items = json.loads(kube.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    return {
        n["metadata"]["name"]
        for n in items
        if int((n.get("status") or {}).get("allocatable", {}).get("nvidia.com/gpu", "0")) > 0
        and (condition(n, "Ready") or {}).get("status") == "True"
    }
