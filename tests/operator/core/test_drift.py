"""Drift repair compares the fields the operator owns (drift.py): a hand edit is seen whatever
the applied-hash annotation says, while what the API server defaults is not an edit."""

from __future__ import annotations

import copy
from typing import Any

from specserver_advisor.launch.model import EngineConfig
from specserver_advisor.models import SpecServer
from specserver_operator.core.drift import drift, owned_digest, quantity
from specserver_operator.core.render import build_children
from specserver_operator.kube.objects import slim

SERVER = SpecServer.model_validate(
    {
        "metadata": {"name": "x", "namespace": "llm"},
        "spec": {
            "model": {"path": "Qwen/Qwen3-8B"},
            "speculative": {"algorithm": "NGRAM"},
            "resources": {"gpuType": "L4", "cpu": "0.5", "memory": "1024Mi"},
            "engine": {"env": [{"name": "EMPTY"}]},
        },
    }
)
CFG = EngineConfig(True, "Valid", "ok", args=["--model-path", "Qwen/Qwen3-8B"], speculative=True)


def rendered() -> dict[str, Any]:
    return build_children(SERVER, "uid-1", CFG)[0]


def as_served(obj: dict[str, Any]) -> dict[str, Any]:
    """What the API server hands back: defaults filled in, quantities canonical."""
    live = copy.deepcopy(obj)
    pod = live["spec"]["template"]["spec"]
    for c in pod["containers"] + pod["initContainers"]:
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            if probe in c:
                c[probe].setdefault("timeoutSeconds", 1)
                c[probe].setdefault("successThreshold", 1)
                c[probe]["httpGet"]["scheme"] = "HTTP"
        res = c["resources"]
        res["limits"] = {
            k: {"cpu": "500m", "memory": "1Gi"}.get(k, v) for k, v in res["limits"].items()
        }
        res["requests"] = dict(res["limits"])
        for env in c.get("env") or []:
            if env.get("value") == "":
                del env["value"]
    live["status"] = {"readyReplicas": 1}
    return live


def test_what_the_api_server_defaults_is_not_drift() -> None:
    desired = rendered()
    live = as_served(desired)
    assert drift("Deployment", live, desired, 1) is None
    assert (
        drift("Deployment", slim("Deployment", live), owned_digest("Deployment", desired), 1)
        is None
    )


def test_edited_args_or_replicas_are_drift() -> None:
    desired = rendered()
    live = as_served(desired)
    live["spec"]["template"]["spec"]["containers"][0]["args"] += ["--max-running-requests", "4096"]
    assert drift("Deployment", slim("Deployment", live), desired, 1) == "containers"
    scaled = as_served(desired)
    scaled["spec"]["replicas"] = 0
    assert drift("Deployment", slim("Deployment", scaled), desired, 1) == "replicas 0 (want 1)"
    assert drift("Deployment", scaled, desired, 1, autoscaled=True) is None


def test_quantities_compare_by_value() -> None:
    assert quantity("1000m") == quantity("1") == "1"
    assert quantity("1Gi") == quantity("1024Mi")
    assert quantity("1e3") == quantity("1k")
    assert quantity("lots") == "lots"
