"""The workload-kind table (core/kinds.py) is the one place per-kind rules live: every kind the
operator watches, lists, renders, grants itself and repairs is an entry, and the per-kind
decisions (readiness, names, surge, which pods are whose) come from the entry."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import kopf
import pytest
import yaml

import specserver_operator.handlers  # noqa: F401  (registers the watches)
from specserver_advisor.launch.multinode import rolling_surge
from specserver_advisor.models import SpecServer
from specserver_operator.core import children, drift, kinds, render, status
from specserver_operator.kube import client, paths

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "manifests" / "examples"
#: One example per kind: a single-node engine and a two-node one.
BY_NODES = {1: "quickstart-qwen3-8b-l4.yaml", 2: "deepseek-v3-nextn-h100-2node.yaml"}


def make_server(nodes: int) -> SpecServer:
    doc = yaml.safe_load((EXAMPLES / BY_NODES[nodes]).read_text())
    assert doc["spec"]["resources"].get("nodes", 1) == nodes
    return SpecServer.model_validate(doc)


def test_every_watched_workload_kind_is_an_entry() -> None:
    """kopf watches exactly the table's kinds (plus SpecServers and Services), each on the
    group/version/plural its entry names."""
    watched = {
        (h.selector.group, h.selector.version, h.selector.any_name)
        for h in kopf.get_default_registry()._watching.get_all_handlers()
    }
    table = {(k.group, k.version, k.plural) for k in kinds.KINDS.values()}
    assert table <= watched
    others = watched - table
    assert {plural for _, _, plural in others} == {"specservers", "services"}


def test_every_listed_and_pathed_kind_is_an_entry() -> None:
    assert (*kinds.WORKLOAD_KINDS, "Service") == client.CHILD_KINDS
    assert {"LeaderWorkerSet"} == client.OPTIONAL_KINDS
    for kind in kinds.KINDS.values():
        assert paths.object_path(kind.kind, "ns", "x").startswith(kind.base_path)
        assert f"/{kind.plural}/x" in paths.object_path(kind.kind, "ns", "x")
    assert drift.SCALED_KINDS == kinds.WORKLOAD_KINDS
    assert set(render.WORKLOAD_TEMPLATES) == set(kinds.KINDS)


def test_every_entry_is_granted_in_rbac() -> None:
    """The operator's ClusterRole lets it watch and write every kind of the table."""
    docs = list(yaml.safe_load_all((ROOT / "manifests" / "rbac.yaml").read_text()))
    role = next(d for d in docs if d and d["kind"] == "ClusterRole")
    for kind in kinds.KINDS.values():
        rule = next(
            r
            for r in role["rules"]
            if kind.group in r["apiGroups"] and kind.plural in r["resources"]
        )
        assert {"get", "list", "watch", "create", "patch", "delete"} <= set(rule["verbs"])


def test_templates_render_the_kind_of_their_entry() -> None:
    for kind in kinds.KINDS.values():
        assert (ROOT / "operator/specserver_operator/core/templates" / kind.template).is_file()
        nodes = 2 if kind.multi_node else 1
        server = make_server(nodes)
        assert render.workload_kind(server) == kind.kind
        assert kinds.for_nodes(nodes) is kind


@pytest.mark.parametrize("nodes", [1, 2])
def test_default_surge_agrees_with_the_advisor(nodes: int) -> None:
    """The advisor prices a RollingUpdate switch with ``rolling_surge``; the operator renders
    the entry's ``default_max_surge``: the same number."""
    server = make_server(nodes)
    surge = render.max_surge(server, "RollingUpdate")
    assert surge == rolling_surge(server.spec) == kinds.for_nodes(nodes).default_max_surge


def test_readiness_and_names_come_from_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """Swapping an entry's readiness rule or naming changes what status and children decide:
    they hold no rule of their own."""
    seen: list[tuple[str, int]] = []

    def fake(workload: dict[str, Any], replicas: int) -> kinds.State:
        seen.append((workload["metadata"]["name"], replicas))
        return True, False, "fake says ready"

    entry = kinds.KINDS["LeaderWorkerSet"]
    monkeypatch.setitem(
        kinds.KINDS,
        "LeaderWorkerSet",
        dataclasses.replace(entry, readiness=fake, single_name=lambda b: f"{b}-grp"),
    )
    lws = {"kind": "LeaderWorkerSet", "metadata": {"name": "m-grp"}, "status": {}}
    assert status.deployment_state(lws, 3) == (True, False, "fake says ready")
    assert seen == [("m-grp", 3)]
    assert ("LeaderWorkerSet", "m-grp") in children.workload_keys("m")
    found = children.serving_workload(
        lambda k, n: lws if (k, n) == ("LeaderWorkerSet", "m-grp") else None,
        "m",
        False,
        "LeaderWorkerSet",
    )
    assert found is lws


SELECTED = {"specserver.io/name": "m", "specserver.io/mode": "on"}


def test_pod_selector_per_kind() -> None:
    dep = {
        "kind": "Deployment",
        "metadata": {"name": "m"},
        "spec": {"selector": {"matchLabels": SELECTED}},
    }
    lws = {"kind": "LeaderWorkerSet", "metadata": {"name": "m-lws"}}
    dep_pod = {"metadata": {"labels": {"specserver.io/name": "m", "specserver.io/mode": "on"}}}
    lws_pod = {
        "metadata": {
            "labels": {"leaderworkerset.sigs.k8s.io/name": "m-lws", "specserver.io/name": "m"}
        }
    }
    assert kinds.pod_matches(dep, dep_pod) and not kinds.pod_matches(dep, lws_pod)
    assert kinds.pod_matches(lws, lws_pod) and not kinds.pod_matches(lws, dep_pod)
    assert not kinds.pod_matches({"kind": "Service", "metadata": {"name": "m"}}, dep_pod)
