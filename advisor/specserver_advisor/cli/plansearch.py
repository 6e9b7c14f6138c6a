"""``plan --search-shape``: the speculative shape to run per concurrency band, searched.

Called by ``plan_command`` with the launch as planned. Pure: each candidate shape
(``plansearchshape``: steps, topk, draft tokens, SGLang's ``--speculative-adaptive`` on and
off where SGLang runs it) is resolved and planned by the launch model (``launch.plan_argv``,
SGLang 0.5.23's resolution included); a shape SGLang refuses, or one that would not start
(``plan_render``'s verdict), is dropped. The given shape is always a candidate, so no band's
best is worse than it in the model.

Shapes are ranked on what mode Auto optimises (``policy.model.score``): output tok/s, scaled
down where the predicted TTFT P99 misses the TTFT SLO (the SpecServer's
``autoSpeculation.ttftP99SloSeconds``, else its default). Where every TTFT P99 meets the SLO
that is throughput. On a card whose KV pool with the draft holds fewer requests than without it
(the L4), requests queue for the smaller pool and their first token waits: the field's L4 sweep
measured even throughput and a first token 2-3x later at 32 users. Ranked on throughput alone,
a wide tree saturated at the pool's request count beat speculation off at every load there, so
the search printed no crossover for the case it was built for.

The crossover (the best shape's score falls through off's) is looked for over the loads asked
and those the operator's policy context plans (``autocontext.PLANNED_LOADS``, to 256), so one
past the printed range (DeepSeek-V3 NEXTN on 8 x H200) is still found; where there is none the
result says why. Bands and the choice use the loads asked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from specserver_advisor.cli.planfrom import Planned
from specserver_advisor.cli.plansearchshape import (
    MAX_CANDIDATES,
    Shape,
    accept_at,
    argv_with,
    bound_text,
    candidates,
    given_shape,
    keep_probability,
    with_shape,
)
from specserver_advisor.cli.plantext import verdict
from specserver_advisor.launch.model import TargetDraftConfigs, plan_argv
from specserver_advisor.models import AutoSpeculation
from specserver_advisor.perf import adaptive
from specserver_advisor.perf.autocontext import PLANNED_LOADS
from specserver_advisor.perf.plan import Plan, PlanInputError
from specserver_advisor.policy.model import score


@dataclass(frozen=True)
class Point:
    """One engine at one load: output tok/s, TTFT P99 and Auto's score of them."""

    tok_s: float
    ttft_p99_ms: float
    score: float

    @classmethod
    def of(cls, tok_s: float, ttft_p99_ms: float, slo_s: float) -> Point:
        return cls(tok_s, ttft_p99_ms, score(tok_s, ttft_p99_ms / 1000, slo_s))


@dataclass
class Band:
    """Consecutive concurrency points with the same best choice (None: speculation off)."""

    low: int
    high: int
    shape: Shape | None
    #: Per point: (concurrency, the best shape's, the given shape's, speculation off's).
    points: list[tuple[int, Point, Point | None, Point]]

    def to_json(self) -> dict[str, Any]:
        return {
            "from": self.low,
            "to": self.high,
            "shape": self.shape.to_json() if self.shape else None,
            "label": self.shape.label if self.shape else "off",
            "points": [_point_json(c, b, g, o) for c, b, g, o in self.points],
        }


def _point_json(c: int, best: Point, given: Point | None, off: Point) -> dict[str, Any]:
    return {
        "concurrency": c,
        "best_tok_s": round(best.tok_s, 1),
        "given_tok_s": None if given is None else round(given.tok_s, 1),
        "off_tok_s": round(off.tok_s, 1),
        "best_ttft_p99_ms": round(best.ttft_p99_ms, 1),
        "given_ttft_p99_ms": None if given is None else round(given.ttft_p99_ms, 1),
        "off_ttft_p99_ms": round(off.ttft_p99_ms, 1),
        "best_score": round(best.score, 1),
        "given_score": None if given is None else round(given.score, 1),
        "off_score": round(off.score, 1),
    }


@dataclass
class Search:
    """The outcome: bands, the crossover, the one shape to launch and its cap."""

    tried: int
    accepted: int
    bands: list[Band]
    crossover: float | None
    choice: Shape | None
    choice_plan: Planned | None
    max_running_requests: int | None
    given: Shape | None
    #: Which bound sets ``max_running_requests``.
    cap_reason: str = ""
    #: The TTFT P99 objective the score discounts against (seconds).
    slo_s: float = AutoSpeculation().ttft_p99_slo_seconds
    #: Why there is no crossover in the loads searched ("" when there is one).
    no_crossover_reason: str = ""
    #: Where the choice itself stops paying (what its cap and mode Auto act on).
    choice_crossover: float | None = None
    #: The highest load the crossover was looked for at.
    top_load: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "bound": bound_text(),
            "tried": self.tried,
            "accepted": self.accepted,
            "given": self.given.to_json() if self.given else None,
            "ttft_p99_slo_seconds": self.slo_s,
            "crossover_loads_to": self.top_load,
            "bands": [b.to_json() for b in self.bands],
            "crossover_concurrency": _rounded(self.crossover),
            "no_crossover_reason": self.no_crossover_reason or None,
            "choice": self.choice.to_json() if self.choice else None,
            "choice_crossover_concurrency": _rounded(self.choice_crossover),
            "max_running_requests": self.max_running_requests,
            "max_running_requests_reason": self.cap_reason,
            "argv": choice_argv(self) if self.choice_plan else None,
        }


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def ttft_slo(given: Planned) -> float:
    """The TTFT P99 SLO Auto scores against: the SpecServer's, else the policy's default."""
    policy = given.spec.auto_speculation if given.spec is not None else None
    return (policy or AutoSpeculation()).ttft_p99_slo_seconds


def on_point(planned: Planned, shape: Shape, concurrency: int, slo_s: float) -> Point:
    """Speculation on at one load (adaptive: SGLang's per-tier steps)."""
    plan = planned.plan
    assert plan is not None
    if shape.adaptive:
        p = adaptive.predict_adaptive(plan.scenario, concurrency, plan.cap_on)
        return Point.of(p.output_tok_s, p.ttft_p99_ms, slo_s)
    on = next(p for p in plan.curves if p["concurrency"] == concurrency)["on"]
    return Point.of(float(on["output_tok_s"]), float(on["ttft_p99_ms"]), slo_s)


def on_points(planned: Planned, shape: Shape, loads: list[int], slo_s: float) -> list[Point]:
    """``on_point`` at each of ``loads`` (the plan's curve read once, not once per load)."""
    plan = planned.plan
    assert plan is not None
    if shape.adaptive:
        return [on_point(planned, shape, c, slo_s) for c in loads]
    curve = {p["concurrency"]: p["on"] for p in plan.curves}
    return [
        Point.of(float(curve[c]["output_tok_s"]), float(curve[c]["ttft_p99_ms"]), slo_s)
        for c in loads
    ]


def search(
    given: Planned,
    values: dict[str, Any],
    configs: TargetDraftConfigs,
    options: dict[str, Any],
) -> Search:
    """Plan every bounded candidate shape of the launch and pick the best per band."""
    assert given.plan is not None
    base = given_shape(given.plan)
    shown = sorted(set(options["concurrency"]))
    loads = sorted({*shown, *PLANNED_LOADS})
    slo = ttft_slo(given)
    algorithm = given.plan.resolution.algorithm or ""
    q = keep_probability(given.plan.accept_length, base) if base else 0.0
    shapes = list(candidates(algorithm))[:MAX_CANDIDATES]
    if base is not None and base not in shapes:
        shapes.append(base)
    planned: dict[Shape, Planned] = {}
    for shape in shapes:
        inputs = dict(options, concurrency=loads, accept_length=accept_at(q, shape))
        try:
            # The cap recommendation (every candidate cap scored at every load) only for the
            # choice, planned again below: the other shapes are read for their curves.
            plan = plan_argv(
                with_shape(values, shape),
                given.env,
                configs,
                given.gpu,
                recommend_cap=False,
                **inputs,
            )
        except PlanInputError:
            continue
        candidate = Planned(plan, argv_with(given.argv, shape), given.gpu, given.env)
        if verdict(candidate).starts:
            planned[shape] = candidate
    if not planned:
        return Search(len(shapes), 0, [], None, None, None, None, base, slo_s=slo)
    any_plan = planned.get(base) if base is not None else None
    off_plan = (any_plan or next(iter(planned.values()))).plan
    assert off_plan is not None
    off = [
        Point.of(p["off"]["output_tok_s"], p["off"]["ttft_p99_ms"], slo) for p in off_plan.curves
    ]
    table = {s: on_points(p, s, loads, slo) for s, p in planned.items()}
    best = [_best(k, table) for k in range(len(loads))]
    gains = [_gain(b.score, o.score) for (_, b), o in zip(best, off, strict=True)]
    crossover = fall_through(loads, gains)
    at = [loads.index(c) for c in shown]
    bands = _bands(shown, [best[k] for k in at], [off[k] for k in at], table, at, base)
    choice = _choose(shown, at, table, best, off, crossover)
    result = Search(len(shapes), len(planned), bands, crossover, None, None, None, base, slo_s=slo)
    result.top_load = loads[-1]
    if crossover is None:
        result.no_crossover_reason = no_crossover_reason(loads, gains, values, given)
    if choice is not None:
        inputs = dict(options, concurrency=loads, accept_length=accept_at(q, choice))
        again = plan_argv(with_shape(values, choice), given.env, configs, given.gpu, **inputs)
        planned[choice] = Planned(again, planned[choice].argv, given.gpu, given.env)
        result.choice, result.choice_plan = choice, planned[choice]
        own = [_gain(p.score, o.score) for p, o in zip(table[choice], off, strict=True)]
        result.choice_crossover = fall_through(loads, own)
        assert result.choice_plan.plan is not None
        cap, why = _cap(result.choice_plan.plan)
        result.max_running_requests, result.cap_reason = cap, why
    return result


def _gain(on: float, off: float) -> float:
    return on / off if off > 0 else (math.inf if on > 0 else 1.0)


def fall_through(loads: list[int], gains: list[float]) -> float | None:
    """The load where ``gains`` (on / off) first falls through 1, interpolated; None if never."""
    prev: tuple[int, float] | None = None
    for c, gain in zip(loads, gains, strict=True):
        if prev is not None and prev[1] >= 1 > gain:
            c0, g0 = prev
            return c0 + (g0 - 1) * (c - c0) / (g0 - gain) if math.isfinite(g0) else float(c0)
        prev = (c, gain)
    return None


def no_crossover_reason(
    loads: list[int], gains: list[float], values: dict[str, Any], given: Planned
) -> str:
    """Why the best shape's score never falls through off's in ``loads`` (the wording of
    ``autocontext.no_crossover_reason``)."""
    top = loads[-1]
    paying = [c for c, g in zip(loads, gains, strict=True) if g >= 1]
    if not paying:
        return (
            f"speculation off scores higher at every load searched ({loads[0]}-{top}): no "
            "shape pays, even at one request"
        )
    cap = values.get("max_running_requests")
    if isinstance(cap, int) and cap < top:
        name = "spec.engine.maxRunningRequests" if given.spec else "--max-running-requests"
        return (
            f"{name} {cap} caps both engines: above {cap} requests queue in either mode, "
            "and speculation still pays at that batch"
        )
    if gains[0] < 1:
        return f"speculation loses below {paying[0]} users and pays from there up to {top}"
    return f"the best shape beats speculation off at every load searched (up to {top} users)"


def _cap(plan: Plan) -> tuple[int, str]:
    """The ``--max-running-requests`` for the choice and why: the plan's own recommendation
    (the cap with the most goodput over the loads asked, within the KV pool and the decode
    graphs), never the crossover, which only says where mode Auto switches speculation off."""
    cap = max(1, plan.recommended_mrr)
    if cap >= plan.fits_on:
        return cap, "the requests its KV pool with the draft holds"
    graphs = plan.decode_graph_limit
    if graphs is not None and cap >= graphs:
        return cap, "the decode CUDA-graph max batch"
    return cap, "the most goodput over the loads asked"


def _best(k: int, table: dict[Shape, list[Point]]) -> tuple[Shape, Point]:
    shape = max(table, key=lambda s: (table[s][k].score, -_cost(s)))
    return shape, table[shape][k]


def _cost(shape: Shape) -> int:
    """Tie-break: the cheaper shape (fewer draft tokens, then steps)."""
    return shape.draft_tokens * 100 + (shape.steps or 0) * 10 + (shape.topk or 0)


def _bands(
    shown: list[int],
    best: list[tuple[Shape, Point]],
    off: list[Point],
    table: dict[Shape, list[Point]],
    at: list[int],
    base: Shape | None,
) -> list[Band]:
    bands: list[Band] = []
    for c, (shape, point), off_k, k in zip(shown, best, off, at, strict=True):
        choice = shape if point.score > off_k.score else None
        given = table[base][k] if base is not None and base in table else None
        row = (c, point, given, off_k)
        if bands and bands[-1].shape == choice:
            bands[-1].high = c
            bands[-1].points.append(row)
        else:
            bands.append(Band(c, c, choice, [row]))
    return bands


def _choose(
    shown: list[int],
    at: list[int],
    table: dict[Shape, list[Point]],
    best: list[tuple[Shape, Point]],
    off: list[Point],
    crossover: float | None,
) -> Shape | None:
    """The one shape to launch: the best geometric mean of score over the loads asked where
    speculation pays (below the crossover); Auto runs without speculation above it."""
    paying = [
        k
        for c, k in zip(shown, at, strict=True)
        if (crossover is None or c <= crossover) and best[k][1].score > off[k].score
    ]
    if not paying:
        return None

    def mean_log(shape: Shape) -> float:
        return sum(math.log(max(table[shape][k].score, 1e-9)) for k in paying)

    return max(table, key=lambda s: (mean_log(s), -_cost(s)))


def choice_argv(result: Search) -> list[str]:
    """The chosen launch's argv with the search's ``--max-running-requests``."""
    if result.choice_plan is None:
        return []
    argv = list(result.choice_plan.argv)
    if result.max_running_requests is not None:
        if "--max-running-requests" in argv:
            argv[argv.index("--max-running-requests") + 1] = str(result.max_running_requests)
        else:
            argv += ["--max-running-requests", str(result.max_running_requests)]
    return argv
