"""The public validation corpus: its figures plan, the leave-one-source-out machinery holds a
source out, the corpus fit touches only mechanism constants, and plan names what it does not
model."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import fields
from typing import Any

import pytest

from specserver_advisor.gpus import lookup_gpu
from specserver_advisor.loaders.corpus import load_corpus, model_config
from specserver_advisor.perf import validation
from specserver_advisor.perf.calibration import field_config
from specserver_advisor.perf.constants import (
    CORPUS_FITTED,
    DEFAULT_CALIBRATION,
    UNFITTED,
    Calibration,
)
from specserver_advisor.perf.model import predict
from specserver_advisor.perf.plan import PlanInputs, make_plan
from specserver_advisor.sglang.flags import parse_server_argv


def test_every_figure_names_its_source_and_plans() -> None:
    corpus = load_corpus()
    figs = validation.build(corpus, model_config)
    assert len(figs) == len(corpus["figures"]) >= 40
    for fig in figs:
        assert corpus["sources"][fig.source]["items"], fig.source
        assert all(
            item["url"].startswith("https://") for item in corpus["sources"][fig.source]["items"]
        )
        value = validation.predict_figure(fig, DEFAULT_CALIBRATION)
        assert math.isfinite(value) and value > 0, fig.label
    kinds = {f.kind for f in figs}
    assert {"plain", "speed-up", "loss"} <= kinds
    gpus = {f.scenario.gpu.name for f in figs}
    assert {"H100", "H200"} <= gpus and any(lookup_gpu(g).rocm for g in gpus)
    assert any(f.scenario.nnodes > 1 for f in figs)


def test_the_corpus_fit_moves_only_mechanism_constants() -> None:
    """No constant per model or per card: the corpus fits latencies every launch pays (a
    kernel's floor, an all-reduce's and the inter-node link's latency), nothing named after a
    model or a card, and none the field fit owns."""
    names = {f.name for f in fields(Calibration)}
    assert set(CORPUS_FITTED) <= names
    assert set(CORPUS_FITTED) <= set(UNFITTED)
    for name in CORPUS_FITTED:
        assert name.endswith("_s")
        for word in ("llama", "qwen", "deepseek", "h100", "h200", "b200", "mi3", "l4", "gb10"):
            assert word not in name
    figs = validation.build(load_corpus(), model_config)
    fitted = validation.fit(figs, rounds=1)
    moved = {
        f.name
        for f in fields(Calibration)
        if getattr(fitted, f.name) != getattr(DEFAULT_CALIBRATION, f.name)
    }
    assert moved <= set(CORPUS_FITTED)


def test_a_held_out_source_is_predicted_by_a_fit_that_never_saw_it() -> None:
    figs = validation.build(load_corpus(), model_config)
    # Tenstorrent's is the one graph-captured two-node source (sglang issue #3361's two-node
    # launch decodes eagerly, bound by its launches): held out, the fit does not move the
    # inter-node latency from the start, while the fit on everything moves it.
    others = [f for f in figs if f.source != "tenstorrent"]
    start = validation.PRIOR
    without = validation.fit(others, rounds=1)
    assert without.internode_latency_s == start.internode_latency_s
    # The start is the first-principles prior, not the committed defaults (the fit on every
    # source): a held-out source never gets back a constant its own figures set.
    for name in CORPUS_FITTED:
        assert getattr(start, name) != getattr(DEFAULT_CALIBRATION, name), name
    # Its figures alone pull a latency far above theirs (400 us against their ~80) down.
    worse = Calibration(**{**start.__dict__, "internode_latency_s": start.internode_latency_s * 20})
    with_it = validation.fit([f for f in figs if f.source == "tenstorrent"], worse, rounds=2)
    assert with_it.internode_latency_s < worse.internode_latency_s


def test_the_report_prints_every_figure_and_the_summary() -> None:
    figs = validation.build(load_corpus(), model_config)[:3]
    scored = [validation.Scored(f, f.value, f.value * 1.1) for f in figs]
    text = validation.report(DEFAULT_CALIBRATION, scored)
    for f in figs:
        assert f.label in text
    assert "within 25%: 3/3" in text
    assert "right side of 1.0x" in text
    # A ratio the model puts on the wrong side is named under the summary.
    ratio = next(f for f in validation.build(load_corpus(), model_config) if f.kind == "loss")
    wrong = validation.report(DEFAULT_CALIBRATION, [validation.Scored(ratio, 1.5, 1.5)])
    assert f"wrong side of 1.0x: {ratio.label} (the model's ratio 1.50)" in wrong


def test_plan_names_expert_parallelism_dp_attention_and_fp4_as_not_modelled() -> None:
    argv = ["--model-path", "m", "--tp-size", "8", "--ep-size", "8", "--enable-dp-attention"]
    argv += ["--dp-size", "8", "--moe-a2a-backend", "deepep", "--quantization", "modelopt_fp4"]
    plan = make_plan(
        PlanInputs(
            parse_server_argv(argv).values,
            field_config("deepseek-v3"),
            None,
            lookup_gpu("MI355X"),
            concurrency=[1],
        )
    )
    text = "\n".join(plan.notes)
    assert "EP all-to-all not modelled (--ep-size 8, --moe-a2a-backend deepep)" in text
    assert "DP attention not modelled (--enable-dp-attention --dp-size 8)" in text
    assert "FP4 weights not modelled (--quantization modelopt_fp4)" in text
    plain = make_plan(
        PlanInputs(
            parse_server_argv(["--model-path", "m", "--tp-size", "8"]).values,
            field_config("deepseek-v3"),
            None,
            lookup_gpu("MI355X"),
            concurrency=[1],
        )
    )
    assert not any("not modelled" in n for n in plain.notes)


def test_amd_cards_plan_with_rocm_attention_defaults() -> None:
    from specserver_advisor.sglang.serverargs import default_attention_backend

    mi = lookup_gpu("mi300x")
    assert mi.rocm and mi.generation == "cdna3" and lookup_gpu("MI355X").generation == "cdna4"
    assert default_attention_backend(mi, False, {}) == "aiter"
    # aiter's MLA decode takes 16 or 128 heads a rank: DeepSeek's 128 at TP 1 or 8, not 4.
    assert default_attention_backend(mi, True, {"tp_size": 8}, "", 128) == "aiter"
    assert default_attention_backend(mi, True, {"tp_size": 4}, "", 128) == "triton"


def test_a_fixed_prompt_set_pays_its_tail() -> None:
    """A benchmark of a fixed prompt set (tokens over wall time) runs fewer requests as the set
    runs out: at one request it is the closed loop's speed; at a concurrency that holds the
    whole set it is below the closed loop's, and it never falls as the concurrency grows."""
    figs = validation.build(load_corpus(), model_config)
    # SpecForge's bench (short MT-bench prompts, whose prefill the set's reading leaves out).
    figs = [f for f in figs if f.prompts and f.source == "specforge-339"]
    assert figs
    # The widest launch (graphs and running requests capped at its bench batch of 64).
    fig = max(figs, key=lambda f: f.cap_off)
    assert fig.cap_off >= fig.prompts
    lengths = validation.answer_lengths(fig.prompts, fig.scenario.output_len)
    assert len(lengths) == fig.prompts
    assert sum(lengths) / len(lengths) == pytest.approx(fig.scenario.output_len, rel=0.05)
    cal = DEFAULT_CALIBRATION

    def at(c: int) -> validation.Figure:
        return dataclasses.replace(fig, concurrency=c)

    def closed(c: int) -> float:
        return predict(fig.scenario, c, fig.cap_off, False, cal).output_tok_s

    assert validation.batch_tok_s(at(1), False, cal) == pytest.approx(closed(1), rel=1e-3)
    whole = validation.batch_tok_s(at(fig.prompts), False, cal)
    assert whole < 0.8 * closed(fig.prompts)
    speeds = [validation.batch_tok_s(at(c), False, cal) for c in (1, 2, 4, 8, 16, 20, 32)]
    assert speeds == sorted(speeds)
    assert speeds[-1] == pytest.approx(speeds[-2])


def test_an_end_to_end_latency_is_the_wait_the_prefill_and_the_whole_answer() -> None:
    figs = [f for f in validation.build(load_corpus(), model_config) if f.metric == "e2e_ms"]
    assert figs
    one = min(figs, key=lambda f: f.concurrency)
    many = max(figs, key=lambda f: f.concurrency)
    scn = one.scenario
    p = predict(scn, 1, one.cap_off, False, DEFAULT_CALIBRATION)
    e2e = validation.predict_figure(dataclasses.replace(one, concurrency=1), DEFAULT_CALIBRATION)
    # More than the answer's tokens at the running TPOT (the prompt's prefill comes first) ...
    assert e2e > scn.output_len * p.tpot_ms > 0
    # ... and longer when more requests share the steps.
    assert validation.predict_figure(many, DEFAULT_CALIBRATION) > e2e


def test_a_fixed_set_sent_at_once_runs_at_most_the_servers_cap() -> None:
    figs = [f for f in validation.build(load_corpus(), model_config) if f.prompts]
    fig = next(f for f in figs if f.scenario.spec is not None)
    burst = dataclasses.replace(fig, concurrency=fig.prompts)
    at_cap = dataclasses.replace(fig, concurrency=fig.cap_on)
    # Every prompt sent at once: the server runs its cap and queues the rest, as a client with
    # the cap's slots would send them.
    assert fig.cap_on < fig.prompts
    assert validation.batch_tok_s(burst, True, DEFAULT_CALIBRATION) == pytest.approx(
        validation.batch_tok_s(at_cap, True, DEFAULT_CALIBRATION)
    )


def test_a_benchmark_whose_lengths_vary_has_its_decodes_interrupted_by_new_prompts() -> None:
    """A setup whose client draws lengths from a range (``varied_lengths``: SGLang's cookbook at
    the default range ratio, InferenceX at 0.8) has requests finishing and arriving at different
    steps: each new prompt's prefill runs ahead of the decodes in flight, which a TPOT at a
    batch pays; one request alone has nobody's prefill in its way. A fixed-length setup arrives
    in waves and pays none."""
    corpus = load_corpus()
    figs = validation.build(corpus, model_config)
    varied = [f for f in figs if corpus["setups"][setup_of(corpus, f)].get("varied_lengths")]
    assert {f.source for f in varied} >= {"sglang", "inferencex"}
    cal = DEFAULT_CALIBRATION
    for fig in (f for f in varied if f.metric == "tpot_ms"):
        scn = fig.scenario
        assert scn.staggered
        p = predict(scn, fig.concurrency, fig.cap_off, False, cal)
        if fig.concurrency == 1:
            assert p.tpot_ms == pytest.approx(p.step_s * 1000)
        else:
            assert p.tpot_ms > p.step_s * 1000
            waves = predict(
                dataclasses.replace(scn, staggered=False), fig.concurrency, fig.cap_off, False, cal
            )
            assert waves.tpot_ms == pytest.approx(waves.step_s * 1000)


def setup_of(corpus: dict[str, Any], fig: validation.Figure) -> str:
    return next(f["setup"] for f in corpus["figures"] if f["label"] == fig.label)


def test_ttft_figures_are_scored_but_never_fitted() -> None:
    """A published TTFT is the wait and the prefill, which no corpus-fitted constant prices:
    it is in the table and the summary, and the fits (on all, and each held out) are the fits
    without it."""
    figs = validation.build(load_corpus(), model_config)
    ttft = [f for f in figs if f.kind == "ttft"]
    assert {f.source for f in ttft} >= {"inferencex", "tenstorrent"}
    rest = [f for f in figs if f.kind != "ttft"]
    full, scored = validation.leave_one_source_out(figs, rounds=1)
    assert full == validation.fit(rest, rounds=1)
    assert [s.figure for s in scored] == figs
    assert validation.summary(scored)["ttft"]["n"] == len(ttft)
    cal = DEFAULT_CALIBRATION
    # One request: the first token waits for nothing but its own prefill, which grows with the
    # prompt.
    alone = sorted((f for f in ttft if f.concurrency == 1), key=lambda f: f.scenario.input_len)
    times = [validation.predict_figure(f, cal) for f in alone]
    assert len(times) >= 2 and times == sorted(times) and times[0] < times[-1]


def test_a_curve_point_is_read_at_its_own_load() -> None:
    """InferenceX publishes points of a throughput-interactivity curve (tok/s/GPU of input and
    output, at tok/s/user = 1000 / TPOT). A point is read at the load Little's law gives from
    its own two numbers: a model that decodes at the published per-user speed there gives back
    the published throughput, and one a tenth slower gives a tenth less (not the several-fold
    error of reading throughput at a speed near the curve's top). A ratio of two modes is read
    the same way, each at its own load."""
    figs = validation.build(load_corpus(), model_config)
    plain = next(f for f in figs if f.metric == "tok_s_per_gpu_at")
    cal = DEFAULT_CALIBRATION
    total = (plain.scenario.input_len + plain.scenario.output_len) / plain.scenario.output_len
    # The model's own point at 24 users: 24 x its per-user speed, as tok/s/GPU of in and out.
    speed = validation.user_speed_at(plain, 24, False, cal)
    point = dataclasses.replace(plain, interactivity=speed, value=24 * speed * total / plain.gpus)
    assert validation.published_load(point, point.value) == pytest.approx(24)
    assert validation.predict_figure(point, cal) == pytest.approx(point.value, rel=1e-6)
    # Published a tenth faster at the same load: the model reads a tenth short, not several-fold.
    faster = dataclasses.replace(point, interactivity=speed / 0.9, value=point.value / 0.9)
    assert validation.published_load(faster, faster.value) == pytest.approx(24)
    assert validation.predict_figure(faster, cal) / faster.value == pytest.approx(0.9)
    # A fractional load lies between the whole loads around it.
    at = [validation.user_speed_at(plain, c, False, cal) for c in (24, 24.5, 25)]
    assert at[0] >= at[1] >= at[2] and at[0] > at[2]
    # A ratio of two modes at one per-user speed: a draft that is never accepted (its
    # speculative point slower than plain at 8 users), and the plain load that gives a user
    # that same speed, found by bisection: the published ratio is then the model's own.
    ratio = next(f for f in figs if f.metric == "speedup_at")
    never = dataclasses.replace(
        ratio, scenario=dataclasses.replace(ratio.scenario, accept_length=1.0)
    )
    on = validation.user_speed_at(never, 8, True, cal)
    lo, hi = 8.0, 1024.0
    assert (
        validation.user_speed_at(never, lo, False, cal)
        > on
        > validation.user_speed_at(never, hi, False, cal)
    )
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if validation.user_speed_at(never, mid, False, cal) > on else (lo, mid)
    off_tok_s = lo * on * total / ratio.gpus
    same = dataclasses.replace(never, interactivity=on, off_tok_s_per_gpu=off_tok_s, value=8 / lo)
    assert same.value < 1
    assert validation.predict_figure(same, cal) == pytest.approx(same.value, rel=1e-6)


def test_a_long_tailed_set_waits_for_its_longest_answers_and_pays_its_prefills() -> None:
    """Real conversations' answers (ShareGPT) are long-tailed: a set of them sent at once
    drains to a few long answers running at a small batch, so the set's tok/s falls below an
    evenly spread set's of the same mean; and every prompt's prefill is in the wall time."""
    figs = validation.build(load_corpus(), model_config)
    burst = next(f for f in figs if f.spread == "long-tailed" and f.concurrency >= f.prompts)
    assert burst.longest > 0
    tailed = validation.answer_lengths(500, 200, "long-tailed", 1800)
    even = validation.answer_lengths(500, 200)
    assert sum(tailed) / 500 == pytest.approx(200, rel=0.05)
    assert sum(even) / 500 == pytest.approx(200, rel=0.05)
    assert max(tailed) > 2.5 * max(even) and max(tailed) <= 1800
    cal = DEFAULT_CALIBRATION
    as_even = dataclasses.replace(burst, spread="even")
    assert validation.batch_tok_s(burst, False, cal) < 0.8 * validation.batch_tok_s(
        as_even, False, cal
    )
    # A card that prefills at half the rate: the same decodes (the TPOT of a set sent in waves
    # has no prefill in it), a longer wall time.
    slow = dataclasses.replace(cal, prefill_efficiency=cal.prefill_efficiency / 2)
    for n in (1, 50, burst.prompts):
        assert predict(burst.scenario, n, burst.cap_off, False, slow).tpot_ms == pytest.approx(
            predict(burst.scenario, n, burst.cap_off, False, cal).tpot_ms
        )
    assert validation.batch_tok_s(burst, False, slow) < validation.batch_tok_s(burst, False, cal)


def test_the_corpus_runs_speculation_as_its_releases_did() -> None:
    """Every speculative figure comes from a release before spec V2 was SGLang's default: the
    corpus says so with its sources, and its launches run speculation synchronously while
    their plain launches keep the overlap scheduler."""
    corpus = load_corpus()
    said = corpus["speculation"]
    assert said["synchronous"] is True
    assert all(item["url"].startswith("https://") for item in said["sources"])
    figs = validation.build(corpus, model_config)
    assert all(not f.scenario.spec_overlap and f.scenario.overlap_schedule for f in figs)
    unsaid = {**corpus, "speculation": {"synchronous": False}}
    assert all(f.scenario.spec_overlap for f in validation.build(unsaid, model_config))


def test_littles_law_gives_back_the_load_the_models_own_throughput_came_from() -> None:
    """Independent of the reading's own arithmetic: the model's closed loop at 24 users, its
    output tok/s as InferenceX would publish it (input and output over the GPUs) and its TPOT
    as interactivity, is read back at ~24 users (its TTFT's share of a request aside)."""
    figs = validation.build(load_corpus(), model_config)
    plain = next(f for f in figs if f.metric == "tok_s_per_gpu_at")
    p = predict(plain.scenario, 24, plain.cap_off, False, DEFAULT_CALIBRATION)
    total = (plain.scenario.input_len + plain.scenario.output_len) / plain.scenario.output_len
    point = dataclasses.replace(
        plain, interactivity=1000 / p.tpot_ms, value=p.output_tok_s * total / plain.gpus
    )
    assert validation.published_load(point, point.value) == pytest.approx(24, rel=0.05)


def test_a_point_above_the_launchs_cap_is_refused_not_read_at_the_cap() -> None:
    figs = validation.build(load_corpus(), model_config)
    ratio = next(f for f in figs if f.metric == "speedup_at")
    capped = dataclasses.replace(ratio, cap_on=8)
    with pytest.raises(ValueError, match="above the speculative launch's cap of 8"):
        validation.predict_figure(capped, DEFAULT_CALIBRATION)


def test_a_curve_ratios_side_is_the_models_own_at_equal_speed() -> None:
    """A ratio read at the published loads keeps the published value's scale; its side is the
    model's own: how many users each mode serves at the published per-user speed."""
    figs = validation.build(load_corpus(), model_config)
    ratio = next(f for f in figs if f.metric == "speedup_at")
    cal = DEFAULT_CALIBRATION
    on, off = (validation.users_at_speed(ratio, s, cal) for s in (True, False))
    for users, spec in ((on, True), (off, False)):
        cap = ratio.cap_on if spec else ratio.cap_off
        assert 1 <= users <= cap
        speed = validation.user_speed_at(ratio, users, spec, cal)
        # The load at that speed, or the whole batch still at least as fast.
        assert speed == pytest.approx(ratio.interactivity, rel=1e-3) or (
            users == cap and speed >= ratio.interactivity
        )
    assert validation.equal_speed_ratio(ratio, cal) == pytest.approx(on / off)
    # A draft never accepted: fewer users at that speed than plain, a loss by the model's side.
    never = dataclasses.replace(
        ratio, scenario=dataclasses.replace(ratio.scenario, accept_length=1.0)
    )
    assert validation.equal_speed_ratio(never, cal) < 1.0
    scored = validation.Scored(ratio, 2.0, 2.0, validation.equal_speed_ratio(never, cal))
    assert ratio.kind == "loss" or not scored.right_side
    # A speed no mode reaches: no users either way, parity.
    unreachable = dataclasses.replace(ratio, interactivity=1e6)
    assert validation.equal_speed_ratio(unreachable, cal) == 1.0


@pytest.mark.parametrize(
    ("figure", "setup", "says"),
    [
        ({"metric": "speedup_at", "interactivity": 50}, {}, "off_tok_s_per_gpu"),
        ({"metric": "tok_s_per_gpu_at", "interactivity": 0}, {}, "interactivity must be"),
        ({"metric": "tpot_ms"}, {"answers": "long-tailed"}, "describe a fixed set"),
        ({"metric": "tpot_ms"}, {"prompts": 9, "answers": "uniform"}, "answers must be one of"),
        ({"metric": "tpot_ms"}, {"prompts": 9, "longest_answer": -1}, "longest_answer must be"),
        ({"metric": "tpot_ms"}, {"prompts": 9, "varied_lengths": True}, "drop varied_lengths"),
    ],
)
def test_a_figure_the_reading_would_misread_is_refused_by_name(
    figure: dict[str, Any], setup: dict[str, Any], says: str
) -> None:
    corpus = load_corpus()
    base = corpus["setups"]["r1-mi355x-tp8"]
    bad = {
        **corpus,
        "setups": {"s": {**base, "varied_lengths": False, **setup}},
        "figures": [{"source": "inferencex", "setup": "s", "label": "odd", "value": 1.0, **figure}],
    }
    with pytest.raises(ValueError, match=f"figure 'odd': .*{says}"):
        validation.build(bad, model_config)
