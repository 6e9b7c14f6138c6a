"""Multi-node SpecServers run on a LeaderWorkerSet (issue 27): what is rendered, and how the
pure core plans, repairs, reads and switches it.

The rendered object is held to the shape of the LWS project's published SGLang example
(docs/examples/sglang in kubernetes-sigs/lws): leader and workers run the same launch with
``--dist-init-addr $(LWS_LEADER_ADDRESS):<port> --nnodes N --node-rank $(LWS_WORKER_INDEX)``,
only the leader serves HTTP and is probed, ``/dev/shm`` is a memory emptyDir, ``restartPolicy:
RecreateGroupOnPodRestart``, and a Service selects the leader. LWS's own CRD and webhook admit
it on the real stack (tests/cluster/test_kube_stack.py).
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
from typing import Any

import pytest
import yaml

from specserver_advisor.loaders.configchain import ModelConfigs
from specserver_advisor.loaders.configs import bundled
from specserver_operator.core import status as corestatus
from specserver_operator.core.desired import PassPlan, desired
from specserver_operator.core.drift import drift, owned_digest
from specserver_operator.core.hashes import HASH_ANNOTATION
from specserver_operator.core.observed import Observed
from specserver_operator.core.passcache import PassCache
from specserver_operator.core.statusmodel import serialized
from specserver_operator.kube.objects import slim
from specserver_operator.reconcile.observe import validated
from specserver_operator.reconcile.runsettings import Settings
from stack import REPO

EXAMPLE = REPO / "manifests" / "examples" / "deepseek-v3-nextn-h100-2node.yaml"
NOW, NOW_TS = "2026-11-30T12:00:00Z", 1_800_000_000.0
SETTINGS = Settings()
LWS = "LeaderWorkerSet"


def body(**spec: Any) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    doc["metadata"].update(namespace="llm", uid="u-1", generation=1)
    for key, value in spec.items():
        doc["spec"][key] = value
    return doc


def observed(
    doc: dict[str, Any],
    children: dict[tuple[str, str], dict[str, Any]] | None = None,
    memo: PassCache | None = None,
    absent: frozenset[str] = frozenset(),
) -> Observed:
    memo = memo or PassCache()
    server, invalid = validated(doc, memo)
    assert server is not None, invalid
    target = bundled(server.spec.model.path)
    assert target is not None
    return Observed(
        body=doc,
        server=server,
        invalid=invalid,
        configs=ModelConfigs(target.config, None, None, None, "bundled"),
        children=dict(children or {}),
        autoscalers=[],
        now=NOW,
        now_ts=NOW_TS,
        absent_kinds=absent,
    )


def rendered(plan: PassPlan) -> dict[tuple[str, str], dict[str, Any]]:
    assert plan.rendered is not None
    return {(w.child.kind, w.child.name): plan.rendered.object(w.child) for w in plan.writes}


def applied(plan: PassPlan, ready: bool = True) -> dict[tuple[str, str], dict[str, Any]]:
    """The children as the API server holds them once written (and, ``ready``, rolled out by
    LeaderWorkerSet's controller: every group updated and Ready)."""
    out = {}
    for key, obj in rendered(plan).items():
        obj = copy.deepcopy(obj)
        obj["metadata"].setdefault("annotations", {})[HASH_ANNOTATION] = next(
            w.child.digest for w in plan.writes if (w.child.kind, w.child.name) == key
        )
        obj["metadata"].update(generation=1, resourceVersion="10")
        if obj["kind"] == LWS:
            n = obj["spec"]["replicas"] if ready else 0
            obj["status"] = {"replicas": n, "readyReplicas": n, "updatedReplicas": n}
        out[key] = obj
    return out


def condition(plan: PassPlan, type_: str) -> dict[str, Any]:
    return next(c for c in serialized(plan.status)["conditions"] if c["type"] == type_)


def lws_of(plan: PassPlan, name: str = "deepseek-v3-2node-lws") -> dict[str, Any]:
    return rendered(plan)[(LWS, name)]


def test_the_example_renders_one_leaderworkerset_of_two_and_a_service_on_its_leader() -> None:
    plan = desired(observed(body()), SETTINGS, PassCache())
    kids = rendered(plan)
    assert sorted(kids) == [(LWS, "deepseek-v3-2node-lws"), ("Service", "deepseek-v3-2node")]
    lws = kids[(LWS, "deepseek-v3-2node-lws")]
    assert lws["apiVersion"] == "leaderworkerset.x-k8s.io/v1"
    spec = lws["spec"]
    group = spec["leaderWorkerTemplate"]
    assert (spec["replicas"], group["size"]) == (1, 2)
    assert group["restartPolicy"] == "RecreateGroupOnPodRestart"
    assert spec["startupPolicy"] == "LeaderCreated"
    assert spec["networkConfig"] == {"subdomainPolicy": "Shared"}
    assert spec["rolloutStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdateConfiguration": {"partition": 0, "maxUnavailable": 1, "maxSurge": 0},
    }
    leader, worker = group["leaderTemplate"], group["workerTemplate"]
    lead, work = leader["spec"]["containers"][0], worker["spec"]["containers"][0]
    # One launch on every pod of the group, with LWS's environment for its place in it.
    assert lead["args"] == work["args"] and lead["command"] == work["command"]
    assert lead["image"] == work["image"] and lead["env"] == work["env"]
    args = lead["args"]
    flags = dict(itertools.pairwise(args))
    assert flags["--nnodes"] == "2" and flags["--tp-size"] == "16"
    assert flags["--node-rank"] == "$(LWS_WORKER_INDEX)"
    assert flags["--dist-init-addr"] == "$(LWS_LEADER_ADDRESS):20000"
    assert flags["--max-running-requests"] == "64"
    # Only the leader serves the API (the named port the Service and PodMonitor use); a
    # worker is probed on SGLang's health-only server at its --port, up once its schedulers
    # are (engine.py, launch_dummy_health_check_server); every pod checks its own files.
    assert lead["ports"] == [{"name": "http", "containerPort": 30000, "protocol": "TCP"}]
    assert {"startupProbe", "readinessProbe", "livenessProbe"} <= set(lead)
    assert not {"ports", "livenessProbe"} & set(work)
    for probe in ("startupProbe", "readinessProbe"):
        assert work[probe]["httpGet"] == {"path": "/health", "port": 30000}
    assert [c["name"] for c in leader["spec"]["initContainers"]] == ["preflight"]
    assert [c["name"] for c in worker["spec"]["initContainers"]] == ["preflight"]
    for pod in (leader["spec"], worker["spec"]):
        engine = pod["containers"][0]
        assert engine["resources"]["limits"]["nvidia.com/gpu"] == "8"  # gpus / nodes per pod
        shm = next(v for v in pod["volumes"] if v["name"] == "shm")["emptyDir"]
        assert shm["medium"] == "Memory"
        assert {"name": "shm", "mountPath": "/dev/shm"} in engine["volumeMounts"]
    digest = lws["metadata"]["annotations"]["specserver.io/config-hash"]
    for template in (leader, worker):
        assert template["metadata"]["annotations"]["specserver.io/config-hash"] == digest
        assert template["metadata"]["labels"]["specserver.io/name"] == "deepseek-v3-2node"
    service = kids[("Service", "deepseek-v3-2node")]
    assert service["spec"]["selector"] == {
        "specserver.io/name": "deepseek-v3-2node",
        "leaderworkerset.sigs.k8s.io/worker-index": "0",
    }
    assert lws["metadata"]["ownerReferences"][0]["uid"] == "u-1"


def test_rolling_update_surges_a_group_only_when_the_spec_says_one_is_spare() -> None:
    def surge(**auto: Any) -> Any:
        doc = body(autoSpeculation={"switchStrategy": "RollingUpdate", **auto})
        plan = desired(observed(doc), SETTINGS, PassCache())
        return lws_of(plan)["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]["maxSurge"]

    assert surge() == 0  # a spare group is a whole set of nodes: not assumed
    assert surge(maxSurge=1) == 1
    with pytest.raises(AssertionError, match="maxSurge"):
        surge(maxSurge=2)


def test_blue_green_renders_two_leaderworkersets_and_the_service_on_the_serving_leader() -> None:
    doc = body(autoSpeculation={"switchStrategy": "BlueGreen"})
    plan = desired(observed(doc), SETTINGS, PassCache())
    kids = rendered(plan)
    assert sorted(kids) == [
        (LWS, "deepseek-v3-2node-off"),
        (LWS, "deepseek-v3-2node-on"),
        ("Service", "deepseek-v3-2node"),
    ]
    assert kids[(LWS, "deepseek-v3-2node-on")]["spec"]["replicas"] == 1
    assert kids[(LWS, "deepseek-v3-2node-off")]["spec"]["replicas"] == 0
    off_args = kids[(LWS, "deepseek-v3-2node-off")]["spec"]["leaderWorkerTemplate"]
    assert (
        "--speculative-algorithm" not in off_args["workerTemplate"]["spec"]["containers"][0]["args"]
    )
    assert kids[("Service", "deepseek-v3-2node")]["spec"]["selector"] == {
        "specserver.io/name": "deepseek-v3-2node",
        "specserver.io/mode": "on",
        "leaderworkerset.sigs.k8s.io/worker-index": "0",
    }


def test_a_settled_leaderworkerset_is_ready_and_costs_no_write() -> None:
    memo = PassCache()
    kids = applied(desired(observed(body()), SETTINGS, memo))
    plan = desired(observed(body(), kids, memo), SETTINGS, memo)
    assert plan.writes == [] and plan.deletions == []
    assert condition(plan, "Ready")["status"] == "True"
    assert "1/1 engine groups ready" in condition(plan, "Ready")["message"]


def test_a_hand_edited_leaderworkerset_is_repaired() -> None:
    memo = PassCache()
    kids = applied(desired(observed(body()), SETTINGS, memo))
    key = (LWS, "deepseek-v3-2node-lws")
    for edit in ("worker args", "size", "replicas"):
        edited = copy.deepcopy(kids)
        lws = edited[key]
        group = lws["spec"]["leaderWorkerTemplate"]
        if edit == "worker args":
            group["workerTemplate"]["spec"]["containers"][0]["args"].remove("--enable-metrics")
        elif edit == "size":
            group["size"] = 1
        else:
            lws["spec"]["replicas"] = 3
        plan = desired(observed(body(), edited, memo), SETTINGS, memo)
        repairs = {(w.child.kind, w.child.name): w.repair for w in plan.writes}
        assert repairs.get(key), edit  # written again, as a repair
        # The cache's slim copy sees the same edit.
        child = next(w.child for w in plan.writes if (w.child.kind, w.child.name) == key)
        assert drift(LWS, slim(LWS, lws), child.owned, child.replicas) is not None


def test_what_the_api_server_keeps_of_a_leaderworkerset_is_not_drift() -> None:
    lws = lws_of(desired(observed(body()), SETTINGS, PassCache()))
    live = copy.deepcopy(lws)
    for role in ("leaderTemplate", "workerTemplate"):
        for c in live["spec"]["leaderWorkerTemplate"][role]["spec"]["containers"]:
            for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                if probe in c:
                    c[probe].update(timeoutSeconds=c[probe].get("timeoutSeconds", 1))
                    c[probe]["httpGet"]["scheme"] = "HTTP"
    live["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]["maxSurge"] = "0"
    assert drift(LWS, live, lws, 1) is None
    assert owned_digest(LWS, slim(LWS, live)) == owned_digest(LWS, lws)


def lws_status(**status: Any) -> dict[str, Any]:
    return {"kind": LWS, "metadata": {"generation": 2}, "status": status}


def test_lws_readiness_reads_ready_and_updated_groups() -> None:
    state = corestatus.deployment_state
    assert state(lws_status(readyReplicas=2, updatedReplicas=2), 2)[0]
    assert not state(lws_status(readyReplicas=2, updatedReplicas=1), 2)[0]  # one group old
    assert not state(lws_status(readyReplicas=1, updatedReplicas=2), 2)[0]
    rolling = [{"type": "UpdateInProgress", "status": "True"}]
    assert not state(lws_status(readyReplicas=2, updatedReplicas=2, conditions=rolling), 2)[0]
    older = [{"type": "Available", "status": "True", "observedGeneration": 1}]
    assert not state(lws_status(readyReplicas=2, updatedReplicas=2, conditions=older), 2)[0]
    pending = {**lws_status(readyReplicas=2, updatedReplicas=2), "statusPending": True}
    ready, progressing, message = state(pending, 2)
    assert (ready, progressing) == (False, True) and "not reported" in message


class StoreClient:
    """What ``observe_children`` reads: children from a dict (the cache), no autoscalers."""

    def __init__(self, store: dict[tuple[str, str, str], dict[str, Any]]) -> None:
        self.store = store

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.store.get((kind, namespace, name))

    def list_autoscalers(self, namespace: str) -> list[Any]:
        return []


def test_a_template_write_is_not_ready_until_its_controller_writes_after_it() -> None:
    """LWS reports no observedGeneration: the status of the template before the operator's
    write must not count as the new template's (observe.py marks it until a later write)."""
    from specserver_operator.reconcile.observe import note_template_write, observe_children

    memo = PassCache()
    before = {
        "kind": LWS,
        "metadata": {"name": "deepseek-v3-2node-lws", "generation": 1, "resourceVersion": "10"},
        "status": {"readyReplicas": 1, "updatedReplicas": 1},
    }
    store = {(LWS, "llm", "deepseek-v3-2node-lws"): before}

    client: Any = StoreClient(store)
    written = copy.deepcopy(before)
    written["metadata"].update(generation=2, resourceVersion="11")  # our template write
    store[(LWS, "llm", "deepseek-v3-2node-lws")] = written
    note_template_write(memo, before, written, LWS, "llm", "deepseek-v3-2node-lws")
    found, _ = observe_children(client, "llm", "deepseek-v3-2node", NOW_TS, memo)
    assert not corestatus.deployment_state(found[(LWS, "deepseek-v3-2node-lws")], 1)[0]
    reported = copy.deepcopy(written)
    reported["metadata"]["resourceVersion"] = "12"  # the controller's status write
    store[(LWS, "llm", "deepseek-v3-2node-lws")] = reported
    found, _ = observe_children(client, "llm", "deepseek-v3-2node", NOW_TS, memo)
    assert corestatus.deployment_state(found[(LWS, "deepseek-v3-2node-lws")], 1)[0]


def test_the_controllers_write_seen_before_our_answer_is_not_taken_for_ours() -> None:
    """The watch can bring the controller's status write (12) into the cache before the
    operator notes its own template write (11): the note is the write's answer, so the status
    at 12 counts (reading the cache back would note 12 and wait forever for a later write)."""
    from specserver_operator.reconcile.observe import note_template_write, observe_children

    memo = PassCache()
    key = (LWS, "llm", "deepseek-v3-2node-lws")
    before = {
        "kind": LWS,
        "metadata": {"name": key[2], "generation": 1, "resourceVersion": "10"},
        "status": {"readyReplicas": 1, "updatedReplicas": 1},
    }
    answer = copy.deepcopy(before)
    answer["metadata"].update(generation=2, resourceVersion="11")
    reported = copy.deepcopy(answer)
    reported["metadata"]["resourceVersion"] = "12"
    store = {key: reported}  # the cache already holds the controller's write

    client: Any = StoreClient(store)
    note_template_write(memo, before, answer, LWS, "llm", key[2])
    assert memo.template_writes[key] == "11"
    found, _ = observe_children(client, "llm", "deepseek-v3-2node", NOW_TS, memo)
    assert corestatus.deployment_state(found[(LWS, key[2])], 1)[0]
    assert key not in memo.template_writes


def test_no_leaderworkerset_crd_is_a_clear_condition_and_no_write() -> None:
    plan = desired(observed(body(), absent=frozenset({LWS})), SETTINGS, PassCache())
    assert plan.writes == [] and plan.deletions == []
    ready = condition(plan, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "LeaderWorkerSetMissing")
    assert (
        "LeaderWorkerSet v0.10" in ready["message"] and "spec.resources.nodes" in ready["message"]
    )
    assert any(e[1] == "LeaderWorkerSetMissing" for e in plan.status_events + plan.events)
    # A single-node SpecServer in the same cluster is not affected.
    single = body(resources={"gpus": 8, "gpuType": "H200"})
    one = desired(observed(single, absent=frozenset({LWS})), SETTINGS, PassCache())
    assert sorted(w.child.kind for w in one.writes) == ["Deployment", "Service"]


def test_going_multi_node_keeps_the_deployment_serving_until_the_group_is_ready() -> None:
    memo = PassCache()
    single = body(resources={"gpus": 8, "gpuType": "H200"})
    first = desired(observed(single), SETTINGS, memo)
    kids = {}
    for key, obj in rendered(first).items():
        obj = copy.deepcopy(obj)
        obj["metadata"]["generation"] = 1
        if obj["kind"] == "Deployment":
            obj["status"] = {"readyReplicas": 1, "updatedReplicas": 1, "observedGeneration": 1}
        kids[key] = obj
    multi = body()
    multi["metadata"]["generation"] = 2
    plan = desired(observed(multi, kids, memo), SETTINGS, memo)
    new = rendered(plan)
    assert (LWS, "deepseek-v3-2node-lws") in new
    # The Service still selects the Deployment's pods; nothing is deleted yet.
    assert new[("Service", "deepseek-v3-2node")]["spec"]["selector"] == {
        "specserver.io/name": "deepseek-v3-2node"
    }
    assert plan.deletions == []
    kids.update(applied(plan))
    plan = desired(observed(multi, kids, memo), SETTINGS, memo)
    assert plan.deletions == [("Deployment", "deepseek-v3-2node")]
    service = rendered(plan)[("Service", "deepseek-v3-2node")]
    assert service["spec"]["selector"]["leaderworkerset.sigs.k8s.io/worker-index"] == "0"


def test_the_engine_podmonitor_scrapes_leaders_only() -> None:
    """prometheus-operator keeps a PodMonitor endpoint's ``port`` by container port name: the
    engine PodMonitor names ``http``, which only the leader's engine container has."""
    monitor = yaml.safe_load((REPO / "manifests" / "monitoring" / "podmonitor.yaml").read_text())
    ports = {e["port"] for e in monitor["spec"]["podMetricsEndpoints"]}
    assert ports == {"http"}
    group = lws_of(desired(observed(body()), SETTINGS, PassCache()))["spec"]["leaderWorkerTemplate"]

    def named(role: str) -> set[str]:
        pod = group[role]["spec"]
        return {p["name"] for c in pod["containers"] for p in c.get("ports") or []}

    assert named("leaderTemplate") == {"http"} and named("workerTemplate") == set()


def test_rbac_lets_the_operator_manage_leaderworkersets() -> None:
    docs = [d for d in yaml.safe_load_all((REPO / "manifests" / "rbac.yaml").read_text()) if d]
    rules = [r for d in docs if d["kind"] == "ClusterRole" for r in d.get("rules") or []]
    verbs = {
        v
        for r in rules
        if "leaderworkerset.x-k8s.io" in r["apiGroups"] and "leaderworkersets" in r["resources"]
        for v in r["verbs"]
    }
    # what the operator does to a Deployment, no more (it patches, never PUTs)
    assert verbs == {"get", "list", "watch", "create", "patch", "delete"}


def test_a_deployment_without_a_spare_gpu_rolls_the_old_pod_first() -> None:
    """``maxSurge: 0`` on one node: a valid Deployment rollout (Kubernetes refuses both 0)."""
    import kubernetes_validate

    def rollout(**auto: Any) -> dict[str, Any]:
        doc = body(
            resources={"gpus": 8, "gpuType": "H200"},
            autoSpeculation={"switchStrategy": "RollingUpdate", **auto},
        )
        plan = desired(observed(doc), SETTINGS, PassCache())
        deployment = rendered(plan)[("Deployment", "deepseek-v3-2node")]
        kubernetes_validate.validate(deployment, "1.25.0", strict=True)
        return dict(deployment["spec"]["strategy"]["rollingUpdate"])

    assert rollout() == {"maxSurge": 1, "maxUnavailable": 0}
    assert rollout(maxSurge=0) == {"maxSurge": 0, "maxUnavailable": 1}


def test_an_hpa_on_the_leaderworkerset_owns_its_replicas_and_is_reported() -> None:
    """LWS has a scale subresource, so an HPA may scale the groups: the operator then leaves
    their count alone (it resets it without one) and says so in AutoscalerPresent; the
    autoscalers are listed for a SpecServer whose only workload is a LeaderWorkerSet."""
    from specserver_operator.reconcile.observe import observe_children

    memo = PassCache()
    kids = applied(desired(observed(body()), SETTINGS, memo))
    key = (LWS, "deepseek-v3-2node-lws")
    kids[key]["spec"]["replicas"] = 3  # the HPA scaled the groups out
    hpa = ("HorizontalPodAutoscaler", "ds", LWS, "deepseek-v3-2node-lws")

    class Client:
        def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
            return kids.get((kind, name))

        def list_autoscalers(self, namespace: str) -> list[Any]:
            return [hpa]

    _, listed = observe_children(Client(), "llm", "deepseek-v3-2node", NOW_TS, memo)  # type: ignore[arg-type]
    assert listed == [hpa]
    without = desired(observed(body(), kids, memo), SETTINGS, memo)
    assert any((w.child.kind, w.child.name) == key and w.repair for w in without.writes)
    scaled = dataclasses.replace(observed(body(), kids, memo), autoscalers=[hpa])
    plan = desired(scaled, SETTINGS, memo)
    assert not any((w.child.kind, w.child.name) == key for w in plan.writes)
    present = condition(plan, "AutoscalerPresent")
    assert (present["status"], present["reason"]) == ("True", "AutoscalerTargetsEngine")
