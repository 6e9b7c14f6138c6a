"""The SpecServer API against the real local apiserver: install, validation, status subresource."""

from __future__ import annotations

import json

import pytest
import yaml

from stack import REPO, KubeHandle

pytestmark = pytest.mark.cluster

BASE = {
    "apiVersion": "specserver.io/v1alpha1",
    "kind": "SpecServer",
    "metadata": {"name": "probe"},
    "spec": {
        "model": {"path": "Qwen/Qwen3-8B"},
        "draft": {"path": "Tengyunw/qwen3_8b_eagle3"},
        "speculative": {"algorithm": "EAGLE3", "numSteps": 3, "eagleTopk": 1, "numDraftTokens": 4},
        "mode": "Auto",
        "engine": {"maxRunningRequests": 16},
        "resources": {"gpuType": "L4"},
    },
}


def _with(path: str, value: object) -> dict[str, object]:
    doc = json.loads(json.dumps(BASE))
    node = doc["spec"]
    *parents, leaf = path.split(".")
    for key in parents:
        node = node[key]
    if value is None:
        del node[leaf]
    else:
        node[leaf] = value
    return doc


def test_crd_applies_and_is_established(kube: KubeHandle) -> None:
    done = kube.kubectl("apply", "-f", str(REPO / "crds"))
    assert "specservers.specserver.io" in done.stdout
    names = kube.kubectl("api-resources", "--api-group=specserver.io", "-o", "name").stdout
    assert "specservers.specserver.io" in names


def test_every_example_applies_and_lists(kube: KubeHandle, namespace: str) -> None:
    examples = sorted((REPO / "manifests" / "examples").glob("*.yaml"))
    assert len(examples) >= 4
    for path in examples:
        kube.kubectl("apply", "-n", namespace, "-f", str(path))
    listed = kube.kubectl("get", "sps", "-n", namespace, "-o", "json").stdout
    names = {item["metadata"]["name"] for item in json.loads(listed)["items"]}
    expected = {yaml.safe_load(p.read_text())["metadata"]["name"] for p in examples}
    assert names == expected
    table = kube.kubectl("get", "sps", "-n", namespace).stdout.splitlines()[0].split()
    assert table == ["NAME", "MODE", "ACCEPT", "TTFT-P99", "READY", "REASON", "AGE"]
    wide = kube.kubectl("get", "sps", "-n", namespace, "-o", "wide").stdout.splitlines()
    assert wide[0].split() == [
        "NAME", "MODE", "ACCEPT", "TTFT-P99", "READY", "REASON",
        "ALGORITHM", "GPU", "CAP", "CAP-SOURCE", "MESSAGE", "AGE",
    ]  # fmt: skip
    deepseek = next(line for line in wide if line.startswith("deepseek-v3 "))
    assert "NEXTN" in deepseek and "H200" in deepseek


@pytest.mark.parametrize(
    ("path", "value", "field", "needle"),
    [
        ("speculative.algorithm", "MEDUSA", "spec.speculative.algorithm", "Unsupported value"),
        ("speculative.numSteps", 0, "spec.speculative.numSteps", "greater than or equal to 1"),
        (
            "engine.maxRunningRequests",
            -4,
            "spec.engine.maxRunningRequests",
            "greater than or equal to 1",
        ),
        ("model", None, "spec.model", "Required value"),
        ("mode", "Sometimes", "spec.mode", "Unsupported value"),
    ],
)
def test_invalid_specservers_are_rejected_naming_the_field(
    kube: KubeHandle, namespace: str, path: str, value: object, field: str, needle: str
) -> None:
    doc = _with(path, value)
    # --validate=false: the apiserver, not kubectl's client-side check, must reject it.
    done = kube.kubectl(
        "apply", "--validate=false", "-n", namespace, "-f", "-", input=json.dumps(doc), check=False
    )
    assert done.returncode != 0
    assert field in done.stderr and needle in done.stderr, done.stderr


def test_valid_probe_is_accepted_and_defaults_applied(kube: KubeHandle, namespace: str) -> None:
    doc = _with("mode", None)
    kube.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(doc))
    got = json.loads(kube.kubectl("get", "sps", "probe", "-n", namespace, "-o", "json").stdout)
    assert got["spec"]["mode"] == "Auto"
    assert got["spec"]["replicas"] == 1
    assert got["spec"]["resources"]["gpus"] == 1


def test_status_is_written_only_through_the_status_subresource(
    kube: KubeHandle, namespace: str
) -> None:
    kube.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(BASE))
    status = {"status": {"observedGeneration": 1, "speculationMode": "On"}}
    kube.kubectl("patch", "sps", "probe", "-n", namespace, "--type=merge", "-p", json.dumps(status))
    got = json.loads(kube.kubectl("get", "sps", "probe", "-n", namespace, "-o", "json").stdout)
    assert "status" not in got or "speculationMode" not in got.get("status", {})
    generation = got["metadata"]["generation"]
    # Through /status: accepted, and the spec generation does not move.
    api = f"/apis/specserver.io/v1alpha1/namespaces/{namespace}/specservers/probe/status"
    got["status"] = {
        "observedGeneration": generation,
        "speculationMode": "On",
        "conditions": [
            {
                "type": "Ready",
                "status": "False",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
                "reason": "Pending",
                "message": "probe",
            }
        ],
    }
    kube.kubectl("replace", "--raw", api, "-f", "-", input=json.dumps(got))
    after = json.loads(kube.kubectl("get", "sps", "probe", "-n", namespace, "-o", "json").stdout)
    assert after["status"]["speculationMode"] == "On"
    assert after["metadata"]["generation"] == generation
    ready = kube.kubectl("get", "sps", "probe", "-n", namespace).stdout
    assert "On" in ready.splitlines()[1] and "False" in ready.splitlines()[1]


def test_kubectl_explain_shows_field_descriptions(kube: KubeHandle) -> None:
    text = kube.kubectl("explain", "specserver.spec.speculative").stdout
    assert "numSteps" in text and "--speculative-num-steps" in text
    assert "<integer>" in text


@pytest.mark.parametrize("old", ["On", "Off"])
def test_old_mode_values_are_refused_naming_the_new_ones(
    kube: KubeHandle, namespace: str, old: str
) -> None:
    done = kube.kubectl(
        "apply",
        "--validate=false",
        "-n",
        namespace,
        "-f",
        "-",
        input=json.dumps(_with("mode", old)),
        check=False,
    )
    assert done.returncode != 0
    assert "spec.mode" in done.stderr and f'"{old}"' in done.stderr, done.stderr
    assert all(f'"{new}"' in done.stderr for new in ("Enabled", "Disabled", "Auto")), done.stderr


def test_bare_enabled_and_disabled_survive_kubectls_yaml(kube: KubeHandle, namespace: str) -> None:
    text = yaml.safe_dump(BASE).replace("mode: Auto", "mode: Disabled")
    assert "mode: Disabled\n" in text  # bare, as people write it
    kube.kubectl("apply", "-n", namespace, "-f", "-", input=text)
    got = json.loads(kube.kubectl("get", "sps", "probe", "-n", namespace, "-o", "json").stdout)
    assert got["spec"]["mode"] == "Disabled"
