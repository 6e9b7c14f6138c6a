"""Why an engine workload is not Ready, from its pods, its conditions and its events (pure).

``blocked(workload, pods, events)`` reads what the cluster's own components wrote, as they
write it, and returns the first known cause (``Blocked``) or None:

- Kueue holds it (``NOT_ADMITTED``): a pod still carries Kueue's scheduling gate
  ``kueue.x-k8s.io/admission`` (the apiserver then sets PodScheduled=False, reason
  ``SchedulingGated``, "Scheduling is blocked due to non-empty scheduling gates"), or the
  workload is suspended (``spec.suspend``);
- a quota refusal (``QUOTA_EXCEEDED``): the apiserver's ``exceeded quota: ...`` error, as a
  Deployment's controller copies its ReplicaSet's ``ReplicaFailure`` condition (reason
  ``FailedCreate``), or the ``FailedCreate`` Warning event a LeaderWorkerSet's StatefulSets
  (or its controller) record ("create Pod x in StatefulSet y failed error: pods "x" is
  forbidden: exceeded quota: ...");
- the scheduler cannot place a pod (``UNSCHEDULABLE``): PodScheduled=False, reason
  ``Unschedulable``, with the scheduler's message verbatim ("0/3 nodes are available: 3
  Insufficient nvidia.com/gpu. ...");
- the kubelet cannot start it: a container waiting in ``ImagePullBackOff`` / ``ErrImagePull``
  (``IMAGE_PULL``) or ``CrashLoopBackOff`` (``CRASH_LOOP``).

The first three are GPU scarcity (``Blocked.scarce``): freeing GPUs first can help. Messages
are the components' own words, cut to ``MESSAGE_MAX``; a caller that prints them escapes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from specserver_operator.core import kinds

UNSCHEDULABLE = "Unschedulable"
QUOTA_EXCEEDED = "QuotaExceeded"
NOT_ADMITTED = "NotAdmitted"
IMAGE_PULL = "ImagePullBackOff"
CRASH_LOOP = "CrashLoopBackOff"
#: The reasons where the new engine waits for GPUs (or quota) another engine holds.
SCARCE = frozenset({UNSCHEDULABLE, QUOTA_EXCEEDED, NOT_ADMITTED})
#: Every reason, in the order they are looked for.
REASONS = (NOT_ADMITTED, QUOTA_EXCEEDED, UNSCHEDULABLE, IMAGE_PULL, CRASH_LOOP)

#: Kueue's scheduling gate on the pods of a Deployment or LeaderWorkerSet it has not admitted.
KUEUE_GATE = "kueue.x-k8s.io/admission"
#: The apiserver's PodScheduled reason for a pod with scheduling gates.
SCHEDULING_GATED = "SchedulingGated"
#: The words of the apiserver's ResourceQuota admission refusal.
QUOTA_WORDS = "exceeded quota"
#: Longest cause message kept (events and conditions are bounded further by their writers).
MESSAGE_MAX = 600

_PULL_REASONS = frozenset({"ImagePullBackOff", "ErrImagePull"})


@dataclass(frozen=True)
class Blocked:
    """Why the engine workload ``workload`` is not Ready: ``reason`` (one of ``REASONS``)
    and ``message``, the cause's own words."""

    reason: str
    message: str
    workload: str

    @property
    def scarce(self) -> bool:
        """GPU scarcity (unschedulable, quota, not admitted): freeing GPUs first can help."""
        return self.reason in SCARCE

    def describe(self) -> str:
        """A condition or event message: the workload and the cause's own words."""
        if self.reason == NOT_ADMITTED:
            return f"{self.workload}: held by Kueue: {self.message}"
        return f"{self.workload}: {self.message}"


def _cut(text: Any) -> str:
    out = str(text or "").strip()
    return out if len(out) <= MESSAGE_MAX else out[: MESSAGE_MAX - 3] + "..."


def _live(pod: dict[str, Any]) -> bool:
    return not (pod.get("metadata") or {}).get("deletionTimestamp")


def _pod_name(pod: dict[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("name") or "a pod")


def _condition(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == type_:
            return c
    return None


def _not_admitted(workload: dict[str, Any], pods: list[dict[str, Any]]) -> str | None:
    if (workload.get("spec") or {}).get("suspend") is True:
        return "the workload is suspended until Kueue admits it"
    for pod in pods:
        gates = [g.get("name") for g in (pod.get("spec") or {}).get("schedulingGates") or []]
        if KUEUE_GATE in gates:
            cond = _condition(pod, "PodScheduled") or {}
            said = cond.get("message") if cond.get("reason") == SCHEDULING_GATED else None
            tail = f" ({said})" if said else ""
            return f"pod {_pod_name(pod)} waits for admission (scheduling gate {KUEUE_GATE}){tail}"
    return None


def _event_time(event: dict[str, Any]) -> str:
    return str(
        event.get("lastTimestamp")
        or event.get("eventTime")
        or (event.get("metadata") or {}).get("creationTimestamp")
        or ""
    )


def _about(kind: kinds.WorkloadKind, name: str, event: dict[str, Any]) -> bool:
    """An event about ``name`` or an object its controller created for it (named after it)."""
    obj = event.get("involvedObject") or {}
    about = str(obj.get("name") or "")
    return obj.get("kind") in (*kind.quota_event_kinds, kind.kind) and (
        about == name or about.startswith(name + "-")
    )


def _quota(workload: dict[str, Any], events: list[dict[str, Any]]) -> str | None:
    kind = kinds.KINDS.get(str(workload.get("kind")))
    if kind is None:
        return None
    if kind.quota_condition is not None:
        cond = _condition(workload, kind.quota_condition) or {}
        if cond.get("status") == "True" and QUOTA_WORDS in str(cond.get("message")).lower():
            return _cut(cond.get("message"))
    name = str(workload["metadata"]["name"])
    refusals = [
        e
        for e in events
        if e.get("reason") == kinds.FAILED_CREATE
        and QUOTA_WORDS in str(e.get("message")).lower()
        and _about(kind, name, e)
    ]
    if refusals:
        return _cut(max(refusals, key=_event_time).get("message"))
    return None


def _unschedulable(pods: list[dict[str, Any]]) -> str | None:
    for pod in pods:
        cond = _condition(pod, "PodScheduled") or {}
        if cond.get("status") == "False" and cond.get("reason") == UNSCHEDULABLE:
            return _cut(cond.get("message") or f"pod {_pod_name(pod)} is unschedulable")
    return None


def _waiting(pods: list[dict[str, Any]], reasons: frozenset[str] | set[str]) -> str | None:
    for pod in pods:
        st = pod.get("status") or {}
        for c in [*(st.get("initContainerStatuses") or []), *(st.get("containerStatuses") or [])]:
            waiting = (c.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") in reasons:
                said = waiting.get("message") or waiting.get("reason")
                return _cut(f"pod {_pod_name(pod)} container {c.get('name')}: {said}")
    return None


def blocked(
    workload: dict[str, Any] | None,
    pods: list[dict[str, Any]],
    events: list[dict[str, Any]],
) -> Blocked | None:
    """Why ``workload`` is not Ready (None: no cause known). ``pods``: any pods of its
    namespace (only its own, by its kind's selector, are read); ``events``: its namespace's
    Warning events (only those about it or the objects its controller creates)."""
    if workload is None:
        return None
    name = str(workload["metadata"]["name"])
    own = [p for p in pods if _live(p) and kinds.pod_matches(workload, p)]
    for reason in REASONS:  # in order: the first cause found is the one reported
        if reason == NOT_ADMITTED:
            message = _not_admitted(workload, own)
        elif reason == QUOTA_EXCEEDED:
            message = _quota(workload, events)
        elif reason == UNSCHEDULABLE:
            message = _unschedulable(own)
        else:
            message = _waiting(own, _PULL_REASONS if reason == IMAGE_PULL else {CRASH_LOOP})
        if message:
            return Blocked(reason, message, name)
    return None
