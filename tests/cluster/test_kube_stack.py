"""What the current control plane (scripts/devcluster.py) enforces itself, without our webhook or
a Python re-implementation (issue 39):

- a SpecServer breaking a structural rule (specserver_advisor.structural, the CRD's CEL rules)
  is refused by the API server, naming the field, with no webhook in the way;
- Pod Security admission ("restricted", enforced on every test namespace) admits the engine pods
  the operator renders for each example and refuses a privileged one;
- the real kube-scheduler leaves a pod that asks for more GPUs than any node has Pending with its
  own ``Unschedulable`` condition, and binds one that fits to a node agent's node, whose agent
  runs it;
- its resourceVersions are KEP-5504's comparable integers (the operator's cache keeps the newer
  of two copies by them);
- LeaderWorkerSet's real controller reconciles an LWS in the operator's shape: its StatefulSets
  and the group's pods appear, with LWS's env injected by its webhook, and the group goes Ready.
"""

from __future__ import annotations

import copy
import itertools
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_operator_e2e import wait_for

from specserver_advisor.structural import RULES, Maximum, MaxItems
from specserver_operator.kube.informer import comparable, newer
from stack import (
    QWEN_EAGLE3,
    REPO,
    KubeHandle,
    dry_run_create,
    load_devcluster,
    pod_security_refusals,
    render_example,
)

pytestmark = pytest.mark.cluster

EXAMPLES = sorted((REPO / "manifests" / "examples").glob("*.yaml"))
EXAMPLE = REPO / "manifests" / "examples" / "qwen3-8b-eagle3-l4.yaml"
RESTRICTED_SECURITY = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "runAsUser": 10001,
    "seccompProfile": {"type": "RuntimeDefault"},
}


def _breaking(rule: Any) -> Any:
    if isinstance(rule, Maximum):
        return rule.maximum + 1
    if isinstance(rule, MaxItems):
        return ["--x"] * (rule.maximum + 1)
    return "has whitespace"


def _set(doc: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    node = doc["spec"]
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value


def test_kubectl_and_the_apiserver_are_the_release_built(kube: KubeHandle) -> None:
    version = json.loads(kube.kubectl("version", "-o", "json").stdout)
    release = "v" + load_devcluster().KUBE_VERSION
    assert version["serverVersion"]["gitVersion"] == release
    assert version["clientVersion"]["gitVersion"] == release


def test_the_apiservers_resource_versions_compare_as_the_operators_cache_assumes(
    kube: KubeHandle, namespace: str
) -> None:
    # kube/informer.py keeps the newer of two copies by KEP-5504's rule: each write of one object
    # gets a version of that form, greater than the one before.
    versions = []
    for value in ("a", "b", "c"):
        doc = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "rv"}}
        doc["data"] = {"k": value}
        kube.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(doc))
        got = kube.kubectl("get", "configmap", "rv", "-n", namespace, "-o", "json").stdout
        versions.append(json.loads(got)["metadata"]["resourceVersion"])
    # Deleted and created again under the same name: a newer version still (informer.py keeps
    # a copy older than a watched deletion out, and lets the recreated one in).
    kube.kubectl("delete", "configmap", "rv", "-n", namespace)
    kube.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(doc))
    got = kube.kubectl("get", "configmap", "rv", "-n", namespace, "-o", "json").stdout
    versions.append(json.loads(got)["metadata"]["resourceVersion"])
    assert all(comparable(v) is not None for v in versions), versions
    assert all(newer(b, a) for a, b in itertools.pairwise(versions)), versions


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.field)
def test_the_apiserver_refuses_a_structural_rule_broken_without_a_webhook(
    kube: KubeHandle, namespace: str, rule: Any
) -> None:
    hooks = json.loads(kube.kubectl("get", "validatingwebhookconfigurations", "-o", "json").stdout)
    assert not [
        h
        for cfg in hooks["items"]
        for h in cfg.get("webhooks") or []
        for r in h.get("rules") or []
        if "specservers" in r.get("resources", [])
    ], "a SpecServer webhook is configured: this test is about the apiserver alone"
    doc = yaml.safe_load(EXAMPLE.read_text())
    if rule.path[0] == "autoSpeculation":
        doc["spec"].setdefault("autoSpeculation", {})
    if rule.path[:2] == ("speculative", "ngram"):
        doc["spec"]["speculative"] = {"algorithm": "NGRAM"}
        doc["spec"].pop("draft", None)
    _set(doc, rule.path, _breaking(rule))
    done = dry_run_create(kube, namespace, doc)
    assert done.returncode != 0, f"{rule.field} accepted"
    if isinstance(rule, MaxItems):
        # The CRD's own maxItems (the same bound, from the models) refuses it first, naming the
        # field; the CEL rule is then not evaluated (the apiserver says so).
        assert f"{rule.field}: Too many: {rule.maximum + 1}" in done.stderr, done.stderr
    else:
        assert rule.message() in done.stderr
        assert f"{rule.field}: Invalid value" in done.stderr, done.stderr
    # The same document within the rule is accepted (the rule alone refused it).
    fine = copy.deepcopy(doc)
    if isinstance(rule, Maximum):
        _set(fine, rule.path, rule.maximum)
    else:
        _set(fine, rule.path, [] if isinstance(rule, MaxItems) else "registry.local/engine:1")
    ok = dry_run_create(kube, namespace, fine)
    assert ok.returncode == 0, ok.stderr


def _rendered(path: Path) -> list[dict[str, Any]]:
    return [c for c in render_example(path) if c["kind"] in ("Deployment", "LeaderWorkerSet")]


def test_pod_security_admits_every_rendered_engine_pod_and_refuses_a_privileged_one(
    kube: KubeHandle, namespace: str
) -> None:
    labels = json.loads(kube.kubectl("get", "namespace", namespace, "-o", "json").stdout)
    assert labels["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    for path in EXAMPLES:
        for workload in _rendered(path):
            assert pod_security_refusals(kube, namespace, workload) == [], path.name
    workload = _rendered(EXAMPLE)[0]
    privileged = copy.deepcopy(workload)
    engine = privileged["spec"]["template"]["spec"]["containers"][0]
    engine["securityContext"].pop("allowPrivilegeEscalation")  # the API forbids it with privileged
    engine["securityContext"]["privileged"] = True
    refused = pod_security_refusals(kube, namespace, privileged)
    assert len(refused) == 1
    assert 'violates PodSecurity "restricted:latest"' in refused[0]
    assert "privileged" in refused[0]
    host = copy.deepcopy(workload)
    host["spec"]["template"]["spec"]["volumes"].append({"name": "root", "hostPath": {"path": "/"}})
    assert 'restricted volume type "hostPath"' in " ".join(
        pod_security_refusals(kube, namespace, host)
    )


def test_the_operator_manifest_passes_pod_security(kube: KubeHandle, namespace: str) -> None:
    docs = list(yaml.safe_load_all((REPO / "manifests" / "operator.yaml").read_text()))
    deployment = next(d for d in docs if d and d["kind"] == "Deployment")
    assert pod_security_refusals(kube, namespace, deployment) == []


@pytest.fixture
def agent(kube: KubeHandle, tmp_path: Path) -> Iterator[Path]:
    """The node agent with two 8-GPU nodes; its state directory."""
    state = tmp_path / "agent"
    log = open(tmp_path / "agent.log", "ab")  # noqa: SIM115
    proc = subprocess.Popen(
        [
            sys.executable,
            str(REPO / "scripts" / "nodeagent.py"),
            "--kubeconfig",
            str(kube.kubeconfig),
            "--state-dir",
            str(state),
            "--time-scale",
            "10",
            "--startup-seconds",
            "10",
        ],
        env=kube.env(),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log.close()
    try:
        yield state
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        print((tmp_path / "agent.log").read_text()[-3000:])


def _pod(name: str, gpus: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "automountServiceAccountToken": False,
            "containers": [
                {
                    "name": "main",
                    "image": "busybox:1",
                    "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                    "securityContext": RESTRICTED_SECURITY,
                }
            ],
        },
    }


def _get(kube: KubeHandle, namespace: str, kind: str, name: str) -> dict[str, Any] | None:
    done = kube.kubectl("get", kind, name, "-n", namespace, "-o", "json", check=False)
    return json.loads(done.stdout) if done.returncode == 0 else None


def _cond(obj: dict[str, Any] | None, type_: str) -> dict[str, Any] | None:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == type_:
            return dict(c)
    return None


def test_a_pod_no_node_can_hold_is_pending_with_the_schedulers_condition(
    kube: KubeHandle, namespace: str, agent: Path
) -> None:
    nodes = wait_for(
        lambda: [
            n
            for n in json.loads(kube.kubectl("get", "nodes", "-o", "json").stdout)["items"]
            if _cond(n, "Ready") and _cond(n, "Ready")["status"] == "True"  # type: ignore[index]
        ],
        60,
        "the agent's Ready nodes",
    )
    most = max(int(n["status"]["allocatable"]["nvidia.com/gpu"]) for n in nodes)
    lease = _get(kube, "kube-node-lease", "lease", nodes[0]["metadata"]["name"])
    assert lease and lease["spec"]["holderIdentity"] == nodes[0]["metadata"]["name"]
    kube.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(_pod("too-big", most + 1)))
    kube.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(_pod("fits", most)))
    scheduled = wait_for(
        lambda: (
            (c := _cond(_get(kube, namespace, "pod", "too-big"), "PodScheduled"))
            and c["status"] == "False"
            and c
        ),
        60,
        "the scheduler's verdict on too-big",
    )
    assert scheduled["reason"] == "Unschedulable"
    assert "Insufficient nvidia.com/gpu" in scheduled["message"]
    pod = _get(kube, namespace, "pod", "too-big")
    assert pod and pod["status"]["phase"] == "Pending" and not pod["spec"].get("nodeName")
    running = wait_for(
        lambda: (
            (p := _get(kube, namespace, "pod", "fits"))
            and p["status"].get("phase") == "Running"
            and p
        ),
        60,
        "the pod that fits, run by the agent",
    )
    assert running["spec"]["nodeName"] in {n["metadata"]["name"] for n in nodes}


MULTINODE = REPO / "manifests" / "examples" / "deepseek-v3-nextn-h100-2node.yaml"


@pytest.mark.parametrize("strategy", ["Recreate", "RollingUpdate", "BlueGreen"])
def test_the_rendered_leaderworkerset_is_admitted_by_lws_itself(
    kube: KubeHandle, namespace: str, tmp_path: Path, strategy: str
) -> None:
    """LWS's own CRD (from its module) and validating webhook admit what the operator renders
    (a server-side dry run), and refuse a restartPolicy LWS does not know."""
    doc = yaml.safe_load(MULTINODE.read_text())
    doc["spec"]["autoSpeculation"] = {"switchStrategy": strategy}
    path = tmp_path / "example.yaml"
    path.write_text(yaml.safe_dump(doc))
    workloads = [c for c in render_example(path) if c["kind"] == "LeaderWorkerSet"]
    assert workloads
    for lws in workloads:
        lws = copy.deepcopy(lws)
        lws["metadata"].pop("ownerReferences", None)
        lws["metadata"]["namespace"] = namespace
        done = kube.kubectl(
            "create", "--dry-run=server", "-f", "-", input=json.dumps(lws), check=False
        )
        assert done.returncode == 0, done.stderr
    broken = copy.deepcopy(lws)
    broken["spec"]["leaderWorkerTemplate"]["restartPolicy"] = "Sometimes"
    done = kube.kubectl(
        "create", "--dry-run=server", "-f", "-", input=json.dumps(broken), check=False
    )
    assert done.returncode != 0 and "restartPolicy" in done.stderr


LWS = "ds-lws"
MANAGED = {"app.kubernetes.io/managed-by": "specserver", "specserver.io/name": "ds"}


def _lws() -> dict[str, Any]:
    """A LeaderWorkerSet of one group of two pods, in the shape the operator renders."""
    multinode = [
        "--tp-size",
        "2",
        "--nnodes",
        "2",
        "--node-rank",
        "$(LWS_WORKER_INDEX)",
        "--dist-init-addr",
        "$(LWS_LEADER_ADDRESS):20000",
    ]
    engine = {
        "name": "engine",
        "image": "specserver-engine:sim",
        "args": QWEN_EAGLE3 + multinode,
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
        "securityContext": RESTRICTED_SECURITY,
    }
    template = {
        "metadata": {"labels": MANAGED},
        "spec": {"automountServiceAccountToken": False, "containers": [engine]},
    }
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": LWS, "labels": MANAGED},
        "spec": {
            "replicas": 1,
            "startupPolicy": "LeaderCreated",
            "networkConfig": {"subdomainPolicy": "Shared"},
            "leaderWorkerTemplate": {
                "size": 2,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": template,
                "workerTemplate": template,
            },
        },
    }


def test_the_real_lws_controller_reconciles_a_group(
    kube: KubeHandle, namespace: str, agent: Path
) -> None:
    kube.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(_lws()))
    wait_for(
        lambda: (
            _get(kube, namespace, "statefulset", LWS)
            and _get(kube, namespace, "statefulset", f"{LWS}-0")
        ),
        90,
        "the leader and worker StatefulSets",
    )
    leader = wait_for(lambda: _get(kube, namespace, "pod", f"{LWS}-0"), 60, "the leader pod")
    worker = wait_for(lambda: _get(kube, namespace, "pod", f"{LWS}-0-1"), 60, "the worker pod")
    for pod, index in ((leader, "0"), (worker, "1")):
        assert pod["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/worker-index"] == index
        env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0].get("env", [])}
        assert env["LWS_WORKER_INDEX"] == index
        assert env["LWS_LEADER_ADDRESS"] == f"{LWS}-0.{LWS}.{namespace}"
        assert env["LWS_GROUP_SIZE"] == "2"
    status = wait_for(
        lambda: (
            (obj := _get(kube, namespace, "leaderworkerset", LWS))
            and (obj.get("status") or {}).get("readyReplicas") == 1
            and obj["status"]
        ),
        120,
        "the group Ready in the LWS status",
    )
    assert _cond({"status": status}, "Available")["status"] == "True"  # type: ignore[index]
