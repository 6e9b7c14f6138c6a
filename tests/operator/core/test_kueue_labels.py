"""Kueue: ``spec.scheduling`` rendered as the labels Kueue reads (``kueue.x-k8s.io/queue-name``,
``kueue.x-k8s.io/priority-class``) on the workload's metadata, as Kueue's Deployment and
LeaderWorkerSet integrations read them, and on its pod templates, as Kueue's webhook writes
them itself; validated as hostile input; an existing workload keeps its queue (Kueue refuses
the change), and Kueue's own mutations are not drift."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from specserver_advisor.launch.validation import parse
from specserver_advisor.lint.launchlint import build_engine_config
from specserver_advisor.loaders.configchain import ModelConfigs
from specserver_advisor.loaders.configs import bundled
from specserver_advisor.models import Mode, SpecServer
from specserver_operator.core import children, drift, kinds, render
from stack import REPO

EXAMPLES = REPO / "manifests" / "examples"
BY_NODES = {1: "quickstart-qwen3-8b-l4.yaml", 2: "deepseek-v3-nextn-h100-2node.yaml"}

QUEUE = {"queueName": "team-a-gpus", "priorityClassName": "serving.high"}
LABELS = {
    "kueue.x-k8s.io/queue-name": "team-a-gpus",
    "kueue.x-k8s.io/priority-class": "serving.high",
}


def doc(nodes: int, scheduling: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = yaml.safe_load((EXAMPLES / BY_NODES[nodes]).read_text())
    out["metadata"].setdefault("namespace", "llm")
    if scheduling is not None:
        out["spec"]["scheduling"] = scheduling
    return out


def workload(nodes: int, scheduling: dict[str, Any] | None = None) -> dict[str, Any]:
    server = SpecServer.model_validate(doc(nodes, scheduling))
    target = bundled(server.spec.model.path)
    draft = bundled(server.spec.draft.path) if server.spec.draft else None
    assert target is not None
    configs = ModelConfigs(target.config, draft.config if draft else None, None, None, "t")
    cfg = build_engine_config(server.spec, configs, server.spec.mode != Mode.DISABLED)
    assert cfg.valid, cfg.message
    objs = render.build_children(server, "uid-1", cfg)
    return next(o for o in objs if o["kind"] in kinds.KINDS)


def test_labels_on_the_rendered_deployment() -> None:
    dep = workload(1, QUEUE)
    assert dep["kind"] == "Deployment"
    assert LABELS.items() <= dep["metadata"]["labels"].items()
    assert LABELS.items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    # the selector is untouched: the queue is not part of which pods are whose
    assert not LABELS.keys() & dep["spec"]["selector"]["matchLabels"].keys()


def test_labels_on_the_rendered_leaderworkerset() -> None:
    lws = workload(2, QUEUE)
    assert lws["kind"] == "LeaderWorkerSet"
    assert LABELS.items() <= lws["metadata"]["labels"].items()
    group = lws["spec"]["leaderWorkerTemplate"]
    # Not on the pod templates: Kueue's LWS pod reconciler joins a pod to its group's Workload
    # only when the pod has no queue label yet (a pod rendered with one stays gated after
    # admission: tests/cluster/test_kueue_e2e.py).
    for template in ("leaderTemplate", "workerTemplate"):
        assert not LABELS.keys() & group[template]["metadata"]["labels"].keys()


@pytest.mark.parametrize("nodes", [1, 2])
def test_no_scheduling_renders_no_kueue_label(nodes: int) -> None:
    text = yaml.safe_dump(workload(nodes))
    assert "kueue.x-k8s.io" not in text
    queue_only = workload(nodes, {"queueName": "q"})
    assert queue_only["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "q"
    assert "kueue.x-k8s.io/priority-class" not in queue_only["metadata"]["labels"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("queueName", "Team_A"),
        ("queueName", "a/../../b"),
        ("queueName", "a" * 64),
        ("queueName", ""),
        ("queueName", "a.b"),  # a label, not a subdomain
        ("priorityClassName", "a" * 64),  # a label value: at most 63
        ("priorityClassName", "High Priority"),
        ("priorityClassName", "x\n\u202e"),
    ],
)
def test_hostile_scheduling_is_refused_naming_the_field(field: str, value: str) -> None:
    server, problems = parse(doc(1, {field: value}))
    assert server is None
    assert any(f"spec.scheduling.{field}" in p for p in problems), problems


def test_unknown_scheduling_fields_are_refused() -> None:
    server, problems = parse(doc(1, {"queue": "q"}))
    assert server is None and any("spec.scheduling" in p for p in problems), problems


def test_an_existing_workload_keeps_its_queue() -> None:
    """Kueue's webhook refuses a change of the queue-name label on an existing Deployment: the
    rendering keeps what the live one carries (also its absence), a new one gets the spec's."""
    live = workload(1, {"queueName": "old-queue"})
    name = live["metadata"]["name"]
    lookups = {("Deployment", name): live}
    keep = children.keeping_queues(lambda k, n: lookups.get((k, n)), lambda: [workload(1, QUEUE)])
    (kept,) = keep()
    assert kept["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "old-queue"
    assert "kueue.x-k8s.io/priority-class" not in kept["metadata"]["labels"]
    assert kept["spec"]["template"]["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == (
        "old-queue"
    )
    fresh = children.keeping_queues(lambda k, n: None, lambda: [workload(1, QUEUE)])()
    assert LABELS.items() <= fresh[0]["metadata"]["labels"].items()
    key = children.live_queues(lambda k, n: lookups.get((k, n)), [("Deployment", name)])
    assert key == (("Deployment", name, (("kueue.x-k8s.io/queue-name", "old-queue"),)),)


@pytest.mark.parametrize("nodes", [1, 2])
def test_kueues_own_mutations_are_not_drift(nodes: int) -> None:
    """What Kueue's webhooks add (the queue label copied into the pod template, its own
    labels and annotations) is not a field the operator owns: no repair, no fight."""
    desired = workload(nodes, QUEUE)
    live = copy.deepcopy(desired)
    for meta in kinds.pod_template_metas(live):
        meta.setdefault("labels", {})["kueue.x-k8s.io/queue-name"] = "team-a-gpus"
        meta["labels"]["kueue.x-k8s.io/pod-group-name"] = "x"
        meta.setdefault("annotations", {})["kueue.x-k8s.io/workload"] = "w"
    live["metadata"]["labels"]["kueue.x-k8s.io/managed"] = "true"
    replicas = drift.replicas(desired)
    assert drift.drift(desired["kind"], live, desired, replicas) is None
