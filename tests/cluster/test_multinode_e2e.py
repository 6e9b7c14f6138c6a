"""A multi-node Auto SpecServer switched by load on the real local stack (issue 27).

The example's shape (DeepSeek-V3 FP8 with NEXTN on 2 x 8 H100, ``resources.nodes: 2``: one
LeaderWorkerSet group of a leader and a worker) under the operator and the node agent as
processes (test_closed_loop_e2e's Stack) against the session's apiserver and Prometheus; the
agent plays the kubelets of the nodes the real scheduler binds the group's pods to, the real
LeaderWorkerSet controller (scripts/devcluster.py) makes the group's StatefulSets, and the agent
runs one simulated engine, time-scaled 10x, for the group on its leader. Closed-loop users of the
project's load generator (``loadgen.one_request``) go through the Service as the agent routes it
(its endpoints file, read again for every request, as the demo's users do) at a low load, an
overload, then the low load again, each chosen on the advisor's model (``plan --from``):

- BlueGreen: speculation goes off during the overload and on after it; no client request fails
  and the Service moves only to a group whose leader and worker are Ready, as its LWS reports;
- Recreate: the same two switches, each a restart of the whole group in place: the downtime the
  clients see is measured, printed, and at least the group's simulated start-up.

One stack serves both strategies (each in its own namespace).
"""

from __future__ import annotations

import asyncio
import calendar
import itertools
import json
import math
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from test_closed_loop_e2e import Stack
from test_operator_e2e import condition, get

from specserver_engine.loadgen import one_request
from stack import REPO, KubeHandle, events, load_script, stop_shared_operators, wait_for

pytestmark = pytest.mark.cluster

EXAMPLE = REPO / "manifests" / "examples" / "deepseek-v3-nextn-h100-2node.yaml"
NAME = "deepseek-v3-2node"
LWS_RESOURCE = "leaderworkersets.leaderworkerset.x-k8s.io"
LWS_NAME = "leaderworkerset.sigs.k8s.io/name"
#: The agent's pace (test_closed_loop_e2e's Stack): modelled seconds per wall second, and one
#: pod's modelled start-up; a group across nodes starts MULTINODE_STARTUP_FACTOR times slower.
TIME_SCALE, STARTUP_S = 10.0, 40.0
GROUP_START_WALL_S = STARTUP_S * load_script("nodeagent").MULTINODE_STARTUP_FACTOR / TIME_SCALE
#: Users: below the model's crossovers and well above them (checked against ``plan --from`` at
#: the accept length measured: the policy's crossover at the prior is 47 users since the tree's
#: per-node cost scales with the card, stop 53) and below ``maxRunningRequests`` 64, so the
#: overload is the load, not a queue. Code prompts at the low load, chat (lower acceptance) at
#: the overload, as the demo.
LOW, OVERLOAD = 4, 60
DEAD_BAND = 0.15
#: The Auto policy at test pace. disableAfterBreaches 2 is stated for one pod's restart: the
#: advisor adds the evaluations a two-node group's longer restart spans (~67 s at 5 s: +14),
#: halved under BlueGreen (docs/advisor.md, switch cost), so the overload confirms in about
#: 40 s under BlueGreen and 80 s under Recreate.
POLICY = {
    "evaluationIntervalSeconds": 5,
    "disableAfterBreaches": 2,
    "enableAfterPasses": 2,
    "minDwellSeconds": 30,
    "maxSwitchesPerHour": 10,
    "staleAfterSeconds": 20,
}
PLAN = [sys.executable, "-m", "specserver_advisor.cli.main", "plan"]
OFF_REASONS = {"LoadAboveCrossover", "TTFTSLOBreached", "QueueBuilding"}
ON_REASONS = {"LoadBelowCrossover", "OverloadEnded"}


#: The draft shape the test runs: a wide tree. The example's chain (3, 1, 4) pays at every load up
#: to its cap on 2 x 8 H100 since the per-layer decode cost of big MoE models is priced by
#: mechanism (issue 42: plan finds no crossover); a (5, 8, 32) tree verifies 32 tokens per
#: request a step, so an overload of 60 users is one the model says speculation loses at.
WIDE_TREE = {"algorithm": "NEXTN", "numSteps": 5, "eagleTopk": 8, "numDraftTokens": 32}


def spec(strategy: str) -> dict[str, Any]:
    """The shipped example with a wide tree (``WIDE_TREE``), the test's policy and
    ``strategy``."""
    doc: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    doc["spec"]["speculative"] = dict(WIDE_TREE)
    doc["spec"]["autoSpeculation"] = {**POLICY, "switchStrategy": strategy}
    return doc


def claim_weights(kube: KubeHandle, namespace: str) -> None:
    """The example's weights volume (PersistentVolumeClaim ``deepseek-v3-weights``), bound to a
    PersistentVolume made for it: the real scheduler places no pod whose claim is missing or
    unbound (the simulated engine reads nothing from it)."""
    (claim,) = {
        v["persistentVolumeClaimName"]
        for v in [yaml.safe_load(EXAMPLE.read_text())["spec"]["modelSource"]["volume"]]
    }
    volume = f"{namespace}-weights"[:63]
    size = {"storage": "1Gi"}
    docs = [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": volume},
            "spec": {
                "capacity": size,
                "accessModes": ["ReadOnlyMany"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": "",
                "hostPath": {"path": "/nonexistent/specserver-test-weights"},
                "claimRef": {"namespace": namespace, "name": claim},
            },
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim, "namespace": namespace},
            "spec": {
                "accessModes": ["ReadOnlyMany"],
                "storageClassName": "",
                "volumeName": volume,
                "resources": {"requests": size},
            },
        },
    ]
    kube.kubectl(
        "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": docs})
    )
    wait_for(
        lambda: (
            (get(kube, "pvc", namespace, claim) or {}).get("status", {}).get("phase") == "Bound"
        ),
        60,
        f"the claim {claim} bound",
    )


class MultinodeStack(Stack):
    """The closed-loop Stack, routed to this SpecServer's Service, with the demo's 20 s signal
    window (Prometheus scrapes every second; 4 evaluations a window)."""

    def env(self) -> dict[str, str]:
        return dict(super().env(), SPECSERVER_SIGNAL_WINDOW_SECONDS="20")

    def endpoint(self, namespace: str, name: str = NAME) -> str | None:
        return super().endpoint(namespace, name)


@pytest.fixture(scope="module")
def stack(kube: KubeHandle, prom: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    stop_shared_operators()  # this operator is the only one
    s = MultinodeStack(kube, prom, tmp_path_factory.mktemp("multinode"))
    s.start_agent()
    s.start_operator()
    try:
        yield s
    finally:
        s.stop()


@dataclass
class Clients:
    """Closed-loop users through the Service, in a thread: each request streams /generate with
    ``loadgen.one_request`` at the engine the Service routes to now. Counted as the demo counts:
    a request that raises (connection refused or cut, HTTP error) or streams no token failed;
    a request with no endpoint to go to is recorded too (the Service would refuse it)."""

    stack: MultinodeStack
    namespace: str
    #: (wall time of the first token, engine URL) of each request that succeeded
    ok: list[tuple[float, str]] = field(default_factory=list)
    failed: list[tuple[float, str]] = field(default_factory=list)
    no_endpoint: list[float] = field(default_factory=list)
    target: int = 0
    #: the prompt kind of the requests sent from now on (the simulator's acceptance follows it)
    kind: str = "code"
    stopping: bool = False

    def __post_init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.tasks: dict[int, asyncio.Task[None]] = {}
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.session = asyncio.run_coroutine_threadsafe(self._session(), self.loop).result()

    async def _session(self) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60))

    def users(self, n: int, kind: str) -> None:
        """Keep ``n`` users busy from now on with ``kind`` prompts (users above ``n`` finish
        their request first)."""
        self.kind = kind
        self.loop.call_soon_threadsafe(self._scale, n)

    def _scale(self, n: int) -> None:
        self.target = n
        for i in range(n):
            if i not in self.tasks or self.tasks[i].done():
                self.tasks[i] = self.loop.create_task(self._user(i))

    async def _user(self, i: int) -> None:
        while i < self.target and not self.stopping:
            url = self.stack.endpoint(self.namespace)
            if url is None:
                self.no_endpoint.append(time.time())
                await asyncio.sleep(0.5)
                continue
            start = time.time()
            try:
                result = await one_request(self.session, url, 512, 64, True, self.kind)
            except (TimeoutError, aiohttp.ClientError) as exc:
                self.failed.append((time.time(), f"{url}: {exc!r}"))
                await asyncio.sleep(0.5)
                continue
            if result.output_tokens < 1:
                self.failed.append((time.time(), f"{url}: no token"))
                continue
            self.ok.append((start + result.ttft, url))

    def stop(self) -> None:
        async def close() -> None:
            self.stopping = True
            await asyncio.gather(*self.tasks.values(), return_exceptions=True)
            await self.session.close()

        asyncio.run_coroutine_threadsafe(close(), self.loop).result(timeout=90)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()

    def served(self, since: float) -> int:
        """Requests whose first token came after ``since``."""
        return sum(1 for t, _ in list(self.ok) if t > since)

    def gap(self, start: float, end: float) -> float:
        """The longest wall time within [start, end] without a first token."""
        times = sorted(t for t, _ in self.ok if start <= t <= end)
        edges = [start, *times, end]
        return max(b - a for a, b in itertools.pairwise(edges))

    def failures(self, start: float, end: float) -> tuple[int, int]:
        """(failed requests, requests with no endpoint) within [start, end]."""
        return (
            sum(1 for t, _ in self.failed if start <= t <= end),
            sum(1 for t in self.no_endpoint if start <= t <= end),
        )


def crossovers(doc: dict[str, Any], tmp: Path, accept: float) -> tuple[float, float]:
    """The advisor's throughput crossover at ``accept`` and its policy score crossover at the
    prior, from ``specserver-advisor plan --from`` the SpecServer."""
    path = tmp / "specserver.yaml"
    path.write_text(yaml.safe_dump(doc))
    out = subprocess.run(
        [*PLAN, "--from", str(path), "--accept-length", f"{accept:.3f}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    throughput = re.search(r"throughput crossover \(out tok/s on = off\): ([\d.]+) users", out)
    policy = re.search(r"policy score crossover .*?: ([\d.]+) users", out)
    assert throughput and policy, out
    return float(throughput.group(1)), float(policy.group(1))


def sps_status(kube: KubeHandle, namespace: str) -> dict[str, Any]:
    return dict((get(kube, "sps", namespace, NAME) or {}).get("status") or {})


def settled(kube: KubeHandle, namespace: str, mode: str) -> bool:
    """Speculation ``mode`` (On/Off) running and no switch under way."""
    st = sps_status(kube, namespace)
    return st.get("speculationMode") == mode and not st.get("switch")


def metrics_flowing(kube: KubeHandle, namespace: str) -> bool:
    c = condition(get(kube, "sps", namespace, NAME), "MetricsAvailable")
    return bool(c and c["status"] == "True" and sps_status(kube, namespace).get("lastMetrics"))


def timeline(kube: KubeHandle, namespace: str, times: dict[str, float]) -> str:
    """When each decision came after its phase began, and how long each switch took (the
    SwitchCompleted events say)."""
    decided = [
        calendar.timegm(time.strptime(d["time"], "%Y-%m-%dT%H:%M:%SZ"))
        for d in sps_status(kube, namespace)["decisions"]
    ]
    done = events(kube, namespace, "SwitchCompleted")
    took = [e["message"] for e in sorted(done, key=lambda e: e["lastTimestamp"])]
    return (
        f"off decided {decided[0] - times['overload']:.0f}s into the overload, on "
        f"{decided[1] - times['low']:.0f}s after the load fell; {'; '.join(took)}"
    )


def switches_completed(kube: KubeHandle, namespace: str) -> list[dict[str, Any]]:
    """The SwitchCompleted events, once both switches posted theirs ([] before): the pass that
    ends a switch posts its event after the status patch that clears ``status.switch``
    (loop/cycle.py's _report), so the second event follows ``settled``, not with it."""
    done = events(kube, namespace, "SwitchCompleted")
    return done if len(done) >= 2 else []


def ledger(kube: KubeHandle, namespace: str) -> list[tuple[str, str, str]]:
    return [(d["action"], d["reason"], d["mode"]) for d in sps_status(kube, namespace)["decisions"]]


@dataclass
class Move:
    """The Service's selector seen moving to ``mode``, and the group it then selected."""

    mode: str
    at: float
    #: pod name -> Ready, for the pods of the LeaderWorkerSet ``<name>-<mode>``
    pods: dict[str, bool]
    lws_ready: int | None


def watch_moves(kube: KubeHandle, namespace: str, stop: threading.Event, moves: list[Move]) -> None:
    """Poll the Service, the pods and the LeaderWorkerSets (one read); where the Service's
    selector changes, note the group it now selects: its pods' readiness and its LWS's
    readyReplicas, as the apiserver held them at that read."""
    last = None
    while not stop.is_set():
        done = kube.kubectl(
            "get", f"service,pods,{LWS_RESOURCE}", "-n", namespace, "-o", "json", check=False
        )
        items = json.loads(done.stdout)["items"] if done.returncode == 0 else []
        by_kind: dict[str, list[dict[str, Any]]] = {}
        for item in items:
            by_kind.setdefault(item["kind"], []).append(item)
        svc = [s for s in by_kind.get("Service", []) if s["metadata"]["name"] == NAME]
        mode = svc[0]["spec"].get("selector", {}).get("specserver.io/mode") if svc else None
        if mode is not None and mode != last:
            lws = f"{NAME}-{mode}"
            ready = {
                p["metadata"]["name"]: not p["metadata"].get("deletionTimestamp")
                and (condition(p, "Ready") or {}).get("status") == "True"
                for p in by_kind.get("Pod", [])
                if p["metadata"].get("labels", {}).get(LWS_NAME) == lws
            }
            group = [g for g in by_kind.get("LeaderWorkerSet", []) if g["metadata"]["name"] == lws]
            status = (group[0].get("status") or {}) if group else {}
            moves.append(Move(mode, time.time(), ready, status.get("readyReplicas")))
            last = mode
        stop.wait(0.5)


def drive(
    kube: KubeHandle, namespace: str, clients: Clients, tmp: Path, doc: dict[str, Any]
) -> dict[str, float]:
    """Low, overload until speculation is off, low until it is on again: the phase times."""
    clients.users(LOW, "code")
    wait_for(lambda: metrics_flowing(kube, namespace), 90, "MetricsAvailable with readings")
    clients.stack.wait_evaluations(3)  # a few evaluations of the low load with speculation on
    accept = sps_status(kube, namespace)["lastMetrics"]["acceptLength"]
    throughput, policy = crossovers(doc, tmp, accept)
    print(
        f"\n{namespace}: accept {accept:.2f}; crossover {throughput} users (throughput), "
        f"{policy} (policy score, prior); loads {LOW} -> {OVERLOAD} -> {LOW}"
    )
    assert max(throughput, policy) * (1 + DEAD_BAND) < OVERLOAD, (throughput, policy)
    assert min(throughput, policy) * (1 - DEAD_BAND) > LOW, (throughput, policy)
    assert settled(kube, namespace, "On") and not sps_status(kube, namespace).get("decisions")
    times = {"overload": time.time()}
    clients.users(OVERLOAD, "chat")
    wait_for(lambda: settled(kube, namespace, "Off"), 240, "speculation switched off")
    times["off"] = time.time()
    # The overload served with speculation off: a request of each user after the switch.
    wait_for(lambda: clients.served(times["off"]) >= OVERLOAD, 120, "the overload served, off")
    times["low"] = time.time()
    clients.users(LOW, "code")
    wait_for(lambda: settled(kube, namespace, "On"), 240, "speculation switched on again")
    times["on"] = time.time()
    wait_for(lambda: clients.served(times["on"]) >= 2 * LOW, 120, "the low load served, on")
    times["end"] = time.time()
    return times


def launch_speculates(kube: KubeHandle, namespace: str, lws: str) -> bool:
    obj = get(kube, LWS_RESOURCE, namespace, lws) or {}
    group = obj["spec"]["leaderWorkerTemplate"]
    args = [group[t]["spec"]["containers"][0]["args"] for t in ("leaderTemplate", "workerTemplate")]
    assert args[0] == args[1]
    return "--speculative-algorithm" in args[0]


def test_bluegreen_switches_a_two_node_group_off_and_on_with_no_failed_request(
    kube: KubeHandle, namespace: str, stack: MultinodeStack, tmp_path: Path
) -> None:
    started = time.monotonic()
    doc = spec("BlueGreen")
    claim_weights(kube, namespace)
    kube.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(doc))
    first = wait_for(lambda: stack.endpoint(namespace), 120, "the On group's leader serving")
    moves: list[Move] = []
    stop = threading.Event()
    watcher = threading.Thread(target=watch_moves, args=(kube, namespace, stop, moves), daemon=True)
    watcher.start()
    clients = Clients(stack, namespace)
    try:
        times = drive(kube, namespace, clients, tmp_path, doc)
    finally:
        clients.stop()
        stop.set()
        watcher.join(timeout=10)

    # It acted: off for the overload, on after it, each traffic move to the other LWS.
    decisions = ledger(kube, namespace)
    assert [(a, m) for a, _, m in decisions] == [("disable", "Off"), ("enable", "On")], decisions
    assert decisions[0][1] in OFF_REASONS and decisions[1][1] in ON_REASONS, decisions
    assert [m.mode for m in moves] == ["on", "off", "on"], moves
    assert not launch_speculates(kube, namespace, f"{NAME}-off")
    assert launch_speculates(kube, namespace, f"{NAME}-on")
    urls = {u for t, u in clients.ok if times["overload"] <= t <= times["low"]}
    assert len(urls) == 2 and first in urls, urls  # served by the On leader, then the Off one
    # Each move went to a whole Ready group: its leader and its worker, as its LWS reported.
    for move in moves[1:]:
        lws = f"{NAME}-{move.mode}"
        assert move.pods == {f"{lws}-0": True, f"{lws}-0-1": True}, move
        assert move.lws_ready == 1, move
    failed, no_endpoint = clients.failures(times["overload"], times["end"])
    gap = clients.gap(times["overload"], times["end"])
    print(
        f"BlueGreen: {len(clients.ok)} requests served, {failed} failed, {no_endpoint} without "
        f"an endpoint; longest wait for a first token {gap:.2f}s wall; decisions {decisions}; "
        f"{timeline(kube, namespace, times)}; {time.monotonic() - started:.0f}s"
    )
    assert failed == 0 and no_endpoint == 0, clients.failed[:5]
    assert gap < GROUP_START_WALL_S  # never a restart's worth of nothing served
    completed = wait_for(lambda: switches_completed(kube, namespace), 30, "two SwitchCompleted")
    assert len(completed) == 2, [e["message"] for e in completed]


def test_recreate_restarts_the_two_node_group_and_the_clients_see_the_downtime(
    kube: KubeHandle, namespace: str, stack: MultinodeStack, tmp_path: Path
) -> None:
    started = time.monotonic()
    doc = spec("Recreate")
    claim_weights(kube, namespace)
    kube.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(doc))
    wait_for(lambda: stack.endpoint(namespace), 120, "the group's leader serving")
    assert launch_speculates(kube, namespace, f"{NAME}-lws")
    clients = Clients(stack, namespace)
    try:
        times = drive(kube, namespace, clients, tmp_path, doc)
    finally:
        clients.stop()

    decisions = ledger(kube, namespace)
    assert [(a, m) for a, _, m in decisions] == [("disable", "Off"), ("enable", "On")], decisions
    assert decisions[0][1] in OFF_REASONS and decisions[1][1] in ON_REASONS, decisions
    assert launch_speculates(kube, namespace, f"{NAME}-lws")  # one LWS, rolled in place
    assert get(kube, LWS_RESOURCE, namespace, f"{NAME}-off") is None
    baseline = clients.gap(times["overload"] - 15, times["overload"])
    report = []
    for switch, (start, end) in {
        "off": (times["overload"], times["low"]),
        "on": (times["low"], times["end"]),
    }.items():
        gap = clients.gap(start, end)
        failed, no_endpoint = clients.failures(start, end)
        report.append(
            f"switch {switch}: {gap:.1f}s wall without a first token, {failed} requests "
            f"failed, {no_endpoint} found no endpoint"
        )
        # The clients saw the restart: nothing served for at least the group's start-up, and
        # served again after it (finite: the phase ended with requests succeeding).
        assert math.isfinite(gap) and gap > 0
        assert gap >= GROUP_START_WALL_S > baseline, (gap, baseline)
        assert failed + no_endpoint > 0
        assert any(t > start + gap for t, _ in clients.ok if t <= end)
    print(
        f"\nRecreate downtime: {'; '.join(report)}; decisions {decisions}; "
        f"{timeline(kube, namespace, times)}; {time.monotonic() - started:.0f}s"
    )
    st = sps_status(kube, namespace)
    assert st["speculationMode"] == "On" and not st.get("switch")
    completed = wait_for(lambda: switches_completed(kube, namespace), 30, "two SwitchCompleted")
    assert len(completed) == 2, [e["message"] for e in completed]
