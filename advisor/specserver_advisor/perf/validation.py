"""The public validation corpus: published figures the model is scored on, source by source.

Not a calibration set: the field fit (``calibration``) never sees these figures. The corpus
fits only the latency-bound constants that fast cards and big groups expose
(``constants.CORPUS_FITTED``: the kernel floors, the all-reduce and inter-node latencies, a
kernel's launch from Python, a synchronous speculative worker's host work per draft step) and
scores every figure leave-one-source-out: fit without that source, predict its figures. Each
figure is a plan of the closest launch (``Setup``) read at a concurrency, or at the load of a
published point of a throughput-interactivity curve (InferenceX's ``tok/s/GPU`` at
``tok/s/user``: ``at_published_load``).

Pure: the corpus and the model configs come in as dicts (``loaders.corpus``).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from specserver_advisor.gpus import lookup_gpu
from specserver_advisor.perf.constants import CORPUS_FITTED, DEFAULT_CALIBRATION, Calibration
from specserver_advisor.perf.model import Scenario, predict, prefill_time, wave_prefill_time
from specserver_advisor.perf.plan import PlanInputs, make_plan
from specserver_advisor.sglang.flags import parse_server_argv

#: A published ratio within this of 1.0 is parity: judged by its error, not by its side.
PARITY = 0.03
WITHIN = 0.25


@dataclass(frozen=True)
class Figure:
    """One published figure and the launch the model predicts it with."""

    source: str
    label: str
    metric: str
    value: float
    scenario: Scenario
    cap_on: int
    cap_off: int
    concurrency: int = 1
    interactivity: float = 0.0
    gpus: int = 1
    speculative: bool = False
    #: A benchmark that sends a fixed set of prompts (``prompts`` of them, ``concurrency`` at a
    #: time) and divides the tokens by the wall time (SpecForge's and SGLang's MT-bench scripts):
    #: 0 for a steady closed loop (``batch_tok_s``).
    prompts: int = 0
    #: A ratio read on a throughput-interactivity curve: the published tok/s/GPU of the mode
    #: it is divided by (speculation off) at ``interactivity``.
    off_tok_s_per_gpu: float = 0.0
    #: How a fixed set's answer lengths spread about their mean: ``even`` over [0, 2 mean], or
    #: ``long-tailed`` (ShareGPT's real answers: exponential, cut at ``longest``).
    spread: str = "even"
    longest: int = 0

    @property
    def kind(self) -> str:
        """plain, speed-up, loss or parity (ratios of speculation on/off), or ttft."""
        if self.metric == "ttft_ms":
            return "ttft"
        if not self.metric.startswith("speedup"):
            return "spec" if self.speculative else "plain"
        if abs(self.value - 1.0) <= PARITY:
            return "parity"
        return "speed-up" if self.value > 1 else "loss"


#: Figures read on a throughput-interactivity curve (``at_published_load``).
CURVE_METRICS = ("tok_s_per_gpu_at", "speedup_at")


def _check(f: Mapping[str, Any], setup: Mapping[str, Any]) -> None:
    """A figure or setup the reading would misread raises, naming the figure and the field."""
    where = f"figure {f.get('label')!r}"
    if f.get("metric") in CURVE_METRICS and not float(f.get("interactivity", 0)) > 0:
        raise ValueError(f"{where}: interactivity must be a positive tok/s/user")
    if f.get("metric") == "speedup_at" and not float(f.get("off_tok_s_per_gpu", 0)) > 0:
        raise ValueError(f"{where}: off_tok_s_per_gpu (the plain mode's tok/s/GPU) is required")
    prompts = f.get("prompts", setup.get("prompts", 0))
    if ("answers" in setup or "longest_answer" in setup) and not prompts:
        raise ValueError(f"{where}: answers and longest_answer describe a fixed set (prompts)")
    if setup.get("answers", "even") not in SPREADS:
        raise ValueError(f"{where}: answers must be one of {', '.join(SPREADS)}")
    if int(setup.get("longest_answer", 0)) < 0:
        raise ValueError(f"{where}: longest_answer must be >= 0")
    if prompts and setup.get("varied_lengths"):
        # A staggered TPOT already carries new prompts' prefills; the set pays them again.
        raise ValueError(f"{where}: a fixed set (prompts) pays its prefills; drop varied_lengths")


def build(corpus: Mapping[str, Any], configs: Callable[[str], dict[str, Any]]) -> list[Figure]:
    """The corpus's figures with their planned scenarios (``configs``: a config by name)."""
    out = []
    for f in corpus["figures"]:
        setup = corpus["setups"][f["setup"]]
        _check(f, setup)
        argv = ["--model-path", "m", *setup["args"]]
        spec = f.get("spec")
        if spec:
            algorithm, steps, topk, tokens = spec
            argv += ["--speculative-algorithm", algorithm, "--speculative-num-steps", str(steps)]
            argv += ["--speculative-eagle-topk", str(topk)]
            argv += ["--speculative-num-draft-tokens", str(tokens)]
            if f.get("draft"):
                argv += ["--speculative-draft-model-path", "draft"]
        concurrency = int(f.get("concurrency", 1))
        if setup.get("capped_at_batch"):
            # The bench launches its server per batch size with graphs captured up to it and
            # no more requests running (SpecForge's bench_eagle3).
            batch = str(f.get("batch", concurrency))
            argv += ["--cuda-graph-max-bs", batch, "--max-running-requests", batch]
        # A checkpoint that differs from the bundled config only in its quantisation (an
        # FP8 release of the same model) states that difference (``config``).
        config = {**configs(setup["model"]), **setup.get("config", {})}
        inputs = PlanInputs(
            parse_server_argv(argv).values,
            config,
            configs(f["draft"]) if f.get("draft") else None,
            lookup_gpu(setup["gpu"]),
            env={"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1"},
            accept_length=f.get("accept_length"),
            input_len=int(f.get("input_len", setup["input_len"])),
            output_len=int(f.get("output_len", setup["output_len"])),
            concurrency=[concurrency],
        )
        plan = make_plan(inputs)
        scenario = plan.scenario
        if corpus.get("speculation", {}).get("synchronous"):
            # Every speculative figure here predates spec V2 as SGLang's default: the
            # releases ran speculation without the overlap scheduler (plain launches kept it).
            scenario = replace(scenario, spec_overlap=False)
        if setup.get("varied_lengths"):
            # The benchmark's lengths vary (a random range, real answers): requests finish
            # and arrive at different steps, so new prompts' prefills interrupt the decodes.
            scenario = replace(scenario, staggered=True)
        tp = int(scenario.tp_size)
        out.append(
            Figure(
                f["source"],
                f["label"],
                f["metric"],
                float(f["value"]),
                scenario,
                plan.cap_on,
                plan.cap_off,
                concurrency,
                float(f.get("interactivity", 0.0)),
                tp,
                bool(f.get("speculative")),
                int(f.get("prompts", setup.get("prompts", 0))),
                off_tok_s_per_gpu=float(f.get("off_tok_s_per_gpu", 0.0)),
                spread=str(setup.get("answers", "even")),
                longest=int(setup.get("longest_answer", 0)),
            )
        )
    return out


def published_load(fig: Figure, tok_s_per_gpu: float) -> float:
    """The concurrency at a published curve point: Little's law on its own two numbers. A
    user at ``interactivity`` tok/s (InferenceX's 1000 / TPOT) in a deployment that outputs
    ``tok_s_per_gpu`` x GPUs / (input + output per output token) tok/s is one of that many
    users decoding at once (the TTFT's share of a request, ~2% at 1K/1K, left out)."""
    total = (fig.scenario.input_len + fig.scenario.output_len) / fig.scenario.output_len
    return tok_s_per_gpu * fig.gpus / (total * fig.interactivity)


def user_speed_at(fig: Figure, concurrency: float, speculative: bool, cal: Calibration) -> float:
    """The model's tok/s per user (1000 / TPOT) at a fractional ``concurrency``: interpolated
    in log space between the whole loads around it."""
    cap = fig.cap_on if speculative else fig.cap_off
    lo = max(1, math.floor(concurrency))
    u0 = 1000.0 / predict(fig.scenario, lo, cap, speculative, cal).tpot_ms
    if concurrency <= lo:
        return u0
    u1 = 1000.0 / predict(fig.scenario, lo + 1, cap, speculative, cal).tpot_ms
    w = math.log(concurrency / lo) / math.log((lo + 1) / lo)
    return math.exp(math.log(u0) + w * (math.log(u1) - math.log(u0)))


def at_published_load(fig: Figure, cal: Calibration) -> float:
    """The model's counterpart of a point read on a throughput-interactivity curve, at the
    load that point was measured at (``published_load``), not at its per-user speed.

    Reading the model's throughput at the published per-user speed is ill-conditioned: near
    the top of a curve a few per cent in speed is several times the throughput, and past the
    model's own top there is none. At the published load the model's throughput is that
    load times its per-user speed there, so its error is the per-user speed's. A ratio of
    two modes at one speed is the ratio of their throughputs, each at its own load.
    """
    if fig.metric == "tok_s_per_gpu_at":
        load = _running(fig, published_load(fig, fig.value), False)
        return fig.value * user_speed_at(fig, load, False, cal) / fig.interactivity
    on, off = fig.value * fig.off_tok_s_per_gpu, fig.off_tok_s_per_gpu
    on_speed = user_speed_at(fig, _running(fig, published_load(fig, on), True), True, cal)
    off_speed = user_speed_at(fig, _running(fig, published_load(fig, off), False), False, cal)
    return fig.value * on_speed / off_speed


def _running(fig: Figure, load: float, speculative: bool) -> float:
    """``load`` users decoding at once, which the launch must run: a published point above the
    launch's cap ran a launch the setup does not state (its --max-running-requests)."""
    cap = fig.cap_on if speculative else fig.cap_off
    if cap > 0 and load > cap:
        mode = "speculative" if speculative else "plain"
        raise ValueError(
            f"figure {fig.label!r}: the published point has {load:.0f} users decoding, above "
            f"the {mode} launch's cap of {cap}: its setup must state the launch's "
            "--max-running-requests"
        )
    return load


def users_at_speed(fig: Figure, speculative: bool, cal: Calibration) -> float:
    """How many users the model's launch serves at ``fig.interactivity`` tok/s each: the load
    whose per-user speed is that (bisection; speed falls with the load), 0 if even one user
    is slower, the cap if its full batch is still as fast."""
    cap = float(fig.cap_on if speculative else fig.cap_off)
    target = fig.interactivity
    if user_speed_at(fig, 1, speculative, cal) < target:
        return 0.0
    if user_speed_at(fig, cap, speculative, cal) >= target:
        return cap
    lo, hi = 1.0, cap
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if user_speed_at(fig, mid, speculative, cal) >= target else (lo, mid)
    return lo


def equal_speed_ratio(fig: Figure, cal: Calibration) -> float:
    """The model's own ratio of speculation's throughput to plain decoding's at the figure's
    per-user speed (users served at that speed, on over off): which side of 1.0 the model
    puts a curve's ratio, apart from the published loads ``at_published_load`` reads at."""
    on, off = users_at_speed(fig, True, cal), users_at_speed(fig, False, cal)
    if off == 0.0:
        return math.inf if on > 0.0 else 1.0
    return on / off


#: Where every corpus fit starts: first-principles values of ``CORPUS_FITTED`` (a graph's
#: launch gap and a small grid's ramp, ~4 us on NVIDIA and ~6 us under HIP graphs; a one-shot
#: all-reduce's peer write and flag round trip, ~5 us; a NIC's small-message latency, ~20 us;
#: a kernel launched from Python, ~20 us; a synchronous speculative worker's host work per
#: draft step, ~0.15 ms), the rest the committed defaults. Not the committed defaults
#: themselves: those are the fit on every source, so a held-out source would be predicted
#: with constants its own figures made wherever the other sources do not pull them (a
#: parameter only it constrains).
PRIOR = replace(
    DEFAULT_CALIBRATION,
    kernel_floor_s=4e-6,
    cdna3_kernel_floor_s=6e-6,
    cdna4_kernel_floor_s=6e-6,
    allreduce_latency_s=5e-6,
    internode_latency_s=20e-6,
    eager_launch_s=20e-6,
    spec_sync_step_s=0.15e-3,
)

#: How a fixed set's answer lengths may spread (a setup's ``answers``).
SPREADS = ("even", "long-tailed")

#: The golden ratio's fractional part: the prompts of a fixed set take their answer lengths'
#: quantiles in this low-discrepancy order (long and short ones interleaved, as a real set's).
_SPREAD = 0.6180339887498949


def answer_lengths(prompts: int, mean: int, spread: str = "even", longest: int = 0) -> list[float]:
    """A fixed prompt set's answer lengths in sending order: spread evenly over [0, 2 mean], or
    long-tailed (exponential quantiles, cut at ``longest``) as real conversations' answers
    are (real answers vary; the mean is the setup's output length)."""
    if spread not in SPREADS:
        raise ValueError(f"answers: {spread!r} is not one of {', '.join(SPREADS)}")
    quantiles = [((i + 0.5) * _SPREAD) % 1.0 for i in range(prompts)]
    if spread == "long-tailed":
        cut = float(longest) if longest else math.inf
        return [max(1.0, min(cut, -mean * math.log(1.0 - q))) for q in quantiles]
    return [max(1.0, 2.0 * mean * q) for q in quantiles]


def batch_tok_s(fig: Figure, speculative: bool, cal: Calibration) -> float:
    """Output tok/s of a fixed prompt set sent ``fig.concurrency`` at a time: its tokens over
    its wall time. A worker sends the next prompt when its answer ends; as the set runs out
    fewer requests run, each step at that smaller batch's speed, and the longest answers set
    the end (the tail a closed loop never has: a set no larger than the concurrency runs as
    one wave that drains to its longest answer). Every prompt's prefill runs ahead of the
    decodes (SGLang schedules a prefill batch first), so the set's prefills add to its wall
    time."""
    cap = fig.cap_on if speculative else fig.cap_off
    # The server runs at most its cap; a client that sends more (a burst of the whole set)
    # leaves the rest in the server's queue, as a client with that many slots would.
    slots = min(fig.concurrency, cap) if cap > 0 else fig.concurrency
    lengths = answer_lengths(fig.prompts, fig.scenario.output_len, fig.spread, fig.longest)
    pending = lengths[::-1]
    # Running answers by the decoded position at which each ends (a heap: the next to end
    # first); ``decoded`` counts the tokens every running answer has had so far.
    ends: list[float] = []
    decoded = 0.0
    # The first ``slots`` prompts arrive together and prefill in batches; each later one
    # arrives as an answer ends, alone.
    first = min(slots, fig.prompts)
    wall = wave_prefill_time(fig.scenario, first, speculative, cal) + (
        fig.prompts - first
    ) * prefill_time(fig.scenario, speculative, cal)
    while pending or ends:
        while pending and len(ends) < slots:
            heapq.heappush(ends, decoded + pending.pop())
        tpot = predict(fig.scenario, len(ends), cap, speculative, cal).tpot_ms / 1000.0
        wall += (ends[0] - decoded) * tpot
        decoded = ends[0]
        while ends and ends[0] - decoded <= 1e-9:
            heapq.heappop(ends)
    return sum(lengths) / wall


def _tok_s(fig: Figure, speculative: bool, cal: Calibration) -> float:
    if fig.prompts:
        return batch_tok_s(fig, speculative, cal)
    cap = fig.cap_on if speculative else fig.cap_off
    return predict(fig.scenario, fig.concurrency, cap, speculative, cal).output_tok_s


def predict_figure(fig: Figure, cal: Calibration) -> float:
    """The model's counterpart of ``fig``."""
    scn, c = fig.scenario, fig.concurrency
    if fig.metric == "tpot_ms":
        return predict(scn, c, fig.cap_off, False, cal).tpot_ms
    if fig.metric == "ttft_ms":
        # sglang.bench_serving's mean TTFT at ``c`` in flight: the wait for a slot and for the
        # step in flight, then the prompt's prefill.
        return predict(scn, c, fig.cap_off, False, cal).ttft_ms
    if fig.metric == "e2e_ms":
        # A request's mean end-to-end latency at ``c`` in flight (sglang.bench_serving's
        # --max-concurrency): its wait and prefill, then its answer at the running TPOT.
        p = predict(scn, c, fig.cap_off, False, cal)
        return p.ttft_ms + scn.output_len * p.tpot_ms
    if fig.metric == "output_tok_s":
        return _tok_s(fig, fig.speculative, cal)
    if fig.metric == "speedup":
        return _tok_s(fig, True, cal) / _tok_s(fig, False, cal)
    if fig.metric in ("tok_s_per_gpu_at", "speedup_at"):
        return at_published_load(fig, cal)
    raise ValueError(f"unknown metric {fig.metric!r}")


#: Kinds of figure scored but not fitted: a TTFT is the wait and the prefill, whose cost is the
#: prompt's FLOPs at the field's prefill efficiency or its kernels' launches
#: (``eager_launch_s``); the published big-MoE first tokens still cost about twice what those
#: give, so fitting them would pull the launch (which decodes interrupted by prefills see too)
#: towards costs it does not cause.
SCORED_ONLY = ("ttft",)


def loss(figs: list[Figure], cal: Calibration) -> float:
    """Mean squared log error over ``figs``."""
    errors = [math.log(max(predict_figure(f, cal), 1e-9) / f.value) ** 2 for f in figs]
    return sum(errors) / max(1, len(errors))


def fit(
    figs: list[Figure],
    start: Calibration = PRIOR,
    rounds: int = 4,
    fitted: tuple[str, ...] = CORPUS_FITTED,
) -> Calibration:
    """Coordinate search in log space over ``CORPUS_FITTED`` only, on ``figs`` but the
    ``SCORED_ONLY`` kinds."""
    figs = [f for f in figs if f.kind not in SCORED_ONLY]
    best, best_loss = start, loss(figs, start)
    names = [f.name for f in fields(Calibration) if f.name in fitted]
    for r in range(rounds):
        step = 1.0 / (2**r)
        for name in names:
            for factor in (1 + step, 1 / (1 + step)):
                trial = replace(best, **{name: getattr(best, name) * factor})
                trial_loss = loss(figs, trial)
                if trial_loss < best_loss:
                    best, best_loss = trial, trial_loss
    return best


@dataclass(frozen=True)
class Scored:
    """One figure: the published value, the fit-on-everything and the held-out predictions."""

    figure: Figure
    in_sample: float
    held_out: float
    #: The held-out model's own ratio where it differs from ``held_out`` (a curve's ratio is
    #: read at the published loads, so its side is judged at equal speed: ``equal_speed_ratio``).
    side: float | None = None

    @property
    def ratio(self) -> float:
        return self.held_out / self.figure.value

    @property
    def right_side(self) -> bool:
        """A speed-up predicted above 1.0, a loss below (parity: within ``WITHIN``)."""
        kind = self.figure.kind
        model = self.held_out if self.side is None else self.side
        if kind == "speed-up":
            return model > 1.0
        if kind == "loss":
            return model < 1.0
        return abs(math.log(self.ratio)) <= math.log(1 + WITHIN)


def leave_one_source_out(
    figs: list[Figure],
    start: Calibration = PRIOR,
    rounds: int = 4,
    fitted: tuple[str, ...] = CORPUS_FITTED,
) -> tuple[Calibration, list[Scored]]:
    """The fit on every figure (``fit`` leaves the ``SCORED_ONLY`` kinds out), and each figure
    predicted by a fit without its source (``fitted``: the constants the fits move)."""
    full = fit(figs, start, rounds, fitted)
    held: dict[str, Calibration] = {}
    for source in sorted({f.source for f in figs}):
        held[source] = fit([f for f in figs if f.source != source], start, rounds, fitted)
    scored = [
        Scored(
            f,
            predict_figure(f, full),
            predict_figure(f, held[f.source]),
            equal_speed_ratio(f, held[f.source]) if f.metric == "speedup_at" else None,
        )
        for f in figs
    ]
    return full, scored


def summary(scored: list[Scored]) -> dict[str, Any]:
    """Median and worst ratio per kind, how many within 25%, how many on the right side."""

    def stats(rows: list[Scored]) -> dict[str, Any]:
        ratios = sorted(r.ratio for r in rows)
        if not ratios:
            return {"n": 0}
        mid = len(ratios) // 2
        median = ratios[mid] if len(ratios) % 2 else (ratios[mid - 1] + ratios[mid]) / 2
        worst = max(ratios, key=lambda x: abs(math.log(x)))
        within = sum(1 for x in ratios if abs(math.log(x)) <= math.log(1 + WITHIN))
        return {"n": len(ratios), "median": median, "worst": worst, "within": within}

    plain = [r for r in scored if r.figure.kind in ("plain", "spec")]
    ratios = [r for r in scored if r.figure.kind in ("speed-up", "loss", "parity")]
    sided = [r for r in scored if r.figure.kind in ("speed-up", "loss")]
    return {
        "all": stats(scored),
        "decode": stats(plain),
        "speedups": stats(ratios),
        "ttft": stats([r for r in scored if r.figure.kind == "ttft"]),
        "right_side": sum(1 for r in sided if r.right_side),
        "sided": len(sided),
        "sources": len({r.figure.source for r in scored}),
    }


def report(full: Calibration, scored: list[Scored], fitted: tuple[str, ...] = CORPUS_FITTED) -> str:
    """The leave-one-source-out table and its summary (``scripts/bench-validation``)."""
    rows = [
        "| source | figure | kind | published | model (all) | model (source held out) "
        "| held-out/published |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for r in scored:
        f = r.figure
        rows.append(
            f"| {f.source} | {f.label} | {f.kind} | {f.value:,.3g} | {r.in_sample:,.3g} | "
            f"{r.held_out:,.3g} | {r.ratio:.2f} |"
        )
    s = summary(scored)
    rows.append("")
    for key, name in (
        ("decode", "decode (plain and speculative)"),
        ("speedups", "ratios"),
        ("ttft", "TTFT (scored, not fitted)"),
    ):
        st = s[key]
        if st["n"]:
            rows.append(
                f"{name}: {st['n']} figures, median held-out/published {st['median']:.2f}, "
                f"worst {st['worst']:.2f}, within 25%: {st['within']}/{st['n']}"
            )
    a = s["all"]
    rows.append(
        f"all: {a['n']} figures from {s['sources']} sources, within 25%: {a['within']}/{a['n']} "
        f"({100 * a['within'] / max(1, a['n']):.0f}%); speed-ups and losses on the right side "
        f"of 1.0x: {s['right_side']}/{s['sided']}"
    )
    rows.append(
        "fit on all: " + ", ".join(f"{name}={getattr(full, name) * 1e6:.1f}us" for name in fitted)
    )
    for r in scored:
        if r.figure.kind in ("speed-up", "loss") and not r.right_side:
            model = r.held_out if r.side is None else r.side
            why = (
                "the model's plain decoding never gives a user that speed"
                if math.isinf(model)
                else f"the model's ratio {model:.2f}"
            )
            rows.append(f"wrong side of 1.0x: {r.figure.label} ({why})")
    return "\n".join(rows)
