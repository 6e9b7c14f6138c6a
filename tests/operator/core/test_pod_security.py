"""Engine pods hold to the admin's pod policy; ``--config`` and the other arg-file flags are
refused in extraArgs (issue 13; docs/security.md). That they pass Pod Security "restricted" is
shown by the apiserver's own admission (tests/cluster/test_kube_stack.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from test_render_golden import EXAMPLES, render

from specserver_advisor.lint.launchlint import build_engine_config
from specserver_advisor.loaders.configchain import ModelConfigs
from specserver_advisor.loaders.configs import bundled
from specserver_advisor.models import SpecServer
from specserver_operator.core import podpolicy
from specserver_operator.core.render import build_children
from stack import REPO, pod_templates

EXAMPLE = REPO / "manifests" / "examples" / "qwen3-8b-eagle3-l4.yaml"


def _doc(**engine: Any) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    doc["metadata"]["namespace"] = "tenant"
    doc["spec"]["engine"].update(engine)
    return doc


def _configs(server: SpecServer) -> ModelConfigs:
    target = bundled(server.spec.model.path)
    draft = bundled(server.spec.draft.path) if server.spec.draft else None
    assert target is not None
    return ModelConfigs(target.config, draft.config if draft else None, None, None, "t")


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_rendered_engine_pods_mount_no_token_and_request_resources(path: Path) -> None:
    workloads = [c for c in render(path) if c["kind"] in ("Deployment", "LeaderWorkerSet")]
    assert workloads
    for workload in workloads:
        for template in pod_templates(workload):
            pod = template["spec"]
            assert pod["automountServiceAccountToken"] is False
            engine = pod["containers"][0]
            assert {"cpu", "memory"} <= set(engine["resources"]["requests"])
            shm = next(v for v in pod["volumes"] if v["name"] == "shm")["emptyDir"]
            assert shm["medium"] == "Memory" and shm["sizeLimit"].endswith("Gi")


def test_requests_are_sized_from_the_model_and_the_spec_wins() -> None:
    assert podpolicy.default_requests(1, 15.3) == {"cpu": "4", "memory": "15Gi"}
    assert podpolicy.default_requests(8, 80.0) == {"cpu": "18", "memory": "57Gi"}
    assert podpolicy.default_requests(1, 0.5) == {"cpu": "4", "memory": "11Gi"}
    assert podpolicy.shm_gib(1) == 2 and podpolicy.shm_gib(64) == podpolicy.SHM_MAX_GIB
    doc = _doc()
    doc["spec"]["resources"]["memory"] = "64Gi"
    server = SpecServer.model_validate(doc)
    limits, requests = podpolicy.pod_resources(server.spec, 15.0)
    assert requests["memory"] == limits["memory"] == "64Gi" and "cpu" not in limits
    assert requests["cpu"] == "4"


def test_host_path_and_match_all_tolerations_need_the_admin() -> None:
    doc = _doc()
    doc["spec"]["modelSource"] = {"volume": {"hostPath": "/"}}
    host = SpecServer.model_validate(doc).spec
    doc = _doc()
    doc["spec"]["resources"]["tolerations"] = [{"operator": "Exists"}]
    tolerate_all = SpecServer.model_validate(doc).spec
    doc["spec"]["resources"]["tolerations"] = [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    gpu_taint = SpecServer.model_validate(doc).spec
    default = podpolicy.PodPolicy.from_env({})
    assert "spec.modelSource.volume.hostPath" in (podpolicy.refusal(host, default) or "")
    assert "spec.resources.tolerations[0]" in (podpolicy.refusal(tolerate_all, default) or "")
    assert podpolicy.refusal(gpu_taint, default) is None
    admin = podpolicy.PodPolicy.from_env(
        {"SPECSERVER_ALLOW_HOST_PATH": "true", "SPECSERVER_ALLOW_WILDCARD_TOLERATIONS": "1"}
    )
    assert podpolicy.refusal(host, admin) is None
    assert podpolicy.refusal(tolerate_all, admin) is None


@pytest.mark.parametrize(
    "extra",
    [
        ["--config", "/models/x.yaml"],
        ["--config=/models/x.yaml"],
        ["--conf", "/models/x.yaml"],
        ["--trust-remote-code", "--config", "x.yaml"],
        ["--decrypted-config-file", "/models/c.json"],
        ["--decrypted-draft-config-file=/models/c.json"],
        ["--decrypted-config-fi", "/models/c.json"],  # an argparse prefix
        ["--json-model-override-args", '{"max_position_embeddings": 1048576}'],
        ['--json-model-override-args={"architectures": ["LlamaForCausalLM"]}'],
        ["--json-model-over", "{}"],
    ],
)
def test_arg_file_flags_are_refused_in_extra_args(extra: list[str]) -> None:
    server = SpecServer.model_validate(_doc(extraArgs=extra))
    for speculative in (True, False):
        cfg = build_engine_config(server.spec, _configs(server), speculative)
        assert not cfg.valid and cfg.reason == "OwnedFlagInExtraArgs"
        assert "extraArgs may not set --" in cfg.message


def test_plain_extra_args_still_render() -> None:
    server = SpecServer.model_validate(_doc(extraArgs=["--trust-remote-code"]))
    cfg = build_engine_config(server.spec, _configs(server), True)
    assert cfg.valid, cfg.message
    deployment = build_children(server, "uid", cfg)[0]
    engine = deployment["spec"]["template"]["spec"]["containers"][0]
    assert "--trust-remote-code" in engine["args"]


def test_the_operator_manifest_sets_a_seccomp_profile() -> None:
    docs = list(yaml.safe_load_all((REPO / "manifests" / "operator.yaml").read_text()))
    deployment = next(d for d in docs if d and d["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
