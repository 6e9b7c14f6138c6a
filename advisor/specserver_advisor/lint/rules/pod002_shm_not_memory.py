"""POD002 shm-not-memory.

What it does:
    Flags a launch with more than one GPU per pod whose container has no memory-backed
    ``/dev/shm`` (an ``emptyDir`` with ``medium: Memory`` mounted there, or ``hostIPC``; in
    compose ``shm_size`` or ``ipc: host``).
Why it matters:
    Tensor-parallel workers exchange data through shared memory (NCCL); a container's default
    ``/dev/shm`` is 64 MiB, and NCCL fails or hangs at the first all-reduce.
Example (fails):
    --tp-size 2 in a Deployment without a /dev/shm volume
Use instead:
    volumes: [{name: shm, emptyDir: {medium: Memory, sizeLimit: 16Gi}}], mounted at /dev/shm
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

from specserver_advisor.lint.model import Context, Diagnostic, Launch, Workload
from specserver_advisor.lint.podspec import container_position, gpus_needed, volume_at
from specserver_advisor.lint.podspec import server_workload as workload_of
from specserver_advisor.lint.rules._base import diag

CODE = "POD002"
NAME = "shm-not-memory"
SEVERITY = "warning"
SUMMARY = "Several GPUs per pod without a memory-backed /dev/shm: NCCL fails or hangs."
FIX = "Mount an emptyDir with medium: Memory at /dev/shm (compose: shm_size or ipc: host)."
APPLIES_TO = ("server",)


def _has_shm(w: Workload) -> bool:
    service: Any = w.container
    if w.kind == "compose":
        return isinstance(service, dict) and ("shm_size" in service or service.get("ipc") == "host")
    if isinstance(w.pod, dict) and w.pod.get("hostIPC") is True:
        return True
    found = volume_at(w, "/dev/shm")
    if found is None:
        return False
    volume, mount = found
    empty = volume.get("emptyDir")
    return str(mount.get("mountPath", "")).rstrip("/") == "/dev/shm" and (
        isinstance(empty, dict) and empty.get("medium") == "Memory"
    )


def check(launch: Launch, ctx: Context) -> Iterable[Diagnostic]:
    w = workload_of(launch)
    needed = gpus_needed(launch)
    if w is None or needed is None or needed <= 1 or _has_shm(w):
        return []
    return [
        diag(
            sys.modules[__name__],
            launch,
            container_position(launch, "volumeMounts"),
            f"{needed} GPUs per pod and /dev/shm is not a memory emptyDir",
        )
    ]
