"""``plan --search-shape``: the search's invariants on the bundled configs.

Every shape it names (per band and the choice) resolves through SGLang 0.5.23's resolution
without an error and to itself; no band's best is worse than the given shape in the model (in
the score it ranks on: mode Auto's, tok/s scaled down past the TTFT SLO); the bands cover the
concurrency range in order; the search is bounded; JSON and text carry them. On the field's L4
case (field-measurements.md: even throughput and a first token 2-3x later at 32 users) and on
DeepSeek-V3 NEXTN on 8 x H200 it names a shape per band and a crossover.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from specserver_advisor.cli.main import main
from specserver_advisor.cli.plansearchshape import MAX_CANDIDATES
from specserver_advisor.sglang.flags import parse_server_argv
from specserver_advisor.sglang.resolve import resolve_launch
from stack import load_config

L4 = [
    "--model", "Qwen/Qwen3-8B", "--draft", "Tengyunw/qwen3_8b_eagle3", "--gpu", "L4",
    "--steps", "3", "--topk", "1", "--draft-tokens", "4", "--accept-length", "2.73",
    "--mem-fraction-static", "0.85",
]  # fmt: skip
DEEPSEEK = [
    "--model", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--gpus", "8", "--algorithm",
    "NEXTN", "--steps", "1", "--topk", "1", "--draft-tokens", "2", "--accept-length", "1.87",
]  # fmt: skip
CONCURRENCY = [1, 2, 4, 8, 16, 32, 64, 128]
#: ``plan``'s default ``--concurrency``.
DEFAULT_LOADS = [1, 2, 4, 8, 16, 32, 64]


def search(
    capsys: pytest.CaptureFixture[str], *argv: str, loads: list[int] | None = CONCURRENCY
) -> tuple[dict[str, Any], str]:
    """The search's JSON and text (``loads`` None: ``plan``'s default concurrency)."""
    args = ["plan", *argv, "--search-shape"]
    if loads is not None:
        args += ["--concurrency", ",".join(map(str, loads))]
    main(args)
    text = capsys.readouterr().out
    main([*args, "--format", "json"])
    data: dict[str, Any] = json.loads(capsys.readouterr().out)["search"]
    return data, text


def shape_argv(base: list[str], shape: dict[str, Any]) -> list[str]:
    """The launch ``base`` (advisor flags) as SGLang flags, at ``shape``."""
    flags = dict(zip(base[::2], base[1::2], strict=True))
    argv = ["--model-path", flags["--model"]]
    if "--draft" in flags:
        argv += ["--speculative-draft-model-path", flags["--draft"]]
    argv += ["--speculative-algorithm", flags.get("--algorithm", "EAGLE3")]
    if "--gpus" in flags:
        argv += ["--tp", flags["--gpus"]]
    for flag, key in (
        ("--speculative-num-steps", "steps"),
        ("--speculative-eagle-topk", "topk"),
        ("--speculative-num-draft-tokens", "draft_tokens"),
    ):
        argv += [flag, str(shape[key])]
    return argv + (["--speculative-adaptive"] if shape["adaptive"] else [])


def configs(argv: list[str]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The bundled target and draft configs of a launch the tests search."""
    if "deepseek-ai/DeepSeek-V3" in argv:
        return load_config("deepseek-v3"), None  # NEXTN: the draft is the target's MTP layer
    return load_config("qwen3-8b"), load_config("qwen3-8b-eagle3")


def assert_resolves_to_itself(argv: list[str], shape: dict[str, Any]) -> None:
    r = resolve_launch(parse_server_argv(argv).values, *configs(argv))
    assert not r.errors and r.reserved_tokens_error is None, (shape, r.errors)
    assert bool(r.get("speculative_adaptive")) == shape["adaptive"]
    assert r.get("speculative_num_steps") == shape["steps"]
    assert r.get("speculative_eagle_topk") == shape["topk"]
    assert r.get("speculative_num_draft_tokens") == shape["draft_tokens"]


def assert_invariants(
    data: dict[str, Any], base: list[str], extra: list[str], loads: list[int] = CONCURRENCY
) -> None:
    assert data["tried"] <= MAX_CANDIDATES + 1 and data["accepted"] >= 1
    bands = data["bands"]
    covered = [p["concurrency"] for b in bands for p in b["points"]]
    assert covered == loads  # every load, once, in order
    assert [(b["from"], b["to"]) for b in bands] == [
        (b["points"][0]["concurrency"], b["points"][-1]["concurrency"]) for b in bands
    ]
    for band in bands:
        for point in band["points"]:
            if point["given_score"] is not None:
                assert point["best_score"] >= point["given_score"]  # never worse than given
            if band["shape"] is None:
                assert point["best_score"] <= point["off_score"]
            else:
                assert point["best_score"] > point["off_score"]
        if band["shape"] is not None:
            assert_resolves_to_itself(shape_argv(base, band["shape"]) + extra, band["shape"])
    assert data["choice"] is not None and data["max_running_requests"] >= 1
    assert_resolves_to_itself(data["argv"], data["choice"])
    assert (
        parse_server_argv(data["argv"]).values["max_running_requests"]
        == (data["max_running_requests"])
    )


def test_l4_qwen3_eagle3_search_names_a_shape_per_band_sglang_accepts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    data, text = search(capsys, *L4)
    assert_invariants(data, L4, [])
    # "never worse than the given shape" against the given launch planned on its own (plan
    # without --search-shape), not the search's own row for it
    main(["plan", *L4, "--concurrency", ",".join(map(str, CONCURRENCY)), "--format", "json"])
    alone = {
        p["concurrency"]: p["on"]["output_tok_s"]
        for p in json.loads(capsys.readouterr().out)["curves"]
    }
    for point in (p for b in data["bands"] for p in b["points"]):
        assert point["given_tok_s"] == pytest.approx(alone[point["concurrency"]], rel=1e-3)
        if point["best_ttft_p99_ms"] <= 5000 and point["given_ttft_p99_ms"] <= 5000:
            assert point["best_tok_s"] >= point["given_tok_s"]
    assert all(b["shape"] is not None for b in data["bands"][:1])  # speculation pays at low load
    assert "bands: " in text and "crossover (speculation stops paying" in text
    assert "# SpecServer (the choice)" in text
    choice = data["choice"]
    snippet = f"numSteps: {choice['steps']}, eagleTopk: {choice['topk']}"
    assert snippet in text and "maxRunningRequests:" not in text  # mode Auto: a cap per engine
    assert f"# --max-running-requests {data['max_running_requests']} is left out" in text


def test_shapes_sglang_refuses_are_never_chosen(capsys: pytest.CaptureFixture[str]) -> None:
    """trtllm_mha takes topk 1 only: SGLang refuses every tree, so the search names none (on an
    H100: SGLang refuses trtllm_mha itself below SM90)."""
    extra = ["--attention-backend", "trtllm_mha"]
    h100 = [x if x != "L4" else "H100" for x in L4]
    data, _ = search(capsys, *h100, *extra)
    assert data["accepted"] < data["tried"]
    assert_invariants(data, h100, extra)
    assert all(b["shape"]["topk"] == 1 for b in data["bands"] if b["shape"])
    assert data["crossover_concurrency"] is not None  # chains stop paying at high load


def assert_crossover_printed(data: dict[str, Any], text: str) -> float:
    """A finite crossover in the JSON and the same figure in the text; no band left unnamed."""
    cross = data["crossover_concurrency"]
    assert cross is not None and data["no_crossover_reason"] is None
    assert f"crossover (speculation stops paying, best shape vs off): {cross:.1f} users" in text
    assert all(b["label"] for b in data["bands"])
    assert f"bands: {data['bands'][0]['from']}-" in text
    return float(cross)


@pytest.mark.parametrize("loads", [None, CONCURRENCY], ids=["default-loads", "to-128"])
def test_l4_search_stops_speculating_below_the_32_users_the_field_measured_a_loss_at(
    capsys: pytest.CaptureFixture[str], loads: list[int] | None
) -> None:
    """The field's L4 sweep (field-measurements.md): EAGLE-3 gave 1.6x-2.3x TPOT at every load
    and 2.37x output at 1 user, but only 1.00x output at 32 with the first token 2.7x later
    (requests wait for the smaller pool). Ranked on throughput alone, a wide tree saturated
    at the pool's 13 requests beat speculation off at every load: no crossover."""
    data, text = search(capsys, *L4, loads=loads)
    assert_invariants(data, L4, [], loads or DEFAULT_LOADS)
    cross = assert_crossover_printed(data, text)
    assert 8 < cross < 32
    assert all(b["shape"] is not None for b in data["bands"] if b["to"] <= 8)
    assert [b["shape"] for b in data["bands"] if b["from"] == 32] == [None]  # off at 32 users
    assert data["choice_crossover_concurrency"] is not None
    assert data["max_running_requests"] <= data["choice_crossover_concurrency"] + 1


def test_deepseek_v3_nextn_h200_search_names_a_shape_and_a_crossover(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Speculation pays at every load plan asks by default (to 64), where SGLang's cap of 48
    holds the speculative engine; off keeps growing past it, so the crossover lies beyond the
    printed loads: the search looks for it over the policy context's loads (to 256)."""
    data, text = search(capsys, *DEEPSEEK, loads=None)
    assert_invariants(data, DEEPSEEK, [], DEFAULT_LOADS)
    assert all(b["shape"] is not None for b in data["bands"])
    cross = assert_crossover_printed(data, text)
    assert 64 < cross <= data["crossover_loads_to"]
    assert data["choice"] is not None and data["choice_crossover_concurrency"] is not None
    assert "# SpecServer (the choice)" in text


def test_no_crossover_says_why_when_the_spec_caps_both_engines(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The L4 example caps both engines at 16 requests (``maxRunningRequests: 16``): above it
    both queue, and speculation still pays at that batch, so the model has no crossover; the
    search says why, in text and JSON, rather than nothing."""
    example = "manifests/examples/qwen3-8b-eagle3-l4.yaml"
    main(["plan", "--from", example, "--search-shape"])
    text = capsys.readouterr().out
    main(["plan", "--from", example, "--search-shape", "--format", "json"])
    data = json.loads(capsys.readouterr().out)["search"]
    assert data["crossover_concurrency"] is None
    reason = data["no_crossover_reason"]
    assert reason.startswith("spec.engine.maxRunningRequests 16 caps both engines")
    assert f"best shape vs off): none: {reason}" in text
    assert all(b["shape"] is not None for b in data["bands"])  # it does pay at every load


def test_a_tree_is_no_deeper_and_wider_than_its_draft_tokens_verify() -> None:
    """Acceptance per shape: the anchor shape gets its own accept length back; a tree accepts
    no more than the draft tokens one verify checks allow."""
    from specserver_advisor.cli.plansearchshape import Shape, accept_at, keep_probability

    given = Shape(3, 1, 4)
    q = keep_probability(2.73, given)
    assert accept_at(q, given) == pytest.approx(2.73, abs=0.01)
    for tokens in (2, 4, 8, 16, 32, 64):
        assert accept_at(q, Shape(8, 8, tokens)) <= tokens  # at most tokens - 1 drafts + 1
    assert accept_at(q, Shape(8, 8, 64)) > accept_at(q, Shape(8, 8, 9))
    assert accept_at(q, Shape(3, 2, 2)) == accept_at(q, Shape(1, 1, 2))


def test_ngram_searches_draft_tokens_only(capsys: pytest.CaptureFixture[str]) -> None:
    example = "manifests/examples/llama-ngram-a10g.yaml"
    main(["plan", "--from", example, "--search-shape", "--format", "json"])
    data = json.loads(capsys.readouterr().out)["search"]
    assert data["accepted"] >= 2
    shapes = [b["shape"] for b in data["bands"] if b["shape"]] + [data["choice"]]
    assert all(s["steps"] is None and s["topk"] is None for s in shapes)
    values = parse_server_argv(data["argv"]).values
    r = resolve_launch(values, load_config("llama-3.1-8b"), None)
    assert not r.errors
    assert r.get("speculative_num_draft_tokens") == data["choice"]["draft_tokens"]


def test_an_adaptive_shape_is_searched_and_its_snippet_says_adaptive(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from specserver_advisor.cli.plansearchshape import candidates

    adaptive = [s for s in candidates("EAGLE3") if s.adaptive]
    assert [s.steps for s in adaptive] == [1, 3, 5, 7]  # SGLang's positive candidate steps
    assert not [s for s in candidates("STANDALONE") if s.adaptive]  # SGLang runs it fixed
    given = [x for x in L4 if x not in ("--draft-tokens", "4")] + ["--speculative-adaptive"]
    data, _ = search(capsys, *given)
    assert data["given"]["adaptive"] is True
    assert_invariants(data, L4, [])
    assert main(["plan", *given]) == 0
    assert "numDraftTokens: 4, adaptive: true}" in capsys.readouterr().out


def test_search_shape_on_a_launch_it_cannot_search_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    disabled = "manifests/examples/qwen3-30b-a3b-off.yaml"
    assert main(["plan", "--from", disabled, "--search-shape"]) == 2
    assert "spec.mode is Disabled" in capsys.readouterr().err
    assert main(["plan", *L4, "--search-shape", "--plot", "x.svg"]) == 2
    assert "--search-shape draws no plot" in capsys.readouterr().err
    no_draft = ["--model", "Qwen/Qwen3-8B", "--algorithm", "EAGLE3", "--gpu", "L4"]
    assert main(["plan", *no_draft, "--search-shape"]) == 2
    assert "needs a draft" in capsys.readouterr().err
