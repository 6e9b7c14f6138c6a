"""The simulated engine speaks SGLang 0.5.23's HTTP API and metrics."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from specserver_engine.sim.metrics import E2E_BUCKETS, ITL_BUCKETS, TTFT_BUCKETS
from stack import QWEN_EAGLE3, Simulator

FAST = ["--time-scale", "50", "--sim-startup-seconds", "0"]
SCHED = {"model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank"}


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str, dict[str, str]]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read().decode(), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), dict(exc.headers)


def post(url: str, body: dict[str, Any]) -> Any:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=60) as resp:
        text = resp.read().decode()
    if text.startswith("data:"):
        return [
            json.loads(line[5:])
            for line in text.splitlines()
            if line.startswith("data:") and line != "data: [DONE]"
        ]
    return json.loads(text)


def generate(sim: Simulator, n: int = 16, stream: bool = False, kind: str = "random") -> Any:
    return post(
        f"{sim.url}/generate",
        {
            "text": "hello " * 64,
            "stream": stream,
            "prompt_kind": kind,
            "sampling_params": {"max_new_tokens": n, "ignore_eos": True},
        },
    )


def families(text: str) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_metrics_names_types_labels_and_buckets(start_simulator: Any) -> None:
    sim = start_simulator(*QWEN_EAGLE3, "--enable-metrics", *FAST)
    generate(sim)
    generate(sim, stream=True)
    status, text, headers = get(f"{sim.url}/metrics", {"Accept": "text/plain"})
    assert status == 200 and headers["Content-Type"].startswith("text/plain")
    fams = families(text)
    gauges = (
        "num_running_reqs",
        "num_queue_reqs",
        "gen_throughput",
        "token_usage",
        "spec_accept_length",
        "spec_accept_rate",
        "max_total_num_tokens",
        "context_len",
    )
    for name in gauges:
        fam = fams[f"sglang:{name}"]
        assert fam.type == "gauge", name
        assert set(fam.samples[0].labels) == SCHED, name
    for name in ("prompt_tokens", "generation_tokens", "num_requests"):
        fam = fams[f"sglang:{name}"]
        assert fam.type == "counter"
        assert {s.name for s in fam.samples} == {f"sglang:{name}_total"}
        assert set(fam.samples[0].labels) == {"model_name", "engine_type", "is_streaming"}
    expected = {
        "time_to_first_token_seconds": TTFT_BUCKETS,
        "inter_token_latency_seconds": ITL_BUCKETS,
        "request_time_per_output_token_seconds": ITL_BUCKETS,
        "e2e_request_latency_seconds": E2E_BUCKETS,
    }
    for name, buckets in expected.items():
        fam = fams[f"sglang:{name}"]
        assert fam.type == "histogram"
        les = sorted({float(s.labels["le"]) for s in fam.samples if s.name.endswith("_bucket")})
        assert les == sorted([*buckets, float("inf")]), name
    assert "is_streaming" not in fams["sglang:inter_token_latency_seconds"].samples[0].labels
    assert fams["sglang:max_total_num_tokens"].samples[0].value > 8000
    assert fams["sglang:generation_tokens"].samples[0].value >= 16
    assert not any(s.name.endswith("_created") for f in fams.values() for s in f.samples)


def test_openmetrics_negotiation_rewrites_sample_names(start_simulator: Any) -> None:
    sim = start_simulator(*QWEN_EAGLE3, "--enable-metrics", *FAST)
    status, text, headers = get(
        f"{sim.url}/metrics", {"Accept": "application/openmetrics-text; version=1.0.0"}
    )
    assert status == 200 and "openmetrics" in headers["Content-Type"]
    assert "sglang_num_running_reqs{" in text  # samples lose the colon
    assert "# TYPE sglang:num_running_reqs gauge" in text  # metadata keeps it


def test_metrics_only_with_enable_metrics(start_simulator: Any) -> None:
    sim = start_simulator(*QWEN_EAGLE3, *FAST)
    assert get(f"{sim.url}/metrics")[0] == 404


def test_ready_is_503_while_loading(start_simulator: Any) -> None:
    sim = start_simulator(
        *QWEN_EAGLE3, "--time-scale", "1", "--sim-startup-seconds", "3", wait=False
    )
    import time

    deadline = time.monotonic() + 15
    first = None
    while time.monotonic() < deadline:
        try:
            first = get(f"{sim.url}/ready")[0]
            break
        except (urllib.error.URLError, OSError):
            time.sleep(0.1)
    assert first == 503
    assert get(f"{sim.url}/health")[0] == 503
    sim.wait_ready()
    assert get(f"{sim.url}/health")[0] == 200


def test_server_info_shows_the_resolved_launch(start_simulator: Any) -> None:
    sim = start_simulator(
        "--model-path",
        "Qwen/Qwen3-8B",
        "--speculative-algorithm",
        "eagle3",
        "--speculative-draft-model-path",
        "Tengyunw/qwen3_8b_eagle3",
        "--mem-fraction-static",
        "0.85",
        *FAST,
    )
    generate(sim, 32)
    _, text, _ = get(f"{sim.url}/server_info")
    info = json.loads(text)
    assert info["speculative_algorithm"] == "EAGLE3"
    assert (
        info["speculative_num_steps"],
        info["speculative_eagle_topk"],
        info["speculative_num_draft_tokens"],
    ) == (3, 1, 4)  # auto-chosen for Qwen3
    assert info["max_running_requests"] == 48  # the silent reset
    assert info["max_total_num_tokens"] > 8000 and info["version"] == "0.5.23"
    assert info["host"] == "127.0.0.1" and info["speculative_accept_threshold_single"] == 1.0
    assert info["internal_states"][0]["avg_spec_accept_length"] > 1.0
    _, models, _ = get(f"{sim.url}/v1/models")
    assert json.loads(models)["data"][0]["max_model_len"] == 40960
    _, model_info, _ = get(f"{sim.url}/model_info")
    assert json.loads(model_info)["architectures"] == ["Qwen3ForCausalLM"]


def test_generate_meta_info_has_spec_fields_on_the_final_chunk(start_simulator: Any) -> None:
    sim = start_simulator(*QWEN_EAGLE3, *FAST)
    whole = generate(sim, 40)
    meta = whole["meta_info"]
    assert meta["completion_tokens"] == 40 and meta["prompt_tokens"] == 64
    assert meta["spec_verify_ct"] >= 10
    assert meta["spec_accept_length"] == pytest.approx(40 / meta["spec_verify_ct"])
    assert sum(meta["spec_correct_drafts_histogram"]) == meta["spec_verify_ct"]
    chunks = generate(sim, 40, stream=True)
    assert "spec_verify_ct" in chunks[-1]["meta_info"]
    assert all("spec_verify_ct" not in c["meta_info"] for c in chunks[:-1])
    assert len(chunks) < 40  # several tokens per chunk under speculation


def test_openai_endpoints_stream_and_not(start_simulator: Any) -> None:
    sim = start_simulator(*QWEN_EAGLE3, *FAST)
    comp = post(
        f"{sim.url}/v1/completions", {"prompt": "a b c", "max_tokens": 8, "ignore_eos": True}
    )
    assert comp["usage"]["completion_tokens"] == 8 and comp["object"] == "text_completion"
    chat = post(
        f"{sim.url}/v1/chat/completions",
        {
            "messages": [{"role": "user", "content": "hi there"}],
            "max_tokens": 8,
            "return_spec_tokens_details": True,
        },
    )
    assert chat["choices"][0]["message"]["role"] == "assistant"
    assert "spec_accept_length" in chat["sglext"]["spec_tokens_details"]
    events = post(
        f"{sim.url}/v1/chat/completions",
        {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, "stream": True},
    )
    assert events[-1]["choices"][0]["finish_reason"] in ("length", "stop")
    assert events[0]["object"] == "chat.completion.chunk"
