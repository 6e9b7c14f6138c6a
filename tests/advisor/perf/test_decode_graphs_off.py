"""A launch that turns SGLang's decode CUDA graphs off decodes eagerly, and plan prices it so.

``--disable-cuda-graph`` (or ``--disable-decode-cuda-graph``, or the decode graph backend
``disabled``) captures no decode graph, so every decode step launches its kernels from
Python. plan used to keep the memory tier's captured batch for such a launch and priced its
steps as graph replays (sglang issue #3361's two-node DeepSeek-V3 ran this way).
"""

from __future__ import annotations

import pytest

from specserver_advisor.gpus import lookup_gpu
from specserver_advisor.loaders.corpus import model_config
from specserver_advisor.perf.model import predict
from specserver_advisor.perf.plan import Plan, PlanInputs, make_plan, safe_cap
from specserver_advisor.sglang.flags import parse_server_argv


def _plan(*flags: str) -> Plan:
    argv = ["--model-path", "m", *flags]
    return make_plan(
        PlanInputs(
            parse_server_argv(argv).values,
            model_config("llama-3.1-8b"),
            None,
            lookup_gpu("H100"),
            input_len=512,
            output_len=256,
            concurrency=[1, 8],
        )
    )


@pytest.mark.parametrize(
    "flags",
    [
        ("--disable-cuda-graph",),
        ("--disable-cuda-graph", "--max-running-requests", "16"),
        ("--disable-decode-cuda-graph",),
        ("--cuda-graph-backend-decode", "disabled"),
    ],
)
def test_graphs_off_capture_no_decode_batch_and_decode_slower(flags: tuple[str, ...]) -> None:
    graphs = _plan()
    eager = _plan(*flags)
    assert graphs.scenario.cuda_graph_max_bs and graphs.scenario.cuda_graph_max_bs > 0
    assert eager.scenario.cuda_graph_max_bs == 0
    for load in (1, 8):
        on = predict(graphs.scenario, load, graphs.cap_off, False)
        off = predict(eager.scenario, load, eager.cap_off, False)
        # An 8B model's 32 layers launched from Python take longer than one graph replay.
        assert off.tpot_ms > on.tpot_ms * 1.2, (load, on.tpot_ms, off.tpot_ms)


def test_an_explicit_cap_keeps_its_graphs_when_graphs_are_on() -> None:
    capped = _plan("--max-running-requests", "16")
    assert capped.scenario.cuda_graph_max_bs == 16


def test_without_decode_graphs_only_the_kv_pool_bounds_the_recommended_cap() -> None:
    """With graphs on, plan keeps the cap within the captured batch and says so; with them
    off no batch runs in a graph, so the cap is the pool's and the note says only that."""
    loads = [1, 64, 256, 512, 800]
    graphs = _plan_at(loads)
    assert graphs.decode_graph_limit == graphs.mem.settings.cuda_graph_max_bs == 256
    assert graphs.recommended_mrr == 256 < graphs.fits_on
    assert any("run without the decode CUDA graphs" in n for n in graphs.notes)
    eager = _plan_at(loads, "--disable-cuda-graph")
    assert eager.decode_graph_limit is None
    assert eager.recommended_mrr == eager.fits_on > 256
    assert not any("CUDA graphs" in n for n in eager.notes)
    assert safe_cap(eager.fits_on, None) == eager.fits_on


def _plan_at(loads: list[int], *flags: str) -> Plan:
    return make_plan(
        PlanInputs(
            parse_server_argv(["--model-path", "m", *flags]).values,
            model_config("llama-3.1-8b"),
            None,
            lookup_gpu("H100"),
            input_len=512,
            output_len=256,
            concurrency=loads,
        )
    )
