"""A stand-in for LeaderWorkerSet's controller on the dev cluster (no LWS controller runs here).

Dev tooling, not part of the operator: scripts/nodeagent.py calls ``LwsStandIn.step`` every
second, the way it plays the kubelet. For every ``leaderworkerset.x-k8s.io/v1`` object managed by
specserver (CRD: standins/leaderworkerset-crd.yaml) it does what LWS v0.10 documents:

- group g's pods: the leader ``<lws>-<g>`` (worker index 0, from ``leaderTemplate``) and the
  workers ``<lws>-<g>-<w>`` (w = 1..size-1, from ``workerTemplate``), each with the template's
  labels plus ``leaderworkerset.sigs.k8s.io/{name,group-index,worker-index,group-key,
  template-revision-hash}``, the ``leaderworkerset.sigs.k8s.io/size`` annotation (workers also
  ``leader-name``), ``LWS_LEADER_ADDRESS=<lws>-<g>.<lws>.<namespace>``, ``LWS_GROUP_SIZE`` and
  ``LWS_WORKER_INDEX`` in every container (init containers included), hostname/subdomain for the
  shared headless Service, and an ownerReference to the LWS (the garbage collector deletes them
  with it). ``startupPolicy: LeaderReady`` creates the workers once the leader is Ready.
- a template change rolls groups the way LWS's controller does (``rollingUpdateParameters`` of
  its leaderworkerset_controller.go, ported for whole groups): with ``maxSurge`` 0 a group is
  deleted and recreated at the new revision; with a surge, surge groups (indices from
  ``replicas`` up) start at the new revision first, old groups go once the surge covers them, and
  the surge groups are reclaimed once the groups below ``replicas`` are updated and Ready. As in
  LWS, a surge is only used when ``maxUnavailable`` does not already allow the downtime (one group
  with ``maxUnavailable: 1`` is recreated in place whatever ``maxSurge`` says).
- ``restartPolicy: RecreateGroupOnPodRestart``: a pod of a group failing or deleted deletes the
  whole group, which is then recreated.
- the status subresource: ``replicas`` (groups that exist), ``readyReplicas`` (groups whose every
  pod is Ready), ``updatedReplicas`` (groups at the current revision), ``hpaPodSelector`` (the
  leaders), ``observedGeneration`` and the conditions ``Available``, ``Progressing``,
  ``UpdateInProgress`` (``lastTransitionTime`` moves only when a condition's status flips).

The decisions (``desired_pod``, ``roll``, ``actions``, ``lws_status``) are pure; ``LwsStandIn``
does the I/O. Needs the project's virtualenv (kubernetes client).
"""

from __future__ import annotations

import copy
import datetime
import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

GROUP, VERSION, PLURAL = "leaderworkerset.x-k8s.io", "v1", "leaderworkersets"
API_VERSION = f"{GROUP}/{VERSION}"
PREFIX = "leaderworkerset.sigs.k8s.io/"
NAME_LABEL = PREFIX + "name"
GROUP_INDEX_LABEL = PREFIX + "group-index"
WORKER_INDEX_LABEL = PREFIX + "worker-index"
GROUP_KEY_LABEL = PREFIX + "group-key"
REVISION_LABEL = PREFIX + "template-revision-hash"
SIZE_ANNOTATION = PREFIX + "size"
LEADER_NAME_ANNOTATION = PREFIX + "leader-name"
SELECTOR = "app.kubernetes.io/managed-by=specserver"
CONDITION_TYPES = ("Available", "Progressing", "UpdateInProgress")

Obj = dict[str, Any]


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ----------------------------------------------------------------------------- pods (pure)


def revision(lws: Obj) -> str:
    """The template revision: a hash of ``spec.leaderWorkerTemplate`` (what a rollout follows)."""
    template = lws["spec"]["leaderWorkerTemplate"]
    return hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:10]


def size(lws: Obj) -> int:
    return int(lws["spec"]["leaderWorkerTemplate"].get("size") or 1)


def pod_name(lws_name: str, group: int, worker: int) -> str:
    return f"{lws_name}-{group}" if worker == 0 else f"{lws_name}-{group}-{worker}"


def desired_pod(lws: Obj, template_of: Obj, rev: str, group: int, worker: int) -> Obj:
    """Pod ``worker`` of group ``group`` from the LWS's ``leaderWorkerTemplate`` ``template_of``
    (the current one, or the one of an older revision kept for groups below the partition)."""
    meta, name = lws["metadata"], lws["metadata"]["name"]
    namespace = meta["namespace"]
    lwt = template_of
    template = (lwt.get("leaderTemplate") or lwt["workerTemplate"]) if worker == 0 else None
    template = copy.deepcopy(template or lwt["workerTemplate"])
    tmeta = template.get("metadata") or {}
    n = int(lwt.get("size") or 1)
    leader = pod_name(name, group, 0)
    labels = dict(tmeta.get("labels") or {})
    labels.update(
        {
            NAME_LABEL: name,
            GROUP_INDEX_LABEL: str(group),
            WORKER_INDEX_LABEL: str(worker),
            GROUP_KEY_LABEL: hashlib.sha1(f"{namespace}/{leader}".encode()).hexdigest(),
            REVISION_LABEL: rev,
        }
    )
    annotations = dict(tmeta.get("annotations") or {})
    annotations[SIZE_ANNOTATION] = str(n)
    if worker:
        annotations[LEADER_NAME_ANNOTATION] = leader
    env = [
        {"name": "LWS_LEADER_ADDRESS", "value": f"{leader}.{name}.{namespace}"},
        {"name": "LWS_GROUP_SIZE", "value": str(n)},
        {"name": "LWS_WORKER_INDEX", "value": str(worker)},
    ]
    ours = {e["name"] for e in env}
    spec = template.get("spec") or {}
    for key in ("initContainers", "containers"):
        for container in spec.get(key) or []:
            rest = [e for e in container.get("env") or [] if e.get("name") not in ours]
            container["env"] = [*env, *rest]
    spec["hostname"] = pod_name(name, group, worker)
    spec["subdomain"] = name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(name, group, worker),
            "namespace": namespace,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": API_VERSION,
                    "kind": "LeaderWorkerSet",
                    "name": name,
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
    }


def pod_ready(pod: Obj) -> bool:
    """Running, Ready and not terminating."""
    status = pod.get("status") or {}
    if pod["metadata"].get("deletionTimestamp") or status.get("phase") != "Running":
        return False
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


@dataclass
class Group:
    """The pods of one group index as they are now."""

    index: int
    #: worker index -> pod (terminating ones included)
    pods: dict[int, Obj] = field(default_factory=dict)

    def live(self) -> dict[int, Obj]:
        return {w: p for w, p in self.pods.items() if not p["metadata"].get("deletionTimestamp")}

    def revision(self) -> str | None:
        leader = self.live().get(0)
        return (leader or {}).get("metadata", {}).get("labels", {}).get(REVISION_LABEL)

    def ready(self, n: int) -> bool:
        live = self.live()
        return len(live) == n and all(pod_ready(p) for p in live.values())

    def updated(self, rev: str) -> bool:
        live = self.live()
        return bool(live) and all(
            p["metadata"]["labels"].get(REVISION_LABEL) == rev for p in live.values()
        )

    def broken(self, n: int, leader_created: bool) -> bool:
        """A pod failed, or one was deleted while others live: the group restarts as a whole."""
        live = self.live()
        if any((p.get("status") or {}).get("phase") == "Failed" for p in live.values()):
            return True
        if not live:
            return False
        if 0 not in live:
            return True
        if leader_created:  # all of a group's pods are created together: one missing was deleted
            return len(live) < n
        return len(self.pods) > len(live)


def groups_of(pods: list[Obj]) -> dict[int, Group]:
    out: dict[int, Group] = {}
    for pod in pods:
        labels = pod["metadata"].get("labels") or {}
        g, w = int(labels[GROUP_INDEX_LABEL]), int(labels[WORKER_INDEX_LABEL])
        out.setdefault(g, Group(g)).pods[w] = pod
    return out


# ----------------------------------------------------------------------------- rolling (pure)


@dataclass
class Roll:
    """What LWS keeps in its leader StatefulSet: how many group indices exist and the partition
    (indices below it stay at ``current``, the revision before the rollout)."""

    revision: str
    current: str
    replicas: int
    partition: int
    original_replicas: int
    templates: dict[str, Obj] = field(default_factory=dict)


def _scaled(value: Any, total: int, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        share = int(value[:-1]) * total / 100
        return math.ceil(share) if round_up else math.floor(share)
    return int(value or 0)


def roll(lws: Obj, groups: dict[int, Group], state: Roll | None) -> Roll:
    """The next leader-StatefulSet replicas and partition, as LWS's ``rollingUpdateParameters``."""
    spec, rev, n = lws["spec"], revision(lws), size(lws)
    replicas = int(spec.get("replicas", 1))
    ru = (spec.get("rolloutStrategy") or {}).get("rollingUpdateConfiguration") or {}
    floor = int(ru.get("partition") or 0)
    surge = min(_scaled(ru.get("maxSurge", 0), replicas, True), replicas)
    unavailable = _scaled(ru.get("maxUnavailable", 1), replicas, False)
    template = spec["leaderWorkerTemplate"]

    def want(unready: int) -> int:
        if unready <= surge:
            return replicas + max(0, unready - unavailable)
        return replicas + surge

    if state is None:
        # First sight (or the agent restarted): groups at another revision are an update.
        old = {g.revision() for g in groups.values()} - {rev, None}
        current = next(iter(old)) if old else rev
        top = max([replicas, *[g + 1 for g in groups]])
        state = Roll(current, current, top, 0 if current == rev else top, replicas)
    state.templates.setdefault(rev, template)
    if state.revision != rev:  # a new rolling update (Case 2)
        state.current = state.revision if _all_at(groups, state.revision) else state.current
        state.revision = rev
        state.partition = min(replicas, state.replicas)
        state.replicas = replicas if state.replicas < replicas else want(replicas)
    elif not (state.partition == 0 and state.replicas == replicas):
        if state.replicas < replicas:
            state.replicas = replicas
        else:
            unready = sum(
                1
                for i in range(replicas)
                if i not in groups or not groups[i].ready(n) or not groups[i].updated(rev)
            )
            if state.original_replicas != replicas:
                state.partition = min(state.partition, replicas + surge)
            else:
                step = unavailable + surge - (replicas + surge - state.replicas)
                state.partition = _partition(groups, n, rev, state, step)
            state.replicas = want(unready)
    state.original_replicas = replicas
    state.partition = max(state.partition, floor)
    if state.partition == 0 and state.replicas == replicas and _all_at(groups, rev):
        state.current = rev
        state.templates = {rev: template}
    return state


def _all_at(groups: dict[int, Group], rev: str, upto: int | None = None) -> bool:
    return all(g.updated(rev) for i, g in groups.items() if upto is None or i < upto)


def _partition(groups: dict[int, Group], n: int, rev: str, state: Roll, step: int) -> int:
    """LWS's ``rollingUpdatePartition``: update up to ``step`` groups from the top."""
    total = state.replicas

    def ok(i: int) -> bool:
        return i in groups and groups[i].ready(n) and groups[i].updated(rev)

    tail = 0
    for i in range(total - 1, -1, -1):
        if not ok(i):
            break
        tail += 1
    part = max(0, total - tail - step)
    part += sum(1 for i in range(part) if not (i in groups and groups[i].ready(n)))
    for i in range(min(part, total - 1), part - 1, -1):
        g = groups.get(i)
        if g is None or not g.ready(n) or g.updated(rev):
            part = i
        else:
            break
    return min(part, state.partition)


@dataclass
class Actions:
    """What one step does: pods to create, pod names to delete."""

    create: list[Obj] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)


def actions(lws: Obj, groups: dict[int, Group], state: Roll) -> Actions:
    """The pods to create and delete so the groups follow ``state`` (the StatefulSets' part)."""
    out, n, rev = Actions(), size(lws), state.revision
    lwt = lws["spec"]["leaderWorkerTemplate"]
    restart = lwt.get("restartPolicy", "RecreateGroupOnPodRestart")
    leader_created = lws["spec"].get("startupPolicy", "LeaderCreated") == "LeaderCreated"

    def drop(group: Group) -> None:
        out.delete.extend(p["metadata"]["name"] for p in group.live().values())

    for i, group in groups.items():
        if i >= state.replicas:
            drop(group)  # scaled down, or a surge group reclaimed
        elif restart != "None" and restart != "Default" and group.broken(n, leader_created):
            drop(group)
    # The StatefulSets' part: create what is missing; roll one group at a time from the top,
    # waiting while a group at or above the partition is not Ready.
    waiting = False
    for i in range(state.replicas - 1, -1, -1):
        group = groups.get(i) or Group(i)
        live = group.live()
        if any(p["metadata"]["name"] in out.delete for p in live.values()):
            waiting = True
            continue
        target = rev if i >= state.partition else state.current
        template = state.templates.get(target, lwt)
        if not group.pods:
            workers = range(1, n) if leader_created else range(0)
            out.create.extend(desired_pod(lws, template, target, i, w) for w in (0, *workers))
            waiting = True
            continue
        if not live:  # its pods are still terminating
            waiting = True
            continue
        if i >= state.partition and not group.updated(rev):
            if not waiting:
                drop(group)
            waiting = True
            continue
        if not leader_created and 0 in live and pod_ready(live[0]):
            out.create.extend(
                desired_pod(lws, template, target, i, w) for w in range(1, n) if w not in group.pods
            )
        if not group.ready(n):
            waiting = True
    return out


# ----------------------------------------------------------------------------- status (pure)


def lws_status(lws: Obj, groups: dict[int, Group], now: str) -> Obj:
    """The LWS status LWS's controller writes (``updateStatus``/``updateConditions``)."""
    spec, rev, n = lws["spec"], revision(lws), size(lws)
    replicas = int(spec.get("replicas", 1))
    ru = (spec.get("rolloutStrategy") or {}).get("rollingUpdateConfiguration") or {}
    floor = int(ru.get("partition") or 0)
    existing = {i: g for i, g in groups.items() if 0 in g.live()}
    ready = [i for i, g in existing.items() if g.ready(n)]
    updated = [i for i, g in existing.items() if g.updated(rev)]
    current = [i for i in existing if floor <= i < replicas]
    updating = sum(1 for i in current if i not in updated) > 0
    available = not updating and all(
        i in ready and (i < floor or i in updated) for i in range(replicas)
    )
    flags = {
        "Available": available,
        "Progressing": not available,
        "UpdateInProgress": updating,
    }
    reasons = {
        "Available": ("AllGroupsReady", "All replicas are ready"),
        "Progressing": ("GroupsProgressing", "Replicas are progressing"),
        "UpdateInProgress": ("GroupsUpdating", "Rolling Upgrade is in progress"),
    }
    old = {c["type"]: c for c in (lws.get("status") or {}).get("conditions") or []}
    generation = int(lws["metadata"].get("generation") or 0)
    conditions = []
    for kind in CONDITION_TYPES:
        status = "True" if flags[kind] else "False"
        before = old.get(kind)
        flipped = before is None or before.get("status") != status
        conditions.append(
            {
                "type": kind,
                "status": status,
                "reason": reasons[kind][0] if flags[kind] else f"Not{kind}",
                "message": reasons[kind][1] if flags[kind] else f"{kind} is false",
                "observedGeneration": generation,
                "lastTransitionTime": now if flipped else before["lastTransitionTime"],
            }
        )
    name = lws["metadata"]["name"]
    return {
        "replicas": len(existing),
        "readyReplicas": len(ready),
        "updatedReplicas": len(updated),
        "hpaPodSelector": f"{NAME_LABEL}={name},{WORKER_INDEX_LABEL}=0",
        "observedGeneration": generation,
        "conditions": conditions,
    }


# ----------------------------------------------------------------------------- I/O


@dataclass
class LwsStandIn:
    """Plays LWS's controller against the apiserver; ``step`` once a second."""

    core: client.CoreV1Api
    custom: client.CustomObjectsApi
    rolls: dict[str, Roll] = field(default_factory=dict)

    def step(self) -> None:
        try:
            found = self.custom.list_cluster_custom_object(
                GROUP, VERSION, PLURAL, label_selector=SELECTOR
            )
        except ApiException as exc:
            if exc.status == 404:  # the stand-in CRD is not installed: nothing to play
                return
            raise
        items = found.get("items") or []
        pods_raw = self.core.list_pod_for_all_namespaces(
            label_selector=NAME_LABEL, _preload_content=False
        )
        pods = json.loads(pods_raw.data)["items"]
        seen = set()
        for lws in items:
            meta = lws["metadata"]
            if meta.get("deletionTimestamp"):
                continue
            seen.add(meta["uid"])
            mine = [
                p
                for p in pods
                if p["metadata"]["namespace"] == meta["namespace"]
                and p["metadata"]["labels"].get(NAME_LABEL) == meta["name"]
                and any(
                    o.get("uid") == meta["uid"] for o in p["metadata"].get("ownerReferences") or []
                )
            ]
            self.reconcile(lws, mine)
        for uid in set(self.rolls) - seen:
            del self.rolls[uid]

    def reconcile(self, lws: Obj, pods: list[Obj]) -> None:
        meta = lws["metadata"]
        groups = groups_of(pods)
        state = roll(lws, groups, self.rolls.get(meta["uid"]))
        self.rolls[meta["uid"]] = state
        todo = actions(lws, groups, state)
        for name in todo.delete:
            try:
                self.core.delete_namespaced_pod(name, meta["namespace"])
            except ApiException as exc:
                if exc.status != 404:
                    raise
        for pod in todo.create:
            try:
                self.core.create_namespaced_pod(meta["namespace"], pod)
            except ApiException as exc:
                if exc.status != 409:  # the name is still held by a terminating pod
                    raise
        status = lws_status(lws, groups, _now())
        if status != _comparable(lws.get("status") or {}, status):
            try:
                self.custom.patch_namespaced_custom_object_status(
                    GROUP, VERSION, meta["namespace"], PLURAL, meta["name"], {"status": status}
                )
            except ApiException as exc:
                if exc.status != 404:
                    raise


def _comparable(old: Obj, new: Obj) -> Obj:
    return {k: old.get(k) for k in new}
