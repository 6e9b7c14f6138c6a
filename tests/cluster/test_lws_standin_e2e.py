"""The LeaderWorkerSet stand-in (scripts/lwsstandin.py, run by scripts/nodeagent.py) on the real
local apiserver, against hand-written LeaderWorkerSets in the shape the operator renders.

It must do what LWS v1 documents, since the multi-node e2e trusts it as LWS: the group's pods
with LWS's names, labels, annotations, env (init containers included) and ownerReference; one
simulated engine for the leader with the ``$(VAR)`` args expanded from that env; the status
subresource; a template change rolled without a surge (delete, then recreate: a gap) and with one
(the surge group Ready before the old group goes: never a gap); the whole group recreated when
one pod is deleted; the pods garbage-collected with the LWS.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_operator_e2e import condition, get

from stack import QWEN_EAGLE3, REPO, KubeHandle, wait_for

pytestmark = pytest.mark.cluster

LWS = "ds-lws"
MANAGED = {"app.kubernetes.io/managed-by": "specserver", "specserver.io/name": "ds"}
MULTINODE = [
    "--tp-size",
    "2",
    "--nnodes",
    "2",
    "--node-rank",
    "$(LWS_WORKER_INDEX)",
    "--dist-init-addr",
    "$(LWS_LEADER_ADDRESS):20000",
]


def lws(max_surge: int = 0, max_unavailable: int = 1, tag: str = "a") -> dict[str, Any]:
    """A LeaderWorkerSet of one group of two pods, in the contract's shape (docs/operator.md)."""
    engine = {"name": "engine", "image": "specserver-engine:sim", "args": QWEN_EAGLE3 + MULTINODE}
    init = {"name": "preflight", "image": "specserver-engine:sim", "args": ["preflight"]}
    labels = {**MANAGED, "tag": tag}
    annotations = {"specserver.io/config-hash": tag}
    leader = {
        "metadata": {"labels": labels, "annotations": annotations},
        "spec": {
            "initContainers": [init],
            "containers": [{**engine, "ports": [{"name": "http", "containerPort": 30000}]}],
        },
    }
    worker = {
        "metadata": {"labels": labels, "annotations": annotations},
        "spec": {"containers": [engine]},
    }
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": LWS, "labels": MANAGED},
        "spec": {
            "replicas": 1,
            "startupPolicy": "LeaderCreated",
            "networkConfig": {"subdomainPolicy": "Shared"},
            "rolloutStrategy": {
                "type": "RollingUpdate",
                "rollingUpdateConfiguration": {
                    "partition": 0,
                    "maxUnavailable": max_unavailable,
                    "maxSurge": max_surge,
                },
            },
            "leaderWorkerTemplate": {
                "size": 2,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": leader,
                "workerTemplate": worker,
            },
        },
    }


@pytest.fixture
def agent(kube: KubeHandle, tmp_path: Path) -> Iterator[Path]:
    """The node agent (kubelet + LWS stand-in) as a process; its state directory."""
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
            "20",
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


def pods(kube: KubeHandle, ns: str) -> list[dict[str, Any]]:
    done = kube.kubectl(
        "get", "pods", "-n", ns, "-l", "leaderworkerset.sigs.k8s.io/name", "-o", "json"
    )
    return list(json.loads(done.stdout)["items"])


def live(kube: KubeHandle, ns: str) -> dict[str, dict[str, Any]]:
    return {
        p["metadata"]["name"]: p
        for p in pods(kube, ns)
        if not p["metadata"].get("deletionTimestamp")
    }


def ready(pod: dict[str, Any]) -> bool:
    return any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def group_ready(
    kube: KubeHandle, ns: str, names: tuple[str, ...] = (f"{LWS}-0", f"{LWS}-0-1")
) -> Any:
    now = live(kube, ns)
    return all(n in now and ready(now[n]) for n in names) and now


def apply(kube: KubeHandle, ns: str, doc: dict[str, Any]) -> None:
    kube.kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(doc))


class Watch:
    """Samples the group pods every 0.3 s in the background: which leaders were Ready when."""

    def __init__(self, kube: KubeHandle, ns: str) -> None:
        self.kube, self.ns, self.samples = kube, ns, list[dict[str, tuple[str, bool]]]()
        self.stopping = False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.stopping:
            now = live(self.kube, self.ns)
            self.samples.append(
                {
                    n: (
                        p["metadata"]["labels"][
                            "leaderworkerset.sigs.k8s.io/template-revision-hash"
                        ],
                        ready(p),
                    )
                    for n, p in now.items()
                    if p["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/worker-index"] == "0"
                }
            )
            time.sleep(0.3)

    def stop(self) -> list[dict[str, tuple[str, bool]]]:
        self.stopping = True
        self.thread.join(timeout=10)
        return self.samples


def revision_of(pod: dict[str, Any]) -> str:
    return str(pod["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/template-revision-hash"])


def test_group_pods_status_recreation_roll_and_gc(
    kube: KubeHandle, namespace: str, agent: Path
) -> None:
    apply(kube, namespace, lws())
    # A Service on the leader, as the operator renders it: the agent's endpoints list the leader.
    svc = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "ds", "labels": MANAGED},
        "spec": {
            "selector": {**MANAGED, "leaderworkerset.sigs.k8s.io/worker-index": "0"},
            "ports": [{"name": "http", "port": 30000}],
        },
    }
    apply(kube, namespace, svc)
    now = wait_for(lambda: group_ready(kube, namespace), 120, "the group Ready")
    assert set(now) == {f"{LWS}-0", f"{LWS}-0-1"}
    obj = get(kube, "lws", namespace, LWS)
    assert obj is not None
    leader, worker = now[f"{LWS}-0"], now[f"{LWS}-0-1"]
    address = f"{LWS}-0.{LWS}.{namespace}"
    for pod, index in ((leader, "0"), (worker, "1")):
        meta = pod["metadata"]
        labels = meta["labels"]
        assert labels["leaderworkerset.sigs.k8s.io/name"] == LWS
        assert labels["leaderworkerset.sigs.k8s.io/group-index"] == "0"
        assert labels["leaderworkerset.sigs.k8s.io/worker-index"] == index
        assert labels["leaderworkerset.sigs.k8s.io/group-key"]
        assert labels["leaderworkerset.sigs.k8s.io/template-revision-hash"]
        assert labels["tag"] == "a" and labels["specserver.io/name"] == "ds"
        assert meta["annotations"]["leaderworkerset.sigs.k8s.io/size"] == "2"
        assert meta["annotations"]["specserver.io/config-hash"] == "a"
        (owner,) = meta["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"]) == (
            "LeaderWorkerSet",
            LWS,
            obj["metadata"]["uid"],
        )
        containers = [*(pod["spec"].get("initContainers") or []), *pod["spec"]["containers"]]
        for c in containers:
            env = {e["name"]: e.get("value") for e in c["env"]}
            assert env["LWS_LEADER_ADDRESS"] == address, c["name"]
            assert env["LWS_GROUP_SIZE"] == "2" and env["LWS_WORKER_INDEX"] == index
        assert pod["spec"]["subdomain"] == LWS and pod["spec"]["hostname"] == meta["name"]
    assert len(leader["spec"]["initContainers"]) == 1 and "initContainers" not in worker["spec"]
    assert (
        leader["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/group-key"]
        == worker["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/group-key"]
    )
    assert (
        worker["metadata"]["annotations"]["leaderworkerset.sigs.k8s.io/leader-name"] == f"{LWS}-0"
    )

    # One engine, the leader's, with LWS's references expanded from its env (the kubelet's part).
    endpoints = wait_for(
        lambda: json.loads((agent / "endpoints.json").read_text()).get(f"{namespace}/ds"),
        30,
        "the leader as the Service's endpoint",
    )
    assert len(endpoints) == 1
    with urllib.request.urlopen(f"{endpoints[0]}/server_info", timeout=5) as resp:
        info = json.loads(resp.read())
    assert (info["nnodes"], info["node_rank"], info["tp_size"]) == (2, 0, 2)
    assert info["dist_init_addr"] == f"{address}:20000"

    status = wait_for(
        lambda: (
            (o := get(kube, "lws", namespace, LWS))
            and (o.get("status") or {}).get("readyReplicas") == 1
            and o["status"]
        ),
        30,
        "readyReplicas 1",
    )
    assert (status["replicas"], status["updatedReplicas"]) == (1, 1)
    assert (
        status["hpaPodSelector"]
        == f"leaderworkerset.sigs.k8s.io/name={LWS},leaderworkerset.sigs.k8s.io/worker-index=0"
    )
    conds = {c["type"]: c for c in status["conditions"]}
    assert (
        conds["Available"]["status"],
        conds["Progressing"]["status"],
        conds["UpdateInProgress"]["status"],
    ) == ("True", "False", "False")
    available_since = conds["Available"]["lastTransitionTime"]
    scale = json.loads(
        kube.kubectl(
            "get",
            "--raw",
            f"/apis/leaderworkerset.x-k8s.io/v1/namespaces/{namespace}/leaderworkersets/{LWS}/scale",
        ).stdout
    )
    assert scale["status"]["replicas"] == 1 and "worker-index=0" in scale["status"]["selector"]

    # RecreateGroupOnPodRestart: deleting the worker recreates the whole group (a new leader).
    old_leader = leader["metadata"]["uid"]
    kube.kubectl("delete", "pod", f"{LWS}-0-1", "-n", namespace, "--wait=false")
    wait_for(
        lambda: (
            (g := group_ready(kube, namespace))
            and g[f"{LWS}-0"]["metadata"]["uid"] != old_leader
            and g
        ),
        120,
        "the group recreated and Ready",
    )
    o = wait_for(
        lambda: (
            (o := get(kube, "lws", namespace, LWS))
            and condition(o, "Available")["status"] == "True"
            and o
        ),
        30,
        "Available again",
    )
    assert condition(o, "Available")["lastTransitionTime"] >= available_since

    # A template change without a surge: the group is deleted, then recreated (leaders never
    # overlap, and for a while none is Ready).
    rev_a = revision_of(live(kube, namespace)[f"{LWS}-0"])
    watch = Watch(kube, namespace)
    apply(kube, namespace, lws(tag="b"))
    wait_for(
        lambda: (
            get(kube, "lws", namespace, LWS)["status"].get("conditions")
            and condition(get(kube, "lws", namespace, LWS), "UpdateInProgress")["status"] == "True"
        ),
        30,
        "UpdateInProgress",
    )
    now = wait_for(
        lambda: (g := group_ready(kube, namespace)) and revision_of(g[f"{LWS}-0"]) != rev_a and g,
        120,
        "the group at the new revision",
    )
    samples = watch.stop()
    assert now[f"{LWS}-0-1"]["metadata"]["labels"]["tag"] == "b"
    assert all(len(s) <= 1 for s in samples), "no surge: one leader at a time"
    assert any(not any(r for _, r in s.values()) for s in samples), (
        "no surge: a gap with no Ready leader"
    )
    o = wait_for(
        lambda: (
            (o := get(kube, "lws", namespace, LWS))
            and condition(o, "UpdateInProgress")["status"] == "False"
            and condition(o, "Available")["status"] == "True"
            and o
        ),
        30,
        "the update done and the group Available",
    )
    assert o["status"]["updatedReplicas"] == 1 and o["status"]["readyReplicas"] == 1

    # Deleting the LWS deletes its pods (ownerReference, the controller-manager's GC).
    kube.kubectl("delete", "lws", LWS, "-n", namespace, "--wait=false")
    wait_for(lambda: not pods(kube, namespace), 120, "the group's pods garbage-collected")


@pytest.mark.parametrize(("max_unavailable", "surged"), [(0, True), (1, False)])
def test_roll_with_surge(
    kube: KubeHandle, namespace: str, agent: Path, max_unavailable: int, surged: bool
) -> None:
    """maxSurge 1 with maxUnavailable 0: the surge group at the new revision is Ready before the
    old group goes, so a Ready leader exists throughout. With maxUnavailable 1 one group may be
    down: LWS (and the stand-in) recreate it in place, no surge."""
    apply(kube, namespace, lws(max_surge=1, max_unavailable=max_unavailable))
    rev_a = revision_of(
        wait_for(lambda: group_ready(kube, namespace), 120, "the group Ready")[f"{LWS}-0"]
    )
    watch = Watch(kube, namespace)
    apply(kube, namespace, lws(max_surge=1, max_unavailable=max_unavailable, tag="b"))
    wait_for(
        lambda: (
            (g := group_ready(kube, namespace))
            and revision_of(g[f"{LWS}-0"]) != rev_a
            and f"{LWS}-1" not in g
            and g
        ),
        180,
        "group 0 at the new revision, the surge reclaimed",
    )
    samples = watch.stop()
    seen = set().union(*samples)
    if surged:
        assert f"{LWS}-1" in seen, "a surge group was created"
        assert all(any(r for _, r in s.values()) for s in samples if s), "a Ready leader throughout"
        # The old group went only once the surge group (new revision) was Ready.
        first_gone = next(
            i for i, s in enumerate(samples) if f"{LWS}-0" not in s or s[f"{LWS}-0"][0] != rev_a
        )
        assert samples[first_gone - 1].get(f"{LWS}-1", ("", False))[1]
    else:
        assert f"{LWS}-1" not in seen
        assert any(not any(r for _, r in s.values()) for s in samples)
    o = wait_for(
        lambda: (
            (o := get(kube, "lws", namespace, LWS))
            and condition(o, "Available")["status"] == "True"
            and o["status"]["replicas"] == 1
            and o
        ),
        30,
        "Available, one group",
    )
    assert o["status"]["updatedReplicas"] == 1
