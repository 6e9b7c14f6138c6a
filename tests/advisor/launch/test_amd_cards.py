"""AMD Instinct cards (issue 42 item 3): in the GPU table with their data-sheet figures, accepted
by ``resources.gpuType`` and ``plan --gpu``, and requested as ``amd.com/gpu`` (AMD's device
plugin resource): a SpecServer for an AMD card that requests the CRD's default
``nvidia.com/gpu`` is refused with the field named, since its pods could never schedule."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from specserver_advisor.cli.main import main
from specserver_advisor.gpus import GPUS, lookup_gpu
from specserver_advisor.launch.validation import spec_problems
from specserver_advisor.models import SpecServer
from stack import REPO

EXAMPLE = yaml.safe_load((REPO / "manifests" / "examples" / "qwen3-8b-eagle3-l4.yaml").read_text())


def _server(**resources: object) -> SpecServer:
    doc = copy.deepcopy(EXAMPLE)
    doc["spec"]["resources"] = {"gpus": 1, **resources}
    return SpecServer.model_validate(doc)


def test_amd_cards_carry_their_data_sheet_figures() -> None:
    amd = {name: gpu for name, gpu in GPUS.items() if gpu.rocm}
    assert sorted(amd) == ["MI300X", "MI325X", "MI350X", "MI355X"]
    for gpu in amd.values():
        assert gpu.source.startswith("https://www.amd.com/"), gpu.name
        # Dense FP8 doubles dense BF16 on CDNA 3 and 4; 8 GPUs a node on Infinity Fabric.
        assert gpu.fp8_tflops == pytest.approx(2 * gpu.bf16_tflops, rel=0.01)
        assert gpu.node_gpus == 8 and gpu.link_gbs > 400
    assert (amd["MI300X"].memory_gib, amd["MI325X"].memory_gib) == (pytest.approx(192, 0.01), 255)
    assert amd["MI300X"].bandwidth_gbs < amd["MI325X"].bandwidth_gbs < amd["MI355X"].bandwidth_gbs
    # Only CDNA 4 has an FP4 matrix path (MXFP4 at twice FP8).
    for cdna4 in ("MI350X", "MI355X"):
        assert amd[cdna4].fp4_tflops == pytest.approx(2 * amd[cdna4].fp8_tflops, rel=0.01)
        assert amd[cdna4].generation == "cdna4"
    assert amd["MI300X"].fp4_tflops == amd["MI325X"].fp4_tflops == 0
    # The MI350X is the MI355X's silicon and memory at its lower peak clock (2.2 of 2.4 GHz).
    assert amd["MI350X"].memory_mib == amd["MI355X"].memory_mib
    assert amd["MI350X"].bf16_tflops / amd["MI355X"].bf16_tflops == pytest.approx(2.2 / 2.4, 1e-3)
    assert lookup_gpu("mi355").name == "MI355X"
    assert lookup_gpu("mi350").name == "MI350X"


@pytest.mark.parametrize("name", ["MI300X", "MI325X", "MI350X", "MI355X"])
def test_amd_gpu_type_needs_the_amd_resource(name: str) -> None:
    assert spec_problems(_server(gpuType=name, gpuResourceName="amd.com/gpu")) == []
    problems = spec_problems(_server(gpuType=name))  # the CRD default: nvidia.com/gpu
    assert len(problems) == 1
    assert problems[0].startswith("spec.resources.gpuResourceName:")
    assert "amd.com/gpu" in problems[0] and name in problems[0]


def test_nvidia_gpu_type_with_the_amd_resource_is_refused_and_other_names_pass() -> None:
    (problem,) = spec_problems(_server(gpuType="H100", gpuResourceName="amd.com/gpu"))
    assert "nvidia.com/gpu" in problem
    # A renamed or shared resource is the cluster's business.
    assert spec_problems(_server(gpuType="MI300X", gpuResourceName="example.com/mi300x")) == []
    assert spec_problems(_server(gpuType="H100")) == []


def _snippet(text: str) -> dict[str, object]:
    """The plan's ``# SpecServer`` block as a SpecServer document."""
    block = text.split("# SpecServer\n", 1)[1].split("\n\n", 1)[0]
    spec = yaml.safe_load("\n".join(ln for ln in block.splitlines() if not ln.startswith("#")))
    return {
        "apiVersion": "specserver.io/v1alpha1",
        "kind": "SpecServer",
        "metadata": {"name": "r1"},
        **spec,
    }


def test_plan_on_an_amd_card_resolves_as_rocm_and_its_snippet_is_admitted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = [
        "plan",
        "--model",
        "deepseek-ai/DeepSeek-V3",
        "--gpu",
        "MI300X",
        "--gpus",
        "8",
        "--algorithm",
        "NEXTN",
        "--steps",
        "1",
        "--topk",
        "1",
        "--draft-tokens",
        "2",
        "--concurrency",
        "1",
    ]
    assert main([*argv, "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["memory"]["gpu"] == "MI300X"
    # SGLang on ROCm verifies an EAGLE chain by rejection sampling (tests/oracle/test_rocm_paths).
    assert out["resolved"]["speculative_use_rejection_sampling"] is True
    assert main(argv) == 0
    doc = _snippet(capsys.readouterr().out)
    assert doc["spec"]["resources"]["gpuResourceName"] == "amd.com/gpu"  # type: ignore[index]
    assert spec_problems(SpecServer.model_validate(doc)) == []
    assert main([*argv[:4], "H200", *argv[5:], "--format", "json"]) == 0
    on_h200 = json.loads(capsys.readouterr().out)
    assert not on_h200["resolved"]["speculative_use_rejection_sampling"]
