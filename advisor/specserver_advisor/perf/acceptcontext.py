"""Acceptance over prompt position: a draft keeps its acceptance within the positions it was
trained on and loses it past them.

A draft whose rotary embedding was trained on ``trained`` positions (its config's derived
context: ``max_position_embeddings`` times its rope scaling, as ``sglang.context`` derives it)
sees positions past that out of distribution when ``SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN``
lets a longer target run it: the share of its drafts beyond the bonus token that are kept halves
with every further ``trained`` positions (the field lesson: a 2,048-position draft without rope
scaling fell steadily from 1k- to 10k-token prompts until speculation lost; given the target's
rope scaling and 131,072 positions it held). Used by ``plan`` for each prompt length and by the
simulated engine at each request's position. Pure.
"""

from __future__ import annotations

import math

#: Positions past the trained context over which the kept share halves, in trained contexts.
HALF_LIFE_CONTEXTS = 1.0


def retained(position: float, trained: int | None) -> float:
    """Share of a draft's in-context acceptance (beyond the bonus token) kept at ``position``."""
    if not trained or position <= trained:
        return 1.0
    return float(0.5 ** ((position - trained) / (trained * HALF_LIFE_CONTEXTS)))


def mean_retained(start: float, end: float, trained: int | None) -> float:
    """The mean of ``retained`` over positions ``start``..``end`` (a request's decode steps)."""
    if not trained or end <= trained:
        return 1.0
    if end <= start:
        return retained(start, trained)
    inside = max(0.0, min(end, trained) - start)
    lo = max(start, float(trained))
    rate = math.log(2) / (trained * HALF_LIFE_CONTEXTS)
    # The integral of 0.5 ** ((p - trained) / half-life) from lo to end.
    past = (retained(lo, trained) - retained(end, trained)) / rate
    return float((inside + past) / (end - start))


def accept_at_prompt(accept: float, prompt: int, output: int, trained: int | None) -> float:
    """The accept length over a request of ``prompt`` + ``output`` tokens, for a draft whose
    accept length within its trained context is ``accept``."""
    kept = mean_retained(prompt, prompt + max(1, output), trained)
    return round(1 + (accept - 1) * kept, 3)


def accept_over_mix(
    accept: float, mix: tuple[tuple[int, float], ...], output: int, trained: int | None
) -> float:
    """The share-weighted accept length over a prompt mix of (tokens, share)."""
    total = sum(share for _, share in mix) or 1.0
    mean = sum(share * accept_at_prompt(accept, p, output, trained) for p, share in mix)
    return round(mean / total, 3)
