"""``plan --search-shape``: the speculative shape to run per concurrency band, searched.

Called by ``plan_command`` with the launch as planned. Pure: for each candidate shape (steps,
topk, draft tokens; SGLang's ``--speculative-adaptive`` on and off where SGLang runs it) the
launch is resolved and planned by the launch model (``launch.plan_argv``, SGLang 0.5.23's
resolution included); a shape SGLang refuses, or one that would not start (``plan_render``'s
verdict), is dropped. The search is bounded: ``STEPS`` x ``TOPKS`` x ``TREE_TOKENS`` (chains
take steps + 1 tokens, as SGLang forces), under ``MAX_CANDIDATES`` plans in all. The given
shape is always a candidate, so no band's best is worse than it in the model.

Acceptance per shape follows the plan's prior rule (``plan.prior_accept_length``: a per-depth
keep probability, widened by ``sqrt(width)`` for trees), anchored on the given launch's accept
length (measured with ``--accept-length``, else the prior); a tree's depth x width is bounded by
the drafted nodes one verify checks (``draft tokens - 1``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from specserver_advisor.cli.planfrom import Planned
from specserver_advisor.cli.plantext import shape_fields, verdict
from specserver_advisor.launch.model import TargetDraftConfigs, plan_argv
from specserver_advisor.perf import adaptive
from specserver_advisor.perf.plan import Plan, PlanInputError

STEPS = tuple(range(1, 9))
TOPKS = (1, 2, 4, 8)
#: Draft tokens tried for trees (topk > 1), within what SGLang's tree builder can select.
TREE_TOKENS = (2, 4, 8, 16, 32, 64)
#: Draft tokens tried for token-only algorithms (NGRAM, DFLASH, DSPARK).
TOKEN_ONLY = (2, 4, 8, 12, 16, 24, 32)
MAX_CANDIDATES = 200
#: The flag names of a shape, as SGLang parses them.
FIELDS = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")


@dataclass(frozen=True)
class Shape:
    """One speculative shape; ``steps``/``topk`` are None for token-only algorithms."""

    steps: int | None
    topk: int | None
    draft_tokens: int
    adaptive: bool = False

    @property
    def label(self) -> str:
        if self.steps is None:
            return f"draft tokens {self.draft_tokens}"
        text = f"({self.steps},{self.topk},{self.draft_tokens})"
        return text + (" adaptive" if self.adaptive else "")

    def flags(self) -> list[str]:
        """The SGLang flags that set this shape."""
        out = []
        for name, value in zip(FIELDS, (self.steps, self.topk, self.draft_tokens), strict=True):
            if value is not None:
                out += [f"--{name.replace('_', '-')}", str(value)]
        return out + (["--speculative-adaptive"] if self.adaptive else [])

    def to_json(self) -> dict[str, Any]:
        return {
            "steps": self.steps,
            "topk": self.topk,
            "draft_tokens": self.draft_tokens,
            "adaptive": self.adaptive,
        }


@dataclass
class Band:
    """Consecutive concurrency points with the same best choice (None: speculation off)."""

    low: int
    high: int
    shape: Shape | None
    #: Per point: (concurrency, best shape's out tok/s, given shape's, speculation off's).
    points: list[tuple[int, float, float | None, float]]

    def to_json(self) -> dict[str, Any]:
        return {
            "from": self.low,
            "to": self.high,
            "shape": self.shape.to_json() if self.shape else None,
            "label": self.shape.label if self.shape else "off",
            "points": [
                {"concurrency": c, "best_tok_s": b, "given_tok_s": g, "off_tok_s": o}
                for c, b, g, o in self.points
            ],
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

    def to_json(self) -> dict[str, Any]:
        return {
            "bound": bound_text(),
            "tried": self.tried,
            "accepted": self.accepted,
            "given": self.given.to_json() if self.given else None,
            "bands": [b.to_json() for b in self.bands],
            "crossover_concurrency": None if self.crossover is None else round(self.crossover, 1),
            "choice": self.choice.to_json() if self.choice else None,
            "max_running_requests": self.max_running_requests,
            "max_running_requests_reason": self.cap_reason,
            "argv": choice_argv(self) if self.choice_plan else None,
        }


def bound_text() -> str:
    return (
        f"steps {STEPS[0]}..{STEPS[-1]}, topk {','.join(map(str, TOPKS))}, draft tokens "
        f"steps+1 for chains and {','.join(map(str, TREE_TOKENS))} for trees; adaptive on/off "
        f"for {'/'.join(adaptive.SUPPORTED_ALGORITHMS)}; at most {MAX_CANDIDATES} plans"
    )


def tree_capacity(steps: int, topk: int) -> int:
    """The most draft tokens SGLang's tree builder can pick: the root plus the top
    ``num_draft_tokens - 1`` of ``topk + (steps - 1) * topk**2`` scored candidates
    (``organize_draft_results``); more fail its ``torch.topk`` at the first decode."""
    return 1 + topk + (steps - 1) * topk * topk


def candidates(algorithm: str) -> Iterator[Shape]:
    """The bounded candidate shapes for an algorithm (before SGLang's resolution)."""
    if shape_fields(algorithm) == ("speculative_num_draft_tokens",):
        yield from (Shape(None, None, n) for n in TOKEN_ONLY)
        return
    for steps in STEPS:
        yield Shape(steps, 1, steps + 1)
        if algorithm in adaptive.SUPPORTED_ALGORITHMS and steps in adaptive.candidate_union():
            yield Shape(steps, 1, steps + 1, adaptive=True)
        for topk in TOPKS[1:]:
            for tokens in sorted({*TREE_TOKENS, steps + 1}):
                if tokens <= tree_capacity(steps, topk):
                    yield Shape(steps, topk, tokens)


def given_shape(plan: Plan) -> Shape | None:
    r = plan.resolution
    if not r.speculative:
        return None
    ndt = int(r.get("speculative_num_draft_tokens") or 1)
    if shape_fields(r.algorithm) == ("speculative_num_draft_tokens",):
        return Shape(None, None, ndt)
    return Shape(
        int(r.get("speculative_num_steps") or 0),
        int(r.get("speculative_eagle_topk") or 1),
        ndt,
        bool(r.get("speculative_adaptive")),
    )


def _depth_width(shape: Shape) -> tuple[int, int]:
    """Draft depth and tree width: token-only algorithms draft a chain of tokens - 1."""
    if shape.steps is None:
        return max(0, shape.draft_tokens - 1), 1
    return shape.steps, max(1, shape.topk or 1)


def keep_probability(accept: float, shape: Shape) -> float:
    """The chain keep probability behind an accept length at a shape (the prior's rule)."""
    depth, width = _depth_width(shape)
    if depth < 1:
        return 0.0
    widened = adaptive.keep_probability(accept, depth)
    return float(1 - (1 - widened) ** (1 / math.sqrt(width)))


def accept_at(q: float, shape: Shape) -> float:
    """Expected accept length of ``shape`` for chain keep probability ``q``.

    The verify pass checks ``draft tokens - 1`` drafted nodes, so a tree reaches depth d at
    width w only when d * w fits in them (d <= steps, w <= topk): the best such allocation
    counts.
    """
    steps, topk = _depth_width(shape)
    budget = max(1, shape.draft_tokens - 1)
    best = 1.0
    for width in range(1, topk + 1):
        depth = min(steps, budget // width)
        if depth < 1:
            break
        widened = 1 - (1 - q) ** math.sqrt(width)
        best = max(best, sum(widened**i for i in range(depth + 1)))
    return round(best, 3)


def with_shape(values: dict[str, Any], shape: Shape) -> dict[str, Any]:
    out = {k: v for k, v in values.items() if k not in (*FIELDS, "speculative_adaptive")}
    for name, value in zip(FIELDS, (shape.steps, shape.topk, shape.draft_tokens), strict=True):
        if value is not None:
            out[name] = value
    if shape.adaptive:
        out["speculative_adaptive"] = True
    return out


def _argv_with(argv: list[str], shape: Shape) -> list[str]:
    """``argv`` with its shape flags replaced by ``shape``'s."""
    drop = {f"--{n.replace('_', '-')}" for n in FIELDS}
    out: list[str] = []
    k = 0
    while k < len(argv):
        token = argv[k]
        if token.split("=", 1)[0] in drop:
            k += 1 if "=" in token else 2
            continue
        if token == "--speculative-adaptive":
            k += 1
            continue
        out.append(token)
        k += 1
    return out + shape.flags()


def on_tok_s(planned: Planned, shape: Shape, concurrency: int) -> float:
    """Output tok/s with speculation at one load (adaptive: SGLang's per-tier steps)."""
    plan = planned.plan
    assert plan is not None
    if shape.adaptive:
        return adaptive.predict_adaptive(plan.scenario, concurrency, plan.cap_on).output_tok_s
    point = next(p for p in plan.curves if p["concurrency"] == concurrency)
    return float(point["on"]["output_tok_s"])


def search(
    given: Planned,
    values: dict[str, Any],
    configs: TargetDraftConfigs,
    options: dict[str, Any],
) -> Search:
    """Plan every bounded candidate shape of the launch and pick the best per band."""
    assert given.plan is not None
    base = given_shape(given.plan)
    concurrency = sorted(set(options["concurrency"]))
    algorithm = given.plan.resolution.algorithm or ""
    anchor = given.plan.accept_length
    q = keep_probability(anchor, base) if base else 0.0
    shapes = list(candidates(algorithm))[:MAX_CANDIDATES]
    if base is not None and base not in shapes:
        shapes.append(base)
    planned: dict[Shape, Planned] = {}
    for shape in shapes:
        inputs = dict(options, accept_length=accept_at(q, shape))
        try:
            plan = plan_argv(with_shape(values, shape), given.env, configs, given.gpu, **inputs)
        except PlanInputError:
            continue
        candidate = Planned(plan, _argv_with(given.argv, shape), given.gpu, given.env)
        if verdict(candidate).starts:
            planned[shape] = candidate
    if not planned:
        return Search(len(shapes), 0, [], None, None, None, None, base)
    off = _off_curve(given, planned)
    table = {s: [on_tok_s(p, s, c) for c in concurrency] for s, p in planned.items()}
    bands = _bands(concurrency, table, off, base)
    crossover = _crossover(concurrency, table, off)
    choice = _choose(concurrency, table, off, crossover)
    choice_plan, cap, why = None, None, ""
    if choice is not None:
        choice_plan = planned[choice]
        assert choice_plan.plan is not None
        cap, why = _cap(choice_plan.plan, crossover)
    return Search(len(shapes), len(planned), bands, crossover, choice, choice_plan, cap, base, why)


def _cap(plan: Plan, crossover: float | None) -> tuple[int, str]:
    """The ``--max-running-requests`` for the choice and which bound sets it."""
    bounds = [
        (plan.fits_on, "the requests its KV pool with the draft holds"),
        (plan.mem.settings.cuda_graph_max_bs, "the decode CUDA-graph max batch"),
    ]
    if crossover is not None:
        bounds.append((int(crossover), "the crossover; mode Auto runs without speculation above"))
    value, why = min(bounds, key=lambda b: b[0])
    return max(1, value), why


def _off_curve(given: Planned, planned: dict[Shape, Planned]) -> list[float]:
    """Speculation off (the draft not loaded) at each load: the same for every shape."""
    plan = given.plan if given.plan and verdict(given).starts else None
    if plan is None and planned:
        plan = next(iter(planned.values())).plan
    assert plan is not None or not planned
    return [float(p["off"]["output_tok_s"]) for p in plan.curves] if plan else []


def _best(k: int, table: dict[Shape, list[float]]) -> tuple[Shape | None, float]:
    if not table:
        return None, 0.0
    shape = max(table, key=lambda s: (table[s][k], -_cost(s)))
    return shape, table[shape][k]


def _cost(shape: Shape) -> int:
    """Tie-break: the cheaper shape (fewer draft tokens, then steps)."""
    return shape.draft_tokens * 100 + (shape.steps or 0) * 10 + (shape.topk or 0)


def _bands(
    concurrency: list[int],
    table: dict[Shape, list[float]],
    off: list[float],
    base: Shape | None,
) -> list[Band]:
    bands: list[Band] = []
    for k, c in enumerate(concurrency):
        shape, best = _best(k, table)
        off_k = off[k] if off else 0.0
        choice = shape if shape is not None and best > off_k else None
        given = table[base][k] if base in table and base is not None else None
        point = (c, round(best, 1), None if given is None else round(given, 1), round(off_k, 1))
        if bands and bands[-1].shape == choice:
            bands[-1].high = c
            bands[-1].points.append(point)
        else:
            bands.append(Band(c, c, choice, [point]))
    return bands


def _crossover(
    concurrency: list[int], table: dict[Shape, list[float]], off: list[float]
) -> float | None:
    """Where the best shape's tok/s falls through speculation off's (interpolated)."""
    prev: tuple[int, float] | None = None
    for k, c in enumerate(concurrency):
        _, best = _best(k, table)
        gain = best / off[k] if off and off[k] else 1.0
        if prev is not None and prev[1] >= 1 > gain:
            c0, g0 = prev
            return c0 + (g0 - 1) * (c - c0) / (g0 - gain)
        prev = (c, gain)
    return None


def _choose(
    concurrency: list[int],
    table: dict[Shape, list[float]],
    off: list[float],
    crossover: float | None,
) -> Shape | None:
    """The one shape to launch: the best geometric mean of tok/s over the loads where
    speculation pays (below the crossover); Auto runs without speculation above it."""
    paying = [k for k, c in enumerate(concurrency) if crossover is None or c <= crossover]
    paying = [k for k in paying if _best(k, table)[1] > (off[k] if off else 0.0)]
    if not table or not paying:
        return None

    def mean_log(shape: Shape) -> float:
        return sum(math.log(max(table[shape][k], 1e-9)) for k in paying)

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
