"""What an engine pod may ask for, and what it gets by default (pure; docs/security.md).

A SpecServer's author chooses the engine image, so the pod it renders is held to the Pod
Security "restricted" profile (the templates set the securityContext) and to the cluster admin's
``PodPolicy``: ``hostPath`` model volumes, tolerations that match every taint and extraArgs
that let clients or a model repository run code in the engine (``CODE_EXECUTION_FLAGS``) are
refused unless the admin allowed them (``SPECSERVER_ALLOW_HOST_PATH``,
``SPECSERVER_ALLOW_WILDCARD_TOLERATIONS``, ``SPECSERVER_ALLOW_CODE_EXECUTION_FLAGS``). Refusals
become ``ConfigValid=False`` with the reason ``PodPolicyRefused``, naming the field.

``pod_resources`` gives every engine container CPU and memory requests sized from the model
when the spec gives none, and bounds ``/dev/shm`` (a memory-backed emptyDir, charged to the
pod's memory) so an engine is never BestEffort next to an unbounded RAM disk. The policy itself
(``PodPolicy``, ``refusal``) is the advisor's ``launch.podpolicy``, so ``lint`` applies it too.
"""

from __future__ import annotations

import math
from typing import Any

from specserver_advisor.launch.multinode import gpus_per_node
from specserver_advisor.launch.podpolicy import (
    CODE_EXECUTION_FLAGS,
    REFUSED,
    PodPolicy,
    code_execution_flag,
    refusal,
)
from specserver_advisor.models import SpecServerSpec

__all__ = [
    "CODE_EXECUTION_FLAGS",
    "REFUSED",
    "PodPolicy",
    "code_execution_flag",
    "default_requests",
    "pod_resources",
    "refusal",
    "shm_gib",
]
#: /dev/shm per GPU (NCCL and SGLang's inter-process tensors), bounded by SHM_MAX_GIB.
SHM_PER_GPU_GIB = 2
SHM_MAX_GIB = 16
#: Host memory: a base for the tokenizer/detokenizer processes, one scheduler per GPU, one
#: checkpoint shard in flight while loading (at most SHARD_GIB), plus /dev/shm.
BASE_MEMORY_GIB = 4
MEMORY_PER_GPU_GIB = 4
SHARD_GIB = 5
#: CPU: the tokenizer and detokenizer, and two per GPU (scheduler and its threads).
BASE_CPU = 2
CPU_PER_GPU = 2


def shm_gib(gpus: int) -> int:
    """Size limit of the engine's /dev/shm."""
    return max(1, min(SHM_MAX_GIB, SHM_PER_GPU_GIB * gpus))


def default_requests(gpus: int, weight_gib_per_gpu: float) -> dict[str, str]:
    """CPU and memory requests for an engine when the spec gives none."""
    shard = min(SHARD_GIB, math.ceil(max(weight_gib_per_gpu, 0.0)))
    memory = BASE_MEMORY_GIB + MEMORY_PER_GPU_GIB * gpus + shard + shm_gib(gpus)
    return {"cpu": str(BASE_CPU + CPU_PER_GPU * gpus), "memory": f"{memory}Gi"}


def pod_resources(
    spec: SpecServerSpec, weight_gib_per_gpu: float
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(limits, requests) of the engine container of one pod: its GPUs (``gpus / nodes``: a
    replica across nodes has one pod per node); the spec's CPU and memory as request and limit
    (per pod); a sized default request for what the spec leaves out."""
    res = spec.resources
    gpus = gpus_per_node(spec)
    # Quantities as strings: server-side apply's typed patches refuse bare integers.
    limits: dict[str, Any] = {res.gpu_resource_name: str(gpus)}
    requests: dict[str, Any] = default_requests(gpus, weight_gib_per_gpu)
    for key, value in (("cpu", res.cpu), ("memory", res.memory)):
        if value:
            limits[key] = requests[key] = value
    return limits, requests
