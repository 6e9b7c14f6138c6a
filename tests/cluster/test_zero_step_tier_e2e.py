"""SGLang's zero-step adaptive tier on the real stack: the engine acted, and Auto says so.

The operator as a process, the real apiserver, a real Prometheus scraping a simulated SGLang
engine launched as the SpecServer's On engine renders it (``--speculative-adaptive``, cap 96,
H100). Ninety users (output lengths drawn, so they do not finish in waves) keep the running
batch at 61 or more, SGLang's 64 tier once padded to its CUDA graph, whose only candidate is 0
draft steps: the engine reports ``sglang:spec_num_steps`` 0 and an accept length of 1.0. The
load is far above the model's crossover (about 40 at the draft's typical acceptance), so an Auto
that scored those readings as speculation's would unload the draft (``LoadAboveCrossover`` at an
accept length of 1.0); instead the status says SGLang ran zero steps (``EngineZeroSteps``) and
every decision in that band keeps, with ``EngineRanZeroSteps``.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from typing import Any

import pytest
from specdocs import eagle3_auto
from test_operator_e2e import apply, condition, get

from specserver_advisor.policy import zerosteps
from specserver_engine import loadgen
from stack import QWEN_EAGLE3, KubeHandle, Operator, wait_for

pytestmark = pytest.mark.cluster

NAME = "zero-step-tier"
EVALUATIONS = "specserver_evaluation_duration_seconds_count"
CAP = 96
USERS = 90


def adaptive_spec() -> dict[str, Any]:
    # An SLO a queue-free H100 cannot breach: the only reason left would be speculation's own.
    doc = eagle3_auto(NAME, ttftP99SloSeconds=60, minDwellSeconds=0, disableAfterBreaches=1)
    spec = doc["spec"]
    spec["speculative"]["adaptive"] = True
    spec["engine"]["maxRunningRequests"] = CAP
    spec["resources"]["gpuType"] = "H100"
    return doc


def test_the_zero_step_tier_is_the_engines_decision_and_auto_says_so(
    kube: KubeHandle,
    namespace: str,
    prom: Any,
    start_simulator: Any,
    own_operator: Callable[..., Operator],
) -> None:
    sim = start_simulator(
        *QWEN_EAGLE3,
        "--speculative-adaptive",
        "--max-running-requests",
        str(CAP),
        "--sim-gpu",
        "H100",
        "--time-scale",
        "10",
        "--sim-startup-seconds",
        "0",
        "--enable-metrics",
    )
    prom.write_targets(
        [
            {
                "targets": [f"127.0.0.1:{sim.port}"],
                "labels": {"namespace": namespace, "specserver": NAME, "pod": f"{NAME}-0"},
            }
        ]
    )
    operator = own_operator(
        start=False,
        SPECSERVER_PROMETHEUS_URL=prom.url,
        SPECSERVER_CYCLE_SECONDS="2",
        SPECSERVER_QUERY_INTERVAL_SECONDS="2",
        SPECSERVER_SIGNAL_WINDOW_SECONDS="10",
    )
    load = threading.Thread(
        target=lambda: asyncio.run(
            loadgen.run_segment(
                sim.url, loadgen.Segment(USERS, 75.0, None, "chat"), 256, 512, False
            )
        ),
        daemon=True,
    )
    try:
        operator.start()
        apply(kube, namespace, adaptive_spec())
        dep = wait_for(lambda: get(kube, "deployment", namespace, NAME), 60, "Deployment")
        args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
        assert "--speculative-adaptive" in args
        assert args[args.index("--max-running-requests") + 1] == str(CAP)
        load.start()
        sps = wait_for(
            lambda: (
                (o := get(kube, "sps", namespace, NAME))
                and (c := condition(o, zerosteps.CONDITION))
                and c["status"] == "True"
                and o
            ),
            60,
            "EngineZeroSteps=True",
        )
        status = sps["status"]
        found = condition(sps, zerosteps.CONDITION)
        assert found is not None and found["reason"] == zerosteps.REASON
        assert "0 draft steps" in found["message"]
        assert status["lastMetrics"]["specNumSteps"] == 0
        assert status["lastDecisionReason"] == zerosteps.REASON
        # Evaluations go on in the band; none of them acts on the zero-step readings.
        reasons = set()

        def reason_seen() -> bool:
            reasons.add(get(kube, "sps", namespace, NAME)["status"]["lastDecisionReason"])  # type: ignore[index]
            return False

        # Four more evaluations (every 5 s), each reason they leave seen.
        until = operator.metric(EVALUATIONS) + 4 + 1
        wait_for(
            lambda: reason_seen() or operator.metric(EVALUATIONS) >= until,
            120,
            "four more evaluations",
            poll_s=1,
        )
        final = get(kube, "sps", namespace, NAME)
        assert final is not None
        assert reasons == {zerosteps.REASON}, reasons
        assert final["status"]["speculationMode"] == "On"
        assert not final["status"].get("switch") and not final["status"].get("decisions")
        events = json.loads(kube.kubectl("get", "events", "-n", namespace, "-o", "json").stdout)
        seen = {e["reason"] for e in events["items"]}
        assert zerosteps.REASON in seen and "SpeculationDisabled" not in seen, seen
        state = final["status"].get("policyState") or {}
        scored = {band for band, modes in (state.get("bands") or {}).items() if "on" in modes}
        assert not [b for b in scored if float(b.split("@")[0]) >= 61], state
    finally:
        operator.stop()
        prom.write_targets([])
        load.join(timeout=90)
