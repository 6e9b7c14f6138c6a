"""A multi-node SpecServer on the real local stack becomes one LeaderWorkerSet (issue 27).

The real operator (the shared operator: tests/cluster/conftest.py) against the real apiserver and
kube-controller-manager (its garbage collector deletes what the SpecServer owns), with
LeaderWorkerSet's own CRD and controller (scripts/devcluster.py installs and runs them): the
apiserver validates and stores the rendered LWS under that schema, through LWS's webhooks. No
node agent runs here, so no group's pods run; what is asserted is what the operator writes and
repairs.
"""

from __future__ import annotations

import itertools
import json
import time

import pytest
import yaml
from test_operator_e2e import get

from stack import REPO, KubeHandle, Operator, wait_for

pytestmark = pytest.mark.cluster

EXAMPLE = REPO / "manifests" / "examples" / "deepseek-v3-nextn-h100-2node.yaml"
NAME = "deepseek-v3-2node"
LWS = f"{NAME}-lws"
LWS_RESOURCE = "leaderworkersets.leaderworkerset.x-k8s.io"


def flags(args: list[str]) -> dict[str, str]:
    return {a: b for a, b in itertools.pairwise(args) if a.startswith("--")}


def test_the_example_becomes_one_leaderworkerset_repaired_and_collected(
    kube: KubeHandle, namespace: str, operator: Operator
) -> None:
    kube.kubectl("apply", "-n", namespace, "-f", str(EXAMPLE))
    lws = wait_for(lambda: get(kube, LWS_RESOURCE, namespace, LWS), 90, "the LeaderWorkerSet")
    assert get(kube, "deployment", namespace, NAME) is None  # not a Deployment
    group = lws["spec"]["leaderWorkerTemplate"]
    assert group["size"] == 2 and lws["spec"]["replicas"] == 1
    assert group["restartPolicy"] == "RecreateGroupOnPodRestart"
    leader = group["leaderTemplate"]["spec"]["containers"][0]
    worker = group["workerTemplate"]["spec"]["containers"][0]
    assert leader["args"] == worker["args"]  # one launch on every pod of the group
    launch = flags(leader["args"])
    assert launch["--nnodes"] == "2" and launch["--tp-size"] == "16"
    assert launch["--node-rank"] == "$(LWS_WORKER_INDEX)"
    assert launch["--dist-init-addr"] == "$(LWS_LEADER_ADDRESS):20000"
    assert launch["--max-running-requests"] == "64"
    assert [p["name"] for p in leader["ports"]] == ["http"] and "ports" not in worker
    service = wait_for(lambda: get(kube, "service", namespace, NAME), 30, "the Service")
    assert service["spec"]["selector"] == {
        "specserver.io/name": NAME,
        "leaderworkerset.sigs.k8s.io/worker-index": "0",
    }
    sps = get(kube, "sps", namespace, NAME)
    assert (
        sps is not None and lws["metadata"]["ownerReferences"][0]["uid"] == sps["metadata"]["uid"]
    )

    # A hand edit of the worker's launch and of the group size: repaired within one cycle.
    patch = [
        {"op": "replace", "path": "/spec/leaderWorkerTemplate/size", "value": 3},
        {
            "op": "replace",
            "path": "/spec/leaderWorkerTemplate/workerTemplate/spec/containers/0/args",
            "value": ["--model-path", "deepseek-ai/DeepSeek-V3"],
        },
    ]
    cycles = operator.metric("specserver_cycles_total")
    # The object as the patch stored it (a read after it may already see the repair).
    edited = json.loads(
        kube.kubectl(
            "patch", LWS_RESOURCE, LWS, "-n", namespace, "--type=json", "-p", json.dumps(patch),
            "-o", "json",
        ).stdout
    )  # fmt: skip
    assert edited["spec"]["leaderWorkerTemplate"]["size"] == 3
    edited_at = time.monotonic()

    def repaired() -> dict[str, object] | None:
        now = get(kube, LWS_RESOURCE, namespace, LWS)
        group = (now or {}).get("spec", {}).get("leaderWorkerTemplate", {})
        args = group.get("workerTemplate", {}).get("spec", {}).get("containers", [{}])[0]
        return now if group.get("size") == 2 and args.get("args") == leader["args"] else None

    wait_for(repaired, 30, "the hand-edited LeaderWorkerSet repaired")
    # The cycle under way when the edit landed, then one more: no later than that.
    assert operator.metric("specserver_cycles_total") - cycles <= 2, time.monotonic() - edited_at

    kube.kubectl("delete", "sps", NAME, "-n", namespace, "--wait=true", "--timeout=60s")
    wait_for(
        lambda: get(kube, LWS_RESOURCE, namespace, LWS) is None,
        60,
        "the LeaderWorkerSet collected with its SpecServer",
    )


def test_the_example_is_accepted_by_kubectl_as_shipped(kube: KubeHandle, namespace: str) -> None:
    doc = yaml.safe_load(EXAMPLE.read_text())
    done = kube.kubectl("apply", "--dry-run=server", "-n", namespace, "-f", str(EXAMPLE))
    assert doc["metadata"]["name"] in done.stdout
