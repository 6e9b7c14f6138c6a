"""The plan's memory settings against SGLang 0.5.23's ``handle_gpu_memory_settings``.

``--chunked-prefill-size`` sizes the activation reserve and ``--cuda-graph-max-bs-decode`` (or an
explicit ``--max-running-requests``) the decode-graph reserve; both move SGLang's heuristic
``--mem-fraction-static`` and so the KV pool. ``plan`` must resolve them as SGLang does: the
oracle runs SGLang's own resolution on a CPU and reports the fields it chose.
"""

from __future__ import annotations

from pathlib import Path

import harness
import pytest

import oracle
from specserver_advisor.gpus import lookup_gpu
from specserver_advisor.perf.plan import PlanInputs, make_plan
from specserver_advisor.sglang.flags import parse_server_argv

FLAGS = [
    ["--chunked-prefill-size", "1024"],
    ["--chunked-prefill-size", "8192"],
    ["--cuda-graph-max-bs-decode", "2"],
    ["--cuda-graph-max-bs-decode", "256", "--chunked-prefill-size", "16384"],
    ["--max-running-requests", "4"],
    ["--disable-cuda-graph", "--chunked-prefill-size", "512"],
]


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return harness.materialize(tmp_path_factory.mktemp("models"))


@pytest.mark.parametrize("gpu_name", ["L4", "H100"])
@pytest.mark.parametrize("flags", FLAGS, ids=" ".join)
@pytest.mark.parametrize("speculative", [False, True], ids=["plain", "eagle3"])
def test_plan_memory_settings_are_sglangs(
    sglang: oracle.Oracle,
    paths: dict[str, Path],
    gpu_name: str,
    flags: list[str],
    speculative: bool,
) -> None:
    gpu = lookup_gpu(gpu_name)
    argv = ["--model-path", str(paths["qwen3-8b"]), *flags]
    if speculative:
        argv += [
            "--speculative-algorithm",
            "EAGLE3",
            "--speculative-draft-model-path",
            str(paths["qwen3-8b-eagle3"]),
        ]
    theirs = sglang.resolve(argv, gpu, context=False)
    assert theirs["outcome"] == "accepted", theirs
    draft = harness.MODELS["qwen3-8b-eagle3"] if speculative else None
    values = parse_server_argv(argv).values
    plan = make_plan(PlanInputs(values, harness.MODELS["qwen3-8b"], draft, gpu, concurrency=[1]))
    s = plan.mem.settings
    ours = (s.mem_fraction_static, s.chunked_prefill_size, s.cuda_graph_max_bs)
    fields = theirs["fields"]
    expected = (
        fields["mem_fraction_static"],
        fields["chunked_prefill_size"],
        fields["cuda_graph_max_bs_decode"],
    )
    if "--disable-cuda-graph" in flags:  # SGLang keeps the tier's max_bs; nothing is captured
        ours, expected = ours[:2], expected[:2]
    assert ours == expected
