"""A workload's pod as the API server shows it when the engine cannot start: what
``Observed.blocked`` (core/blocked.py) reads, for the pure core's tests of switch deadlines."""

from __future__ import annotations

from typing import Any

from specserver_operator.core import kinds


def pending_pod(workload: dict[str, Any], reason: str, message: str) -> dict[str, Any]:
    """One pod of ``workload`` (its kind's selector), held by ``reason`` with ``message``:
    ``Unschedulable`` (the scheduler's PodScheduled=False), or a container waiting
    (``ImagePullBackOff``, ``CrashLoopBackOff``)."""
    labels = dict(kinds.KINDS[workload["kind"]].pod_selector(workload))
    name = f"{workload['metadata']['name']}-0"
    pod: dict[str, Any] = {"metadata": {"name": name, "labels": labels}, "status": {}}
    if reason == "Unschedulable":
        pod["status"]["conditions"] = [
            {"type": "PodScheduled", "status": "False", "reason": reason, "message": message}
        ]
    else:
        waiting = {"reason": reason, "message": message}
        pod["status"]["containerStatuses"] = [{"name": "engine", "state": {"waiting": waiting}}]
    return pod
