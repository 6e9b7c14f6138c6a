"""The closed loop on the real stack: apiserver + controller-manager, Prometheus, the node agent
running simulated engines, and the operator as a process (killed and restarted on purpose).

Covers what the demo does not: steady load never switches; Prometheus stopped means
``MetricsStale``/``MetricsAvailable=False`` and no switch; ``mode: Disabled`` set by hand during
Auto is honoured at once; an operator killed in the middle of a
BlueGreen switch completes exactly that one switch after restart, and the Service moves only
when the operator sees the standby Ready.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from specdocs import eagle3_auto
from test_operator_e2e import condition, get

from specserver_engine.loadgen import Segment, run_segment
from specserver_engine.ports import free_loopback_port
from stack import REPO, KubeHandle, counted, events, scrape, stop_shared_operators, wait_for

pytestmark = pytest.mark.cluster

NAME = "qwen3-8b"


def spec(**auto: Any) -> dict[str, Any]:
    return eagle3_auto(NAME, staleAfterSeconds=20, switchStrategy="BlueGreen", **auto)


class Stack:
    """The operator and the node agent as processes, against the session's apiserver and
    Prometheus."""

    def __init__(self, kube: KubeHandle, prom: Any, state: Path) -> None:
        self.kube, self.prom, self.state = kube, prom, state
        self.operator: subprocess.Popen[bytes] | None = None
        self.agent: subprocess.Popen[bytes] | None = None
        #: The operator's own metrics, scraped by the session's Prometheus (honorLabels, as the
        #: PodMonitor): the same port across restarts.
        self.metrics_port = free_loopback_port()

    def env(self) -> dict[str, str]:
        return dict(
            os.environ,
            KUBECONFIG=str(self.kube.kubeconfig),
            PYTHONWARNINGS="ignore",
            PYTHONUNBUFFERED="1",
            SPECSERVER_PROMETHEUS_URL=self.prom.url,
            SPECSERVER_CYCLE_SECONDS="2",
            SPECSERVER_QUERY_INTERVAL_SECONDS="2",
            SPECSERVER_METRICS_PORT=str(self.metrics_port),
            SPECSERVER_METRICS_ADDRESS="127.0.0.1",
        )

    def start_operator(self) -> None:
        port = free_loopback_port()
        log = open(self.state / "operator.log", "ab")  # noqa: SIM115
        self.operator = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "specserver_operator.main",
                "--liveness",
                f"http://127.0.0.1:{port}/healthz",
            ],
            env=self.env(),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        self.prom.write_operator_targets([f"127.0.0.1:{self.metrics_port}"])

    def kill_operator(self) -> None:
        """SIGKILL: no cleanup, as a crashed or evicted operator."""
        assert self.operator is not None
        self.operator.kill()
        self.operator.wait()
        self.operator = None

    def start_agent(self, *options: str) -> None:
        """The node agent (its default pool unless ``options`` say otherwise: scripts/nodeagent.py's
        ``--nodes``, ``--node-gpus``, ``--node-prefix``, ...)."""
        log = open(self.state / "agent.log", "ab")  # noqa: SIM115
        self.agent = subprocess.Popen(
            [
                sys.executable,
                str(REPO / "scripts" / "nodeagent.py"),
                "--kubeconfig",
                str(self.kube.kubeconfig),
                "--state-dir",
                str(self.state / "agent"),
                "--targets-file",
                str(self.prom.targets_file),
                "--time-scale",
                "10",
                "--startup-seconds",
                "40",
                *options,
            ],
            env=self.env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()

    def endpoint(self, namespace: str, name: str = NAME) -> str | None:
        """The first Ready endpoint of the Service ``name`` the node agent routes to."""
        try:
            data = json.loads((self.state / "agent" / "endpoints.json").read_text())
        except (OSError, ValueError):
            return None
        return (data.get(f"{namespace}/{name}") or [None])[0]

    def metric(self, name: str) -> float:
        """One sample of the operator's own /metrics (0 when it has none yet)."""
        return scrape(f"http://127.0.0.1:{self.metrics_port}/metrics", name)

    def wait_evaluations(self, count: int, timeout: float = 120) -> float:
        """Until ``count`` whole policy evaluations began and ended after this call (one
        SpecServer: its evaluations)."""
        return counted(
            lambda: self.metric("specserver_evaluation_duration_seconds_count"),
            count,
            timeout,
            "policy evaluations",
        )

    def stop(self) -> None:
        if self.operator is not None:
            self.operator.terminate()
            self.operator.wait(timeout=30)
        if self.agent is not None:
            self.agent.terminate()  # the agent stops its engines on SIGTERM
            self.agent.wait(timeout=60)
        self.prom.write_targets([])
        self.prom.write_operator_targets([])


@pytest.fixture
def stack(kube: KubeHandle, prom: Any, tmp_path: Path) -> Iterator[Stack]:
    stop_shared_operators()  # this operator is the only one
    s = Stack(kube, prom, tmp_path)
    s.start_agent()
    s.start_operator()
    try:
        yield s
    finally:
        s.stop()


def load(url: str, users: int, seconds: float) -> threading.Thread:
    """Closed-loop users against one engine, in the background."""

    def run() -> None:
        asyncio.run(run_segment(url, Segment(users, seconds, None, "chat"), 512, 64, True))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def apply(kube: KubeHandle, namespace: str, doc: dict[str, Any]) -> None:
    kube.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(doc))


def status(kube: KubeHandle, namespace: str) -> dict[str, Any]:
    return dict((get(kube, "sps", namespace, NAME) or {}).get("status") or {})


def serving(kube: KubeHandle, namespace: str) -> str | None:
    svc = get(kube, "service", namespace, NAME) or {}
    return (svc.get("spec") or {}).get("selector", {}).get("specserver.io/mode")


def dashboard_queries(namespace: str) -> dict[str, str]:
    """Each panel's PromQL with the dashboard's variables filled in for this namespace."""
    dash = json.loads((REPO / "manifests" / "grafana" / "specserver-dashboard.json").read_text())
    out = {}
    for panel in dash["panels"]:
        for target in panel["targets"]:
            expr = target["expr"].replace("$__rate_interval", "1m")
            expr = expr.replace("$namespace", namespace).replace("$specserver", ".*")
            out[f"{panel['title']} {target['refId']}"] = expr
    return out


def query(prom: Any, expr: str) -> list[Any]:
    url = f"{prom.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as resp:
        return list(json.loads(resp.read())["data"]["result"])


def test_steady_load_holds_prometheus_stopped_is_stale_and_manual_off_is_immediate(
    kube: KubeHandle, namespace: str, stack: Stack, prom: Any
) -> None:
    apply(kube, namespace, spec(minDwellSeconds=0))
    url = wait_for(lambda: stack.endpoint(namespace), 120, "the engine Ready")
    worker = load(url, 3, 45)
    wait_for(
        lambda: (
            (c := condition(get(kube, "sps", namespace, NAME), "MetricsAvailable"))
            and c["status"] == "True"
        ),
        60,
        "MetricsAvailable=True",
    )
    # Every dashboard panel has data in this Prometheus (the operator's series through its
    # metrics port, honorLabels; the engines' through the agent), except the decisions panel:
    # steady load makes no enable/disable decision.
    panels = {k: v for k, v in dashboard_queries(namespace).items() if "Decisions" not in k}
    wait_for(
        lambda: all(query(prom, expr) for expr in panels.values()),
        60,
        f"series for every dashboard panel ({', '.join(panels)})",
    )
    mode = query(prom, f'specserver_speculation_mode{{namespace="{namespace}"}}')
    assert [float(m["value"][1]) for m in mode] == [1.0]
    worker.join(timeout=90)
    st = status(kube, namespace)
    assert not st.get("decisions"), st.get("decisions")
    assert st["speculationMode"] == "On" and not st.get("switch")
    assert st["lastMetrics"]["acceptLength"] > 1.5

    prom.down()
    try:
        c = wait_for(
            lambda: (
                (c := condition(get(kube, "sps", namespace, NAME), "MetricsAvailable"))
                and c["status"] == "False"
                and c
            ),
            60,
            "MetricsAvailable=False",
        )
        assert c["reason"] == "PrometheusUnavailable" and prom.url.split("//")[1] in c["message"]
        wait_for(
            lambda: status(kube, namespace).get("lastDecisionReason") == "MetricsStale",
            30,
            "MetricsStale",
        )
        stack.wait_evaluations(2)  # two more evaluations without metrics
        st = status(kube, namespace)
        assert not st.get("decisions") and st["speculationMode"] == "On"
        assert serving(kube, namespace) == "on"
    finally:
        prom.up()

    # mode: Disabled by hand during Auto is honoured at once (no policy decision, no ledger entry).
    doc = spec(minDwellSeconds=0)
    doc["spec"]["mode"] = "Disabled"
    cycles = stack.metric("specserver_cycles_total")
    apply(kube, namespace, doc)
    wait_for(
        lambda: (get(kube, "deployment", namespace, f"{NAME}-off") or {})["spec"]["replicas"] == 1,
        60,
        "the Off engine started",
    )
    # At once: within the cycle under way, the next, and one for the poll that saw it, however
    # busy the machine (a policy switch waits for breaches over several evaluations).
    assert stack.metric("specserver_cycles_total") - cycles <= 3
    # A backstop only: the Off pod is scheduled, started and made Ready beside the On one (over
    # 90 s once on a loaded machine with the real scheduler).
    wait_for(lambda: serving(kube, namespace) == "off", 180, "the Service on the Off engine")
    # The status says what serves once the Service moved: the pass that moves it patches the
    # status after its children (reconcile/apply.py), so it follows the selector, not with it.
    st = wait_for(
        lambda: (s := status(kube, namespace)).get("speculationMode") == "Off" and s,
        30,
        "status.speculationMode Off",
    )
    assert not st.get("decisions"), st.get("decisions")


def test_operator_killed_mid_switch_completes_exactly_one_switch(
    kube: KubeHandle, namespace: str, stack: Stack, prom: Any
) -> None:
    # Any measured TTFT breaches a 1 ms SLO: the first evaluation with load switches off. The
    # breach counts while requests queue, so 4 users meet 2 running at most: the engine's
    # queue gauge (set at its prefill reports, as SGLang's) then shows the ones left waiting.
    doc = spec(ttftP99SloSeconds=0.001, disableAfterBreaches=1, minDwellSeconds=3600)
    doc["spec"]["engine"]["maxRunningRequests"] = 2
    apply(kube, namespace, doc)
    url = wait_for(lambda: stack.endpoint(namespace), 120, "the engine Ready")
    worker = load(url, 4, 120)
    switch = wait_for(lambda: status(kube, namespace).get("switch"), 180, "a switch recorded")
    # The dashboard's decisions panel has the decision (scraped from the operator's metrics).
    (decisions,) = [v for k, v in dashboard_queries(namespace).items() if "Decisions" in k]
    found = wait_for(lambda: query(prom, decisions), 15, "the decision in the dashboard panel")
    assert found[0]["metric"]["reason"] == "TTFTSLOBreached"
    stack.kill_operator()
    assert switch["target"] == "Off" and switch["reason"] == "TTFTSLOBreached"
    # The standby starts without the operator; traffic stays where it was.
    wait_for(
        lambda: (
            (d := get(kube, "deployment", namespace, f"{NAME}-off"))
            and (d.get("status") or {}).get("readyReplicas") == 1
        ),
        120,
        "the standby Ready",
    )
    assert serving(kube, namespace) == "on"
    stack.start_operator()
    wait_for(lambda: serving(kube, namespace) == "off", 180, "the Service on the standby")
    wait_for(lambda: not status(kube, namespace).get("switch"), 60, "the switch completed")
    wait_for(
        lambda: (get(kube, "deployment", namespace, f"{NAME}-on") or {})["spec"]["replicas"] == 0,
        30,
        "the old engine scaled to zero",
    )
    worker.join(timeout=1)
    st = status(kube, namespace)
    assert [(d["action"], d["reason"]) for d in st["decisions"]] == [("disable", "TTFTSLOBreached")]
    assert st["speculationMode"] == "Off"
    # The pass that ends the switch posts its event after its status patch (loop/cycle.py's
    # _report), so the event follows the cleared status.switch, not with it.
    completed = wait_for(
        lambda: events(kube, namespace, "SwitchCompleted"), 30, "the SwitchCompleted event"
    )
    assert len(completed) == 1
