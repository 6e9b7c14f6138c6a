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
    rule, _group = policy["spec"]["ingress"]  # the API port; a multi-node group's own traffic
    assert [p["port"] for p in rule["ports"]] == [p["name"] for p in engine["ports"]]
    peers = rule["from"]
    assert {"podSelector": {"matchLabels": {"specserver.io/engine-client": "true"}}} in peers
    assert all(p for p in peers)  # no empty peer (that would admit everything)


# ---------------------------------------------------------------- multi-node groups (issue 37)


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A LabelSelector (matchLabels and the Exists/DoesNotExist/In/NotIn expressions)."""
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    for expr in selector.get("matchExpressions", []):
        key, op, values = expr["key"], expr["operator"], expr.get("values", [])
        ok = {
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
            "In": labels.get(key) in values,
            "NotIn": labels.get(key) not in values,
        }[op]
        if not ok:
            return False
    return True


def admits(
    policy: dict[str, Any],
    source: dict[str, str],
    source_namespace: dict[str, str],
    same_namespace: bool,
    target: dict[str, Any],
    port: int,
) -> bool:
    """NetworkPolicy ingress semantics for one policy that selects ``target`` (a pod: its
    labels and containers' ports): whether a TCP connection from a pod with labels ``source``
    (in a namespace with labels ``source_namespace``) to ``port`` is allowed."""
    spec = policy["spec"]
    assert _selects(spec["podSelector"], target["labels"])
    named = {p["name"]: p["containerPort"] for p in target["ports"] if "name" in p}
    for rule in spec.get("ingress", []):
        ranges = [
            (first, p.get("endPort") or first)
            for p in rule.get("ports", [])
            if p.get("protocol", "TCP") == "TCP"
            and (first := named.get(p["port"]) if isinstance(p["port"], str) else p["port"])
        ]
        ports_ok = not rule.get("ports") or any(lo <= port <= hi for lo, hi in ranges)
        if not ports_ok:
            continue
        for peer in rule.get("from", []):
            ns_sel, pod_sel = peer.get("namespaceSelector"), peer.get("podSelector")
            if ns_sel is None and not same_namespace:
                continue
            if ns_sel is not None and not _selects(ns_sel, source_namespace):
                continue
            if pod_sel is not None and not _selects(pod_sel, source):
                continue
            return True
    return False


def _group_pods() -> list[dict[str, Any]]:
    """The pods of one group of the 2-node example as LeaderWorkerSet creates them from the
    operator's rendered LeaderWorkerSet (tests/lwspods.py: the template's labels plus
    LeaderWorkerSet's own)."""
    from lwspods import group_pods
    from specserver_advisor.loaders.configchain import ModelConfigs
    from specserver_advisor.loaders.configs import bundled
    from specserver_advisor.models import SpecServer
    from specserver_operator.core import render, speccheck

    doc = yaml.safe_load(
        (REPO / "manifests/examples/deepseek-v3-nextn-h100-2node.yaml").read_text()
    )
    doc["metadata"].update(namespace="llm", uid="u-1")
    server = SpecServer.model_validate(doc)
    target = bundled(server.spec.model.path)
    assert target is not None
    cfg = speccheck.render(server, ModelConfigs(target.config, None, None, None, "bundled"), True)
    lws = render.build_children(server, "u-1", cfg)[0]
    assert lws["kind"] == "LeaderWorkerSet"
    lws["metadata"]["uid"] = "lws-uid"
    pods = []
    for pod in group_pods(lws):
        (container,) = pod["spec"]["containers"]
        pods.append({"labels": pod["metadata"]["labels"], "ports": container.get("ports", [])})
    return pods


def test_the_engine_policy_lets_a_multi_node_group_form_and_nothing_more() -> None:
    """Issue 37, finding 5: the policy denied the worker -> leader rendezvous and the
    leader -> worker NCCL traffic, so a LeaderWorkerSet never formed where it was applied. Now
    the group's pods reach each other on SGLang's rendezvous ports (20000-21099) and the
    kernel's ephemeral ports (NCCL's and gloo's listeners); an engine client, a pod of the
    operator's namespace and a single-node engine still reach only the API port."""
    from specserver_advisor.launch.multinode import DIST_INIT_PORT, RESERVED_PORTS

    (policy,) = _docs(MANIFESTS / "networkpolicy-engines.yaml")
    leader, worker = _group_pods()
    api = next(p["containerPort"] for p in leader["ports"] if p["name"] == "http")
    nccl = 45123  # a port the kernel picks for NCCL's bootstrap listener (32768-60999)
    for src, dst in ((worker, leader), (leader, worker)):
        for port in (DIST_INIT_PORT, RESERVED_PORTS[-1], nccl):
            assert admits(policy, src["labels"], {}, True, dst, port), (port, dst["labels"])
    client = {"specserver.io/engine-client": "true"}
    operator_ns = {"kubernetes.io/metadata.name": "specserver-system"}
    single = dict(leader["labels"])
    del single["leaderworkerset.sigs.k8s.io/name"]
    for src, ns, same in ((client, {}, True), ({}, operator_ns, False), (single, {}, True)):
        assert not admits(policy, src, ns, same, leader, DIST_INIT_PORT)
        assert not admits(policy, src, ns, same, worker, nccl)
    assert admits(policy, client, {}, True, leader, api)
    # A group member of another namespace gets nothing (the rule's peers are this namespace's).
    assert not admits(policy, worker["labels"], {}, False, leader, DIST_INIT_PORT)
    # Ports outside the two ranges stay closed inside the group too (ssh, a debug server).
    assert not admits(policy, worker["labels"], {}, True, leader, 22)
    assert not admits(policy, worker["labels"], {}, True, leader, 8080)
