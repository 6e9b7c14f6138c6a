"""Who can reach the operator's metrics and the engines (issue 25, finding 7): metrics listen on
loopback unless the admin opens them, and the NetworkPolicies in manifests/ select the pods the
operator and its templates actually create, on the ports they actually name."""

from __future__ import annotations

import socket
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from specserver_engine.ports import free_loopback_port
from specserver_operator import settings
from specserver_operator.metrics import registry as opmetrics
from stack import REPO

MANIFESTS = REPO / "manifests"


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _refused(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex((host, port)) != 0


def test_metrics_listen_on_loopback_unless_the_admin_says_otherwise() -> None:
    assert settings.value("SPECSERVER_METRICS_ADDRESS", {}) == "127.0.0.1"
    port = free_loopback_port()
    opmetrics.serve(port)  # the default address
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        assert resp.status == 200
    # 127.0.0.2 is this host too: a listener on every address (0.0.0.0) would answer it.
    assert _refused("127.0.0.2", port)


def test_the_operator_policy_admits_only_monitoring_to_the_metrics_port() -> None:
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    assert "networkpolicy.yaml" in kustomization["resources"]
    (policy,) = _docs(MANIFESTS / "networkpolicy.yaml")
    (deploy,) = _docs(MANIFESTS / "operator.yaml")
    pod = deploy["spec"]["template"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    (container,) = pod["spec"]["containers"]
    named = {p["name"] for p in container["ports"]}
    rules = policy["spec"]["ingress"]
    assert {p["port"] for r in rules for p in r["ports"]} == named
    (metrics,) = [r for r in rules if any(p["port"] == "metrics" for p in r["ports"])]
    assert metrics["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    ]
    env = {e["name"]: e for e in container["env"]}
    address = env["SPECSERVER_METRICS_ADDRESS"]["valueFrom"]["fieldRef"]["fieldPath"]
    assert address == "status.podIP"  # reachable by the PodMonitor, nothing else opens it


def test_the_engine_policy_selects_rendered_engines_on_their_port() -> None:
    (policy,) = _docs(MANIFESTS / "networkpolicy-engines.yaml")
    assert "namespace" not in policy["metadata"]  # applied in each SpecServer namespace
    golden = [d for d in _docs(REPO / "tests" / "golden" / "qwen3-8b-eagle3-l4.yaml")]
    (deploy,) = [d for d in golden if d["kind"] == "Deployment"]
    labels = deploy["spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
    (engine,) = [c for c in deploy["spec"]["template"]["spec"]["containers"]]
    (rule,) = policy["spec"]["ingress"]
    assert [p["port"] for p in rule["ports"]] == [p["name"] for p in engine["ports"]]
    peers = rule["from"]
    assert {"podSelector": {"matchLabels": {"specserver.io/engine-client": "true"}}} in peers
    assert all(p for p in peers)  # no empty peer (that would admit everything)
