"""The workload kinds that run an engine, in one table (pure), as kube-linter keeps its object
kinds: the next kind is one entry here.

Each ``WorkloadKind`` says where the kind is on the API (group/version, plural, whether it is a
CustomResource a cluster may lack), when it runs (``resources.nodes``), what its Recreate /
RollingUpdate workload is called, which template renders it, when it is Ready (its status as its
controller writes it), which pods are its own (``pod_selector``), its rollout rules (the surge a
RollingUpdate starts by default, whether the Service keeps another kind's pods until it is
Ready, whether its status must be read again after a template write), the fields of it the
operator owns (drift.py), where Kueue reads the queue labels of it, and how its own scheduling
causes are read (a quota refusal: which condition or which events; blocked.py reads the pods).
render.py, status.py, children.py, drift.py, observed.py, reconcile/observe.py and kube/ read
this table instead of naming kinds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from specserver_operator.core.names import lws_name

DEPLOYMENT = "Deployment"
LEADER_WORKER_SET = "LeaderWorkerSet"

#: LeaderWorkerSet's label on every pod of a group: "0" on the leader (LWS v1).
WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"

#: Key of the observed copy of a workload whose status predates the operator's last template
#: write (observe.py marks it, for kinds with ``status_after_write``): that status describes
#: the template before.
STATUS_PENDING_KEY = "statusPending"

#: The labels Kueue reads on a workload (its Deployment and LeaderWorkerSet integrations).
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
QUEUE_LABELS = (QUEUE_LABEL, PRIORITY_LABEL)

#: Where a workload's quota refusal shows: a condition of the workload (its type, and the
#: apiserver's words inside it), or a ``FailedCreate`` event of the workload or of the objects
#: its controller creates (the kinds, named after the workload).
QUOTA_CONDITION = "ReplicaFailure"
FAILED_CREATE = "FailedCreate"

#: (ready, progressing, message)
State = tuple[bool, bool, str]
#: The projection of a pod spec drift.py compares (passed in: drift.py owns it).
PodView = Callable[[dict[str, Any] | None], dict[str, Any]]


def deployment_state(deployment: dict[str, Any], replicas: int) -> State:
    """A Deployment's readiness: every replica ready and the status about the current
    generation (``observedGeneration``)."""
    st = deployment.get("status") or {}
    ready = int(st.get("readyReplicas") or 0)
    updated = int(st.get("updatedReplicas") or 0)
    observed = st.get("observedGeneration") == deployment["metadata"].get("generation")
    progressing = not observed or updated < replicas or ready < replicas
    if replicas == 0:
        return True, False, "scaled to zero"
    return ready >= replicas and observed, progressing, f"{ready}/{replicas} engine replicas ready"


def lws_state(lws: dict[str, Any], replicas: int) -> State:
    """(ready, progressing, message) from a LeaderWorkerSet's status (LWS v1).

    What LeaderWorkerSet reports: ``replicas`` (groups that exist), ``readyReplicas`` (groups
    whose every pod is Ready), ``updatedReplicas`` (groups at the current template revision)
    and conditions (``Available``, ``Progressing``, ``UpdateInProgress``); unlike a Deployment
    it reports no ``observedGeneration``, so a status alone cannot say which template it is
    about. Right after a template write the status still counts the old groups as updated and
    ready: the operator notes its own template writes (the resourceVersion written, apply.py)
    and observe.py marks an LWS whose status nobody wrote since (``STATUS_PENDING_KEY``); such
    a status is read as not ready. Where a condition does carry ``observedGeneration`` (its
    type allows one), an older one is read the same way. Ready: every group is at the current
    template and ready, and no rollout is reported in progress.
    """
    st = lws.get("status") or {}
    ready = int(st.get("readyReplicas") or 0)
    updated = int(st.get("updatedReplicas") or 0)
    generation = (lws.get("metadata") or {}).get("generation")
    seen = [
        c.get("observedGeneration")
        for c in st.get("conditions") or []
        if isinstance(c, dict) and c.get("observedGeneration") is not None
    ]
    current = not lws.get(STATUS_PENDING_KEY) and all(g == generation for g in seen)
    rolling = any(
        isinstance(c, dict) and c.get("type") == "UpdateInProgress" and c.get("status") == "True"
        for c in st.get("conditions") or []
    )
    if replicas == 0:
        return True, False, "scaled to zero"
    if not current:
        return False, True, "the LeaderWorkerSet controller has not reported on the new template"
    done = ready >= replicas and updated >= replicas and not rolling
    return done, not done, f"{ready}/{replicas} engine groups ready ({updated} updated)"


def _deployment_pods(workload: dict[str, Any]) -> dict[str, str]:
    selector = ((workload.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    return {str(k): str(v) for k, v in selector.items()}


def _lws_pods(workload: dict[str, Any]) -> dict[str, str]:
    # LeaderWorkerSet labels every pod of every group with its name (LWS v1).
    return {"leaderworkerset.sigs.k8s.io/name": str(workload["metadata"]["name"])}


def _deployment_owned(spec: dict[str, Any], pod: PodView) -> dict[str, Any]:
    return pod((spec.get("template") or {}).get("spec"))


def _lws_owned(spec: dict[str, Any], pod: PodView) -> dict[str, Any]:
    group = spec.get("leaderWorkerTemplate") or {}
    rollout = (spec.get("rolloutStrategy") or {}).get("rollingUpdateConfiguration") or {}
    return {
        "size": group.get("size", 1),
        "restartPolicy": group.get("restartPolicy"),
        "maxSurge": str(rollout.get("maxSurge", 0)),
        "leader": pod((group.get("leaderTemplate") or {}).get("spec")),
        "worker": pod((group.get("workerTemplate") or {}).get("spec")),
    }


@dataclass(frozen=True)
class WorkloadKind:
    """One kind of engine workload: everything the operator does differently per kind."""

    kind: str
    #: ``group/version`` (``apps/v1``) and the REST plural
    api_version: str
    plural: str
    #: a CustomResource: a cluster without its CRD answers 404 (listed as absent, not an error)
    optional: bool
    #: runs a SpecServer with ``resources.nodes`` > 1 (else: = 1)
    multi_node: bool
    #: the Recreate/RollingUpdate workload's name from the base name
    single_name: Callable[[str], str]
    #: the jinja2 template (core/templates/) that renders it, and the pod specs it takes
    #: (the template's variable, and whether that pod is the one serving HTTP: pod.yaml.j2)
    template: str
    pod_specs: tuple[tuple[str, bool], ...]
    #: the label (and value) the Service adds to select only the serving pod of a group
    leader_selector: tuple[str, str] | None
    #: (ready, progressing, message) from its status and the wanted replicas
    readiness: Callable[[dict[str, Any], int], State]
    #: the labels its controller's pods carry (a subset match selects them)
    pod_selector: Callable[[dict[str, Any]], dict[str, str]]
    #: replicas (pods, or groups) a RollingUpdate starts beside the old by default
    #: (``autoSpeculation.maxSurge`` overrides; 0: the old goes first, so the old mode does
    #: not keep serving): advisor ``launch.multinode.rolling_surge`` prices the same rule
    default_max_surge: int
    #: while it is not Ready, the Service keeps selecting the other kind's Ready pods (the
    #: workload a ``resources.nodes`` change leaves keeps serving: children.py)
    waits_for_other_kind: bool
    #: its status may predate a template write (no observedGeneration): observe.py marks it
    status_after_write: bool
    #: the fields of it drift repair compares (drift.owned_view), and their name in messages
    owned_view: Callable[[dict[str, Any], PodView], dict[str, Any]]
    owned_parts: str
    #: paths (under ``spec``) of its pod templates: the rendered pod labels go in each
    pod_templates: tuple[tuple[str, ...], ...]
    #: Kueue reads the queue labels (kueue.x-k8s.io/queue-name, /priority-class) from the
    #: workload's own metadata.labels (Kueue's Deployment and LeaderWorkerSet integrations);
    #: they are written on its pod templates too where Kueue's webhook would put them (a
    #: Deployment's), never where Kueue must add them itself (a LeaderWorkerSet's)
    queue_labels_on_pods: bool
    #: where a quota refusal of its pods shows: ``QUOTA_CONDITION`` on the workload (a
    #: Deployment's controller copies its ReplicaSet's), else None; and the kinds whose
    #: ``FAILED_CREATE`` events (named as the workload, or its group) carry it
    quota_condition: str | None
    quota_event_kinds: tuple[str, ...]

    @property
    def group(self) -> str:
        """The API group ("" for the core group)."""
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]

    @property
    def base_path(self) -> str:
        """The REST path prefix of its group/version."""
        return f"/apis/{self.api_version}" if self.group else f"/api/{self.version}"


DEPLOYMENT_KIND = WorkloadKind(
    kind=DEPLOYMENT,
    api_version="apps/v1",
    plural="deployments",
    optional=False,
    multi_node=False,
    single_name=lambda base: base,
    template="deployment.yaml.j2",
    pod_specs=(("pod_spec", True),),
    leader_selector=None,
    readiness=deployment_state,
    pod_selector=_deployment_pods,
    default_max_surge=1,
    waits_for_other_kind=False,
    status_after_write=False,
    owned_view=_deployment_owned,
    owned_parts="containers",
    pod_templates=(("template",),),
    queue_labels_on_pods=True,
    quota_condition=QUOTA_CONDITION,
    quota_event_kinds=("ReplicaSet",),
)

LEADER_WORKER_SET_KIND = WorkloadKind(
    kind=LEADER_WORKER_SET,
    api_version="leaderworkerset.x-k8s.io/v1",
    plural="leaderworkersets",
    optional=True,
    multi_node=True,
    # Its controller creates a headless Service named after it, which would clash with the
    # SpecServer's own Service ``<name>``.
    single_name=lws_name,
    template="leaderworkerset.yaml.j2",
    pod_specs=(("leader_pod_spec", True), ("worker_pod_spec", False)),
    leader_selector=(WORKER_INDEX_LABEL, "0"),
    readiness=lws_state,
    pod_selector=_lws_pods,
    default_max_surge=0,  # a spare group is a whole set of nodes
    waits_for_other_kind=True,
    status_after_write=True,
    owned_view=_lws_owned,
    owned_parts="group size or templates",
    pod_templates=(
        ("leaderWorkerTemplate", "leaderTemplate"),
        ("leaderWorkerTemplate", "workerTemplate"),
    ),
    # Not on its pod templates: Kueue's LWS pod reconciler (v0.17.0) makes a group's pods part of
    # the group's Workload (pod-group name, prebuilt workload, role) only on a pod that has no
    # queue label yet, and puts it there itself; a pod created with one is never ungated after
    # the Workload is admitted (tests/cluster/test_kueue_e2e.py).
    queue_labels_on_pods=False,
    quota_condition=None,
    # The leader StatefulSet (named as the LWS) and each group's worker StatefulSet; the LWS
    # controller itself reports FailedCreate on the LWS.
    quota_event_kinds=("StatefulSet", LEADER_WORKER_SET),
)

#: The table: every kind that runs an engine, by kind name.
KINDS: dict[str, WorkloadKind] = {k.kind: k for k in (DEPLOYMENT_KIND, LEADER_WORKER_SET_KIND)}
#: The workload kinds (what a SpecServer may own besides its Service), in table order.
WORKLOAD_KINDS = tuple(KINDS)
#: Kinds whose spec.replicas the operator owns: every workload kind.
SCALED_KINDS = WORKLOAD_KINDS
#: Workload kinds that are CustomResources (a cluster may lack their CRD).
OPTIONAL_KINDS = frozenset(k.kind for k in KINDS.values() if k.optional)


def for_nodes(nodes: object) -> WorkloadKind:
    """The kind that runs a replica on ``nodes`` nodes (anything but an int > 1: one node)."""
    multi = isinstance(nodes, int) and not isinstance(nodes, bool) and nodes > 1
    return next(k for k in KINDS.values() if k.multi_node == multi)


def of(kind: str) -> WorkloadKind:
    """The table's entry for ``kind`` (KeyError: not a workload kind)."""
    return KINDS[kind]


def by_template(template: str) -> WorkloadKind | None:
    """The kind rendered by ``template`` (None: not a workload template)."""
    return next((k for k in KINDS.values() if k.template == template), None)


def pod_template_metas(workload: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``metadata`` of each pod template of ``workload`` (its kind's ``pod_templates``),
    created where missing (to write labels into)."""
    kind = KINDS.get(str(workload.get("kind")))
    out = []
    for path in kind.pod_templates if kind else ():
        node = workload.setdefault("spec", {})
        for key in path:
            node = node.setdefault(key, {})
        out.append(node.setdefault("metadata", {}))
    return out


def set_queue_labels(workload: dict[str, Any], values: dict[str, str]) -> None:
    """Put Kueue's labels (``QUEUE_LABELS``: those in ``values``, and none of the others) where
    Kueue reads them on ``workload``: its metadata, and its pod templates where its kind says
    so (Kueue's webhook copies the queue name there itself: the same value, no fight)."""
    kind = KINDS.get(str(workload.get("kind")))
    if kind is None:
        return
    metas = [workload.setdefault("metadata", {})]
    if kind.queue_labels_on_pods:
        metas += pod_template_metas(workload)
    for meta in metas:
        labels = {k: v for k, v in (meta.get("labels") or {}).items() if k not in QUEUE_LABELS}
        meta["labels"] = {**labels, **values}


def queue_labels_of(workload: dict[str, Any] | None) -> dict[str, str] | None:
    """The Kueue labels a live workload carries (None: there is no workload)."""
    if workload is None:
        return None
    labels = (workload.get("metadata") or {}).get("labels") or {}
    return {k: str(labels[k]) for k in QUEUE_LABELS if k in labels}


def state(workload: dict[str, Any] | None, replicas: int) -> State:
    """(ready, progressing, message) of any engine workload, by its kind's rule."""
    if workload is None:
        return False, False, "no engine workload"
    kind = KINDS.get(str(workload.get("kind")), DEPLOYMENT_KIND)
    return kind.readiness(workload, replicas)


def pod_matches(workload: dict[str, Any], pod: dict[str, Any]) -> bool:
    """Whether ``pod`` is one of ``workload``'s (its kind's selector, as a subset of labels)."""
    kind = KINDS.get(str(workload.get("kind")))
    if kind is None:
        return False
    want = kind.pod_selector(workload)
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return bool(want) and all(labels.get(k) == v for k, v in want.items())
