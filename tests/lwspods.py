"""The pods LeaderWorkerSet v0.9.0 makes of one group of a LeaderWorkerSet, for the fast tier
(no control plane): what its controller and pod webhook set (pkg/utils/pod/pod_utils.go,
``AddLWSVariables``: LWS_LEADER_ADDRESS, LWS_GROUP_SIZE, LWS_WORKER_INDEX first in every
container's and init container's env, replacing any of those names the template sets; the
name, group-index and worker-index labels; the size annotation; the shared headless Service as
the subdomain). The cluster tier reads the real controller's pods instead
(tests/cluster/test_hostile_tenants_third_e2e.py, tests/cluster/test_kube_stack.py)."""

from __future__ import annotations

import copy
from typing import Any

NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
SIZE_ANNOTATION = "leaderworkerset.sigs.k8s.io/size"
LEADER_NAME_ANNOTATION = "leaderworkerset.sigs.k8s.io/leader-name"


def pod_name(lws_name: str, group: int, worker: int) -> str:
    """The leader is ``<lws>-<group>``, worker ``i`` ``<lws>-<group>-<i>``."""
    return f"{lws_name}-{group}" if worker == 0 else f"{lws_name}-{group}-{worker}"


def group_pods(lws: dict[str, Any], group: int = 0) -> list[dict[str, Any]]:
    """Every pod of group ``group``, leader first."""
    meta = lws["metadata"]
    name, namespace = meta["name"], meta.get("namespace", "default")
    lwt = lws["spec"]["leaderWorkerTemplate"]
    size = int(lwt.get("size") or 1)
    leader = pod_name(name, group, 0)
    pods = []
    for worker in range(size):
        source = lwt.get("leaderTemplate") if worker == 0 else None
        template = copy.deepcopy(source or lwt["workerTemplate"])
        tmeta = template.get("metadata") or {}
        labels = {
            **(tmeta.get("labels") or {}),
            NAME_LABEL: name,
            GROUP_INDEX_LABEL: str(group),
            WORKER_INDEX_LABEL: str(worker),
        }
        annotations = {**(tmeta.get("annotations") or {}), SIZE_ANNOTATION: str(size)}
        if worker:
            annotations[LEADER_NAME_ANNOTATION] = leader
        ours = [
            {"name": "LWS_LEADER_ADDRESS", "value": f"{leader}.{name}.{namespace}"},
            {"name": "LWS_GROUP_SIZE", "value": str(size)},
            {"name": "LWS_WORKER_INDEX", "value": str(worker)},
        ]
        names = {e["name"] for e in ours}
        spec = template.get("spec") or {}
        for key in ("containers", "initContainers"):
            for container in spec.get(key) or []:
                rest = [e for e in container.get("env") or [] if e.get("name") not in names]
                container["env"] = [*copy.deepcopy(ours), *rest]
        spec["hostname"] = pod_name(name, group, worker)
        spec["subdomain"] = name
        pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": pod_name(name, group, worker),
                    "namespace": namespace,
                    "labels": labels,
                    "annotations": annotations,
                },
                "spec": spec,
            }
        )
    return pods
