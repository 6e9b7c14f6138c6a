"""Expected acceptance of a draft chain or tree from a per-depth keep probability (pure).

``prior_accept_length`` (perf/plan.py), ``plan --search-shape`` (cli/plansearchshape.py) and the
simulated engine (through the prior) read trees through these. A chain of depth d whose every
draft is kept with probability q commits ``1 + q + ... + q^d`` tokens a verify pass. A tree of
width w gives each depth w candidates: the target's token is among them unless all miss, and
the draft's lower-ranked candidates are right far less often than its first, so the miss falls
only as ``(1 - q) / sqrt(w)`` (an estimate: Medusa's heads, about 0.6 right at top-1 and 0.8 in
the top 5, lose their misses about that fast; the older ``(1 - q) ** sqrt(w)`` put an 8-wide
EAGLE-3 tree at 0.98 a depth, a 5.7 accept length from 6 at most). The verify pass checks
``draft tokens - 1`` drafted nodes, so a tree reaches depth d at width w only when d x w of them
fit: the best such allocation counts (SGLang keeps the highest-scoring nodes).
"""

from __future__ import annotations

import math

#: Widths tried for the allocation (a wider tree than this gains nothing a real launch has).
MAX_WIDTH_SCAN = 1024
#: Depths summed term by term; past it, the sum in closed form (hostile step counts).
SUMMED_DEPTH = 1000


def covered(q: float, width: int) -> float:
    """Probability that one of ``width`` candidates at a depth is the target's token."""
    return 1 - (1 - q) / math.sqrt(max(1, width))


def chain_accept(c: float, depth: int) -> float:
    """``1 + c + ... + c^depth``."""
    depth = max(0, depth)
    if depth <= SUMMED_DEPTH:
        return float(sum(c**i for i in range(depth + 1)))
    if c >= 1:
        return float(depth + 1)
    return float((1 - c ** (depth + 1)) / (1 - c))


def tree_accept(q: float, steps: int, topk: int, draft_tokens: int | None) -> float:
    """Expected accept length (bonus token included) of ``steps`` draft steps of width
    ``topk`` verified over ``draft_tokens`` positions (None: every node fits)."""
    steps, topk = max(0, steps), max(1, topk)
    budget = steps * topk if draft_tokens is None else max(1, draft_tokens - 1)
    best = 1.0
    for width in range(1, min(topk, budget, MAX_WIDTH_SCAN) + 1):
        depth = min(steps, budget // width)
        if depth < 1:
            break
        best = max(best, chain_accept(covered(q, width), depth))
    return round(best, 3)


def chain_keep(accept: float, steps: int, topk: int, draft_tokens: int | None) -> float:
    """The chain keep probability q at which ``tree_accept`` gives ``accept`` (bisection)."""
    lo, hi = 0.0, 1.0
    for _ in range(50):
        mid = (lo + hi) / 2
        if tree_accept(mid, steps, topk, draft_tokens) < accept:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2
