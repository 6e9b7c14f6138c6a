"""The webhook does not fail open (issue 37): manifests/webhook.yaml's failurePolicy is Fail for
the one CRD it covers, and manifests/ carry it with the operator's availability: two replicas
preferring different nodes, a PodDisruptionBudget that selects them, and a readinessProbe that
asks the webhook's own server (webhook/server.py, ``READY_PATH``) on the port it serves."""

from __future__ import annotations

from typing import Any

import yaml

from specserver_operator.webhook.server import READY_PATH
from stack import REPO

MANIFESTS = REPO / "manifests"


def _docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((MANIFESTS / name).read_text()) if d]


def test_the_specserver_webhook_fails_closed_and_covers_only_specservers() -> None:
    (config,) = [d for d in _docs("webhook.yaml") if d["kind"] == "ValidatingWebhookConfiguration"]
    (hook,) = config["webhooks"]
    assert hook["failurePolicy"] == "Fail"
    assert [r["resources"] for r in hook["rules"]] == [["specservers"]]


def test_the_operator_carries_a_failing_closed_webhook() -> None:
    (deploy,) = _docs("operator.yaml")
    labels = deploy["spec"]["template"]["metadata"]["labels"]
    assert deploy["spec"]["replicas"] >= 2
    assert deploy["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 1
    pod = deploy["spec"]["template"]["spec"]
    (term,) = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"].items() <= labels.items()
    (container,) = pod["containers"]
    probe = container["readinessProbe"]["httpGet"]
    assert (probe["path"], probe["scheme"]) == (READY_PATH, "HTTPS")
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert ports[probe["port"]] == int(env["SPECSERVER_WEBHOOK_PORT"])
    (service,) = [d for d in _docs("webhook.yaml") if d["kind"] == "Service"]
    assert service["spec"]["selector"].items() <= labels.items()  # Ready replicas only
    (pdb,) = _docs("pdb.yaml")
    assert pdb["apiVersion"] == "policy/v1" and pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert pdb["metadata"]["namespace"] == deploy["metadata"]["namespace"]
