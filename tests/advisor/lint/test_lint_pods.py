"""Pod-spec rules on every workload shape: StatefulSet, Pod, LeaderWorkerSet, compose, init
containers and CPU launches, and the accessors' tolerance of hostile shapes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from specserver_advisor.lint.engine import Options, run
from specserver_advisor.lint.rules.pod006_image_unpinned import unpinned

LAUNCH = [
    "python3",
    "-m",
    "sglang.launch_server",
    "--model-path",
    "Qwen/Qwen3-8B",
    "--host",
    "0.0.0.0",
    "--enable-metrics",
]


def pod_codes(tmp_path: Path, docs: list[Any], name: str = "w.yaml") -> list[tuple[int, str]]:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    options = Options(env={}, enabled=frozenset(f"POD00{i}" for i in range(1, 8)))
    return [(d.line, d.code) for d in run([path], options).diagnostics]


def container(args: list[str], gpus: int | None = 1, **extra: Any) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "engine", "image": "lmsysorg/sglang:v0.5.23", "command": args}
    if gpus is not None:
        c["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
    c.update(extra)
    return c


def deployment(
    *containers: dict[str, Any], init: list[dict[str, Any]] | None = None, named: bool = True
) -> dict[str, Any]:
    """A Deployment of ``containers`` (and ``init`` containers), named ``a`` unless not."""
    pod: dict[str, Any] = {"initContainers": init} if init else {}
    pod["containers"] = list(containers)
    doc: dict[str, Any] = {"apiVersion": "apps/v1", "kind": "Deployment"}
    if named:
        doc["metadata"] = {"name": "a"}
    doc["spec"] = {"template": {"spec": pod}}
    return doc


def test_statefulset_and_pod(tmp_path: Path) -> None:
    sts = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "a"},
        "spec": {"template": {"spec": {"containers": [container([*LAUNCH, "--tp", "8"], 4)]}}},
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "b"},
        "spec": {"containers": [container(LAUNCH, None, image="lmsysorg/sglang")]},
    }
    codes = sorted(c for _, c in pod_codes(tmp_path, [sts, pod]))
    assert codes == ["POD001", "POD002", "POD006", "POD007"]


def test_leaderworkerset_counts_gpus_per_node(tmp_path: Path) -> None:
    args = [*LAUNCH, "--tp-size", "16", "--nnodes", "2"]
    shm = {"volumeMounts": [{"name": "shm", "mountPath": "/dev/shm"}]}
    volumes = [{"name": "shm", "emptyDir": {"medium": "Memory"}}]
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "ds"},
        "spec": {
            "leaderWorkerTemplate": {
                "size": 2,
                "leaderTemplate": {
                    "spec": {"containers": [container(args, 8, **shm)], "volumes": volumes}
                },
                "workerTemplate": {
                    "spec": {"containers": [container(args, 4, **shm)], "volumes": volumes}
                },
            }
        },
    }
    codes = pod_codes(tmp_path, [lws])
    assert [c for _, c in codes] == ["POD001"], "only the worker (4 GPUs for 8 per node) fails"


def test_compose_services(tmp_path: Path) -> None:
    compose = {
        "services": {
            "ok": {
                "image": "lmsysorg/sglang:v0.5.23",
                "command": " ".join([*LAUNCH, "--tp", "2"]),
                "ipc": "host",
                "deploy": {
                    "resources": {"reservations": {"devices": [{"driver": "nvidia", "count": 2}]}}
                },
                "environment": {"HF_TOKEN": "${HF_TOKEN}"},
            },
            "bad": {
                "image": "lmsysorg/sglang:latest",
                "command": " ".join([*LAUNCH, "--tp", "2"]),
                "environment": ["HF_TOKEN=hf_secret"],
            },
        }
    }
    codes = [c for _, c in pod_codes(tmp_path, [compose], "compose.yaml")]
    assert sorted(codes) == ["POD002", "POD004", "POD006", "POD007"]


def test_init_containers_cpu_launches_and_unresolved_models(tmp_path: Path) -> None:
    dep = deployment(container([*LAUNCH, "--device", "cpu"], None), init=[container(LAUNCH, None)])
    assert pod_codes(tmp_path, [dep]) == []


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        ("lmsysorg/sglang", True),
        ("lmsysorg/sglang:latest", True),
        ("registry:5000/sglang", True),
        ("registry:5000/sglang:v0.5.23", False),
        ("lmsysorg/sglang@sha256:abc", False),
        ("lmsysorg/sglang:v0.5.23-cu129", False),
    ],
)
def test_unpinned_images(image: str, expected: bool) -> None:
    assert unpinned(image) is expected


@pytest.mark.parametrize(
    "hostile",
    [
        {"resources": "lots"},
        {"resources": {"limits": {"nvidia.com/gpu": "many"}}},
        {"volumeMounts": "x", "livenessProbe": {"periodSeconds": "soon"}},
        {"env": [{"name": "HF_TOKEN"}, "HF_TOKEN", 3], "image": 7},
    ],
)
def test_hostile_shapes_never_raise(tmp_path: Path, hostile: dict[str, Any]) -> None:
    pod_codes(tmp_path, [deployment({**container(LAUNCH), **hostile}, named=False)])


def test_gpu_counts_from_unknown_variables_are_not_guessed(tmp_path: Path) -> None:
    tp = {"name": "TP", "valueFrom": {"configMapKeyRef": {"key": "tp"}}}
    dep = deployment(container([*LAUNCH, "--tp-size", "$(TP)"], 1, env=[tp]))
    assert pod_codes(tmp_path, [dep]) == []


def test_a_kubernetes_variable_value_hides_only_the_value(tmp_path: Path) -> None:
    """``--cuda-graph-max-bs=$(BS)`` with BS from a ConfigMap: the name is still ambiguous."""
    path = tmp_path / "deploy.yaml"
    path.write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  template:\n"
        "    spec:\n      containers:\n        - name: s\n"
        "          image: lmsysorg/sglang:v0.5.23-cu129\n"
        "          env:\n            - name: BS\n"
        "              valueFrom: {configMapKeyRef: {name: c, key: bs}}\n"
        "          args: [python3, -m, sglang.launch_server, --model-path, Qwen/Qwen3-8B,\n"
        "                 --host, 0.0.0.0, --cuda-graph-max-bs=$(BS), --tp, $(BS)]\n"
        "          resources: {limits: {nvidia.com/gpu: 1}}\n"
    )
    diags = run([path], Options(env={})).diagnostics
    assert [(d.line, d.code) for d in diags] == [(14, "INFO002"), (14, "SPEC015")]
    assert "ambiguous option: --cuda-graph-max-bs=$(BS)" in diags[1].message
