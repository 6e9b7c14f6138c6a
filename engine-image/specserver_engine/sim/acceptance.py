"""Acceptance in the simulated engine: the mean by prompt kind, and per-step draws.

Used by the simulator's scheduler. The means follow the field measurements' pattern (EAGLE-3:
~2.7 on code, math and random text, ~2.4 on chat; NGRAM pays only on repetitive output) and
scale with the configured shape; a prompt longer than the draft's trained context loses
acceptance as it grows past it.
"""

from __future__ import annotations

import random

from specserver_advisor.perf.acceptcontext import retained
from specserver_advisor.perf.plan import prior_accept_length

KINDS = ("code", "math", "chat", "random")
#: Mean accept length per prompt kind for a (3, 1, 4) shape.
EAGLE_MEANS = {"code": 2.75, "math": 2.72, "chat": 2.38, "random": 2.73}
NGRAM_MEANS = {"code": 1.9, "math": 2.0, "chat": 1.25, "random": 1.15}


def mean_accept(
    algorithm: str, steps: int, topk: int, kind: str, override: float | None = None
) -> float:
    """Expected accept length for a prompt kind (``override`` replaces every kind's)."""
    if override is not None:
        return override
    kind = kind if kind in KINDS else "random"
    if algorithm == "NGRAM":
        return NGRAM_MEANS[kind]
    base = EAGLE_MEANS[kind]
    # Scale by how the prior for this shape compares with the prior for (3, 1, 4).
    scale = prior_accept_length(algorithm, steps, topk) / prior_accept_length(algorithm, 3, 1)
    return round(1 + (base - 1) * scale, 3)


def continuation_probability(mean: float, depth: int) -> float:
    """q with 1 + q + ... + q^depth == mean (chain acceptance), by bisection."""
    target = max(1.0, min(mean, depth + 1.0))
    lo, hi = 0.0, 1.0
    for _ in range(50):
        q = (lo + hi) / 2
        if sum(q**i for i in range(depth + 1)) < target:
            lo = q
        else:
            hi = q
    return (lo + hi) / 2


def long_context_factor(position: int, draft_context: int | None) -> float:
    """Acceptance retained at ``position`` by a draft trained on ``draft_context`` tokens: the
    advisor's mechanism (``acceptcontext.retained``), the one ``plan`` prices prompts with."""
    return retained(position, draft_context)


def draw_commit(rng: random.Random, q: float, depth: int) -> tuple[int, int]:
    """One verify step: (tokens committed incl. the bonus token, drafts accepted)."""
    accepted = 0
    while accepted < depth and rng.random() < q:
        accepted += 1
    return accepted + 1, accepted
