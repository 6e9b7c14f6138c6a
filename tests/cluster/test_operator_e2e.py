"""The operator as a real process against the real apiserver + controller-manager (the shared
operator of tests/cluster/conftest.py; each test in its own namespace)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from stack import REPO, KubeHandle, Operator, load_config, wait_for

pytestmark = pytest.mark.cluster

EXAMPLE = REPO / "manifests" / "examples" / "qwen3-8b-eagle3-l4.yaml"


def get(kube: KubeHandle, kind: str, ns: str, name: str) -> dict[str, Any] | None:
    done = kube.kubectl("get", kind, name, "-n", ns, "-o", "json", check=False)
    return json.loads(done.stdout) if done.returncode == 0 else None


def condition(obj: dict[str, Any] | None, type_: str) -> dict[str, Any] | None:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == type_:
            return dict(c)
    return None


def apply(kube: KubeHandle, ns: str, doc: dict[str, Any]) -> None:
    kube.kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(doc))


def example(**engine: Any) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    doc["spec"]["engine"].update(engine)
    doc["spec"]["engine"] = {k: v for k, v in doc["spec"]["engine"].items() if v is not None}
    return doc


def written(obj: dict[str, Any] | None) -> tuple[Any, ...]:
    """What only a writer of the spec changes (controllers keep updating status and counters)."""
    assert obj is not None
    meta = obj["metadata"]
    managers = sorted(
        (m["manager"], m.get("time"))
        for m in meta.get("managedFields") or []
        if m.get("manager") == "specserver"
    )
    return (
        meta.get("generation"),
        (meta.get("annotations") or {}).get("specserver.io/applied-hash"),
        tuple(managers),
    )


def engine_args(deployment: dict[str, Any]) -> list[str]:
    return list(deployment["spec"]["template"]["spec"]["containers"][0]["args"])


def test_computed_cap_is_explicit_and_status_says_why(
    kube: KubeHandle, namespace: str, operator: Operator
) -> None:
    apply(kube, namespace, example(maxRunningRequests=None))
    dep = wait_for(lambda: get(kube, "deployment", namespace, "qwen3-8b"), 60, "Deployment")
    args = engine_args(dep)
    cap = int(args[args.index("--max-running-requests") + 1])
    assert 1 <= cap < 48
    sps = wait_for(
        lambda: (
            (o := get(kube, "sps", namespace, "qwen3-8b"))
            and (o.get("status") or {}).get("maxRunningRequestsSource")
            and o
        ),
        60,
        "status",
    )
    st = sps["status"]
    assert st["maxRunningRequestsSource"] == "Computed" and st["maxRunningRequests"] == cap
    assert "KV pool" in st["maxRunningRequestsReason"]
    assert st["observedGeneration"] == sps["metadata"]["generation"]
    assert condition(sps, "ConfigValid")["status"] == "True"  # type: ignore[index]
    assert condition(sps, "SpeculationActive")["status"] == "True"  # type: ignore[index]
    assert get(kube, "service", namespace, "qwen3-8b") is not None
    owner = dep["metadata"]["ownerReferences"][0]
    assert owner["kind"] == "SpecServer" and owner["uid"] == sps["metadata"]["uid"]
    labels = dep["metadata"]["labels"]
    assert labels["app.kubernetes.io/managed-by"] == "specserver"
    assert labels["specserver.io/mode"] == "on" and labels["specserver.io/name"] == "qwen3-8b"


def test_short_draft_is_refused_then_fixed(
    kube: KubeHandle, namespace: str, operator: Operator
) -> None:
    target = load_config("llama-3.1-8b")
    draft = load_config("eagle3-2048-positions")
    doc = example(maxRunningRequests=None, extraArgs=None)
    doc["metadata"]["name"] = "llama-short-draft"
    doc["spec"]["model"] = {"path": "meta-llama/Llama-3.1-8B-Instruct"}
    doc["spec"]["draft"] = {"path": "org/eagle3-2048"}
    doc["spec"]["resources"]["gpuType"] = "H100"
    inline = {"targetConfig": json.dumps(target), "draftConfig": json.dumps(draft)}
    doc["spec"]["modelSource"] = {"inline": inline}
    apply(kube, namespace, doc)
    sps = wait_for(
        lambda: (
            (o := get(kube, "sps", namespace, "llama-short-draft"))
            and condition(o, "ConfigValid")
            and condition(o, "ConfigValid")["status"] == "False"
            and o
        ),
        60,  # type: ignore[index]
        "ConfigValid=False",
    )
    cv = condition(sps, "ConfigValid")
    assert cv["reason"] == "SPEC002" and "40960" in cv["message"]  # type: ignore[index]
    operator.wait_cycles(2)  # two whole cycles after the refusal: still no Deployment
    assert get(kube, "deployment", namespace, "llama-short-draft") is None
    events = kube.kubectl("get", "events", "-n", namespace, "-o", "json").stdout
    reasons = {(e["type"], e["reason"]) for e in json.loads(events)["items"]}
    assert ("Warning", "SPEC002") in reasons
    doc["spec"]["modelSource"]["inline"]["draftConfig"] = json.dumps(
        dict(draft, max_position_embeddings=131072, rope_scaling=target["rope_scaling"])
    )
    apply(kube, namespace, doc)
    wait_for(lambda: get(kube, "deployment", namespace, "llama-short-draft"), 60, "Deployment")
    fixed = wait_for(
        lambda: (
            (o := get(kube, "sps", namespace, "llama-short-draft"))
            and condition(o, "ConfigValid")["status"] == "True"
            and o
        ),
        60,  # type: ignore[index]
        "ConfigValid=True",
    )
    assert fixed["status"]["observedGeneration"] == fixed["metadata"]["generation"]


def test_short_draft_is_refused_naming_the_field_and_deploys_with_it(
    kube: KubeHandle, namespace: str, operator: Operator
) -> None:
    """spec.speculative.draftContextFromTarget: the refusal names it; set, the engine renders
    the target's own rope scaling and positions for the draft and the SpecServer deploys."""
    target = load_config("llama-3.1-8b")
    doc = example(maxRunningRequests=None, extraArgs=None)
    doc["metadata"]["name"] = "llama-draft-context"
    doc["spec"]["model"] = {"path": "meta-llama/Llama-3.1-8B-Instruct"}
    doc["spec"]["draft"] = {"path": "org/eagle3-2048"}
    doc["spec"]["resources"]["gpuType"] = "H100"
    inline = {
        "targetConfig": json.dumps(target),
        "draftConfig": json.dumps(load_config("eagle3-2048-positions")),
    }
    doc["spec"]["modelSource"] = {"inline": inline}
    apply(kube, namespace, doc)
    refused = wait_for(
        lambda: (
            (o := get(kube, "sps", namespace, "llama-draft-context"))
            and (c := condition(o, "ConfigValid"))
            and c["status"] == "False"
            and c
        ),
        60,
        "ConfigValid=False",
    )
    assert refused["reason"] == "SPEC002"
    assert "spec.speculative.draftContextFromTarget: true" in refused["message"]
    doc["spec"]["speculative"]["draftContextFromTarget"] = True
    apply(kube, namespace, doc)
    dep = wait_for(
        lambda: get(kube, "deployment", namespace, "llama-draft-context"), 60, "Deployment"
    )
    args = engine_args(dep)
    rendered = json.loads(args[args.index("--json-model-override-args") + 1])
    assert rendered == {
        "max_position_embeddings": target["max_position_embeddings"],
        "rope_scaling": target["rope_scaling"],
    }
    fixed = wait_for(
        lambda: (
            (o := get(kube, "sps", namespace, "llama-draft-context"))
            and condition(o, "ConfigValid")["status"] == "True"  # type: ignore[index]
            and o
        ),
        60,
        "ConfigValid=True",
    )
    assert fixed["status"]["resolved"]["contextLength"] == 40960


def test_mode_disabled_renders_no_speculative_flags(
    kube: KubeHandle, namespace: str, operator: Operator
) -> None:
    doc = example()
    doc["spec"]["mode"] = "Disabled"
    apply(kube, namespace, doc)
    dep = wait_for(lambda: get(kube, "deployment", namespace, "qwen3-8b"), 60, "Deployment")
    assert not [a for a in engine_args(dep) if a.startswith("--speculative")]
    assert dep["metadata"]["labels"]["specserver.io/mode"] == "off"
    sps = wait_for(
        lambda: (
            (o := get(kube, "sps", namespace, "qwen3-8b"))
            and (o.get("status") or {}).get("speculationMode")
            and o
        ),
        60,
        "status",
    )
    assert sps["status"]["speculationMode"] == "Off"


def test_owned_flag_in_extra_args_is_refused_and_a_running_engine_is_kept(
    kube: KubeHandle, namespace: str, operator: Operator
) -> None:
    apply(kube, namespace, example())
    dep = wait_for(lambda: get(kube, "deployment", namespace, "qwen3-8b"), 60, "Deployment")
    version = written(dep)
    apply(kube, namespace, example(extraArgs=["--max-running-requests", "64"]))
    sps = wait_for(
        lambda: (
            (o := get(kube, "sps", namespace, "qwen3-8b"))
            and condition(o, "ConfigValid")["status"] == "False"
            and o
        ),
        60,  # type: ignore[index]
        "ConfigValid=False",
    )
    cv = condition(sps, "ConfigValid")
    assert cv["reason"] == "OwnedFlagInExtraArgs"  # type: ignore[index]
    assert "--max-running-requests" in cv["message"]  # type: ignore[index]
    operator.wait_cycles(2)  # two whole cycles after the refusal: the engine is as it was
    after = get(kube, "deployment", namespace, "qwen3-8b")
    assert after is not None and written(after) == version


def test_resync_and_restart_write_nothing(
    kube: KubeHandle, namespace: str, operator: Operator
) -> None:
    apply(kube, namespace, example())
    wait_for(lambda: get(kube, "deployment", namespace, "qwen3-8b"), 60, "Deployment")
    wait_for(
        lambda: (
            (o := get(kube, "sps", namespace, "qwen3-8b"))
            and (o.get("status") or {}).get("resolved")
        ),
        60,
        "status",
    )
    # The status is written over a few passes (writer threads, the rest of a deferred pass):
    # the snapshot is taken once three whole cycles left the SpecServer as it was.
    settled = settled_through_cycles(kube, namespace, "qwen3-8b", operator, 3, 120)
    before = [written(get(kube, k, namespace, "qwen3-8b")) for k in ("deployment", "service")]
    operator.stop()
    operator.start()
    # The restarted operator's first cycle resyncs from a LIST; two more are steady passes.
    wait_for(lambda: operator.metric("specserver_cycles_total") >= 3, 120, "three cycles")
    after = [written(get(kube, k, namespace, "qwen3-8b")) for k in ("deployment", "service")]
    assert after == before
    now = get(kube, "sps", namespace, "qwen3-8b")
    assert now is not None
    assert now["status"] == settled["status"]
    assert now["metadata"]["resourceVersion"] == settled["metadata"]["resourceVersion"]


def settled_through_cycles(
    kube: KubeHandle, ns: str, name: str, operator: Operator, cycles: int, timeout: float
) -> dict[str, Any]:
    """The SpecServer once ``cycles`` whole operator cycles ran without changing it."""
    seen: list[Any] = [None, 0.0]  # the resourceVersion last seen, the cycle count then

    def unchanged() -> dict[str, Any] | None:
        obj = get(kube, "sps", ns, name)
        version = obj and obj["metadata"]["resourceVersion"]
        done = operator.metric("specserver_cycles_total")
        if obj is None or version != seen[0]:
            seen[:] = [version, done]
        elif done - seen[1] >= cycles + 1:  # the cycle under way when it was seen, then cycles
            return obj
        return None

    found: dict[str, Any] = wait_for(
        unchanged, timeout, f"SpecServer {name} unchanged through {cycles} cycles"
    )
    return found


def test_deleting_the_specserver_removes_its_children(
    kube: KubeHandle, namespace: str, operator: Operator
) -> None:
    apply(kube, namespace, example())
    wait_for(lambda: get(kube, "deployment", namespace, "qwen3-8b"), 60, "Deployment")
    wait_for(lambda: get(kube, "service", namespace, "qwen3-8b"), 60, "Service")
    kube.kubectl("delete", "sps", "qwen3-8b", "-n", namespace, "--wait=true", "--timeout=60s")
    wait_for(
        lambda: (
            get(kube, "deployment", namespace, "qwen3-8b") is None
            and get(kube, "service", namespace, "qwen3-8b") is None
        ),
        90,
        "garbage collection",
    )


def test_no_metrics_holds_the_mode_and_manual_off_is_immediate(
    kube: KubeHandle, namespace: str, operator: Operator
) -> None:
    # This operator has no Prometheus: mode Auto must hold, say why, and never switch.
    doc = example()
    doc["spec"]["autoSpeculation"] = {"evaluationIntervalSeconds": 5}
    apply(kube, namespace, doc)
    sps = wait_for(
        lambda: (
            (o := get(kube, "sps", namespace, "qwen3-8b"))
            and condition(o, "MetricsAvailable")
            and o
        ),
        60,
        "MetricsAvailable",
    )
    metrics = condition(sps, "MetricsAvailable")
    assert metrics["status"] == "False"  # type: ignore[index]
    assert metrics["reason"] == "NoPrometheusURL"  # type: ignore[index]
    assert "no Prometheus URL configured" in metrics["message"]  # type: ignore[index]
    sps = wait_for(
        lambda: (
            (o := get(kube, "sps", namespace, "qwen3-8b"))
            and o["status"].get("lastDecisionReason") == "MetricsStale"
            and o
        ),
        60,
        "an evaluation that holds for lack of metrics (MetricsStale)",
    )
    assert not sps["status"].get("decisions")  # type: ignore[index]
    assert sps["status"]["speculationMode"] == "On"  # type: ignore[index]
    doc["spec"]["mode"] = "Disabled"
    cycles = operator.metric("specserver_cycles_total")
    apply(kube, namespace, doc)
    dep = wait_for(
        lambda: (
            (d := get(kube, "deployment", namespace, "qwen3-8b"))
            and d["metadata"]["labels"]["specserver.io/mode"] == "off"
            and d
        ),
        60,
        "mode Disabled",
    )
    # At once: within the cycle under way, the next, and one for the poll that saw it, however
    # busy the machine (the policy could not switch at all: it has no metrics).
    assert operator.metric("specserver_cycles_total") - cycles <= 3
    assert not [a for a in engine_args(dep) if a.startswith("--speculative")]


def test_an_hpa_on_the_engine_is_reported(
    kube: KubeHandle, namespace: str, operator: Operator
) -> None:
    apply(kube, namespace, example())
    wait_for(lambda: get(kube, "deployment", namespace, "qwen3-8b"), 60, "Deployment")
    hpa = {
        "apiVersion": "autoscaling/v1",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "engine-hpa"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "qwen3-8b"},
            "minReplicas": 1,
            "maxReplicas": 3,
            "targetCPUUtilizationPercentage": 80,
        },
    }
    apply(kube, namespace, hpa)
    sps = wait_for(
        lambda: (
            (o := get(kube, "sps", namespace, "qwen3-8b"))
            and (c := condition(o, "AutoscalerPresent"))
            and c["status"] == "True"
            and o
        ),
        90,
        "AutoscalerPresent=True",
    )
    message = condition(sps, "AutoscalerPresent")["message"]  # type: ignore[index]
    assert "HorizontalPodAutoscaler engine-hpa" in message


def test_no_finalizer_so_deleting_while_the_operator_is_down_does_not_hang(
    kube: KubeHandle, namespace: str, operator: Operator
) -> None:
    apply(kube, namespace, example())
    wait_for(lambda: get(kube, "deployment", namespace, "qwen3-8b"), 60, "Deployment")
    sps = get(kube, "sps", namespace, "qwen3-8b")
    assert not (sps or {})["metadata"].get("finalizers")
    operator.stop()
    try:
        kube.kubectl("delete", "sps", "qwen3-8b", "-n", namespace, "--wait=true", "--timeout=20s")
        assert get(kube, "sps", namespace, "qwen3-8b") is None
    finally:
        operator.start()


def test_the_cycle_recreates_a_deleted_deployment(
    kube: KubeHandle, namespace: str, operator: Operator
) -> None:
    apply(kube, namespace, example())
    first = wait_for(lambda: get(kube, "deployment", namespace, "qwen3-8b"), 60, "Deployment")
    kube.kubectl("delete", "deployment", "qwen3-8b", "-n", namespace, "--wait=true")
    again = wait_for(
        lambda: (
            (d := get(kube, "deployment", namespace, "qwen3-8b"))
            and d["metadata"]["uid"] != first["metadata"]["uid"]
            and d
        ),
        30,
        "the Deployment re-created by the cycle",
    )
    assert engine_args(again) == engine_args(first)
