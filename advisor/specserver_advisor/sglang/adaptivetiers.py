"""SGLang 0.5.23's adaptive speculation tiers (``--speculative-adaptive``): the default config,
the tier a running batch routes to, and from which batch a launch's tiers run zero draft steps.

SGLang's ``AdaptiveSpeculativeParams`` pads the batch up to a captured CUDA-graph size (the
speculative capture list, ``cudagraphs``) and routes it to the tier with the largest lower bound
at or below it; ``DEFAULT_ADAPTIVE_CONFIG``'s tiers at 8, 32 and 64 include 0 steps. Pure. Used
by ``adaptive`` (the controller), ``launch`` (Auto's policy context), lint rule SPEC018 and the
policy's zero-step reading (``zerosteps``).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

from specserver_advisor.sglang.cudagraphs import graph_batch_sizes


@dataclass(frozen=True)
class Tier:
    """One batch-size slot of the adaptive config (key: the smallest batch it serves)."""

    min_batch: int
    candidate_steps: tuple[int, ...]
    up_hysteresis: float = 0.0
    down_hysteresis: float = -0.25
    ema_alpha: float = 0.2
    update_interval: int = 5
    warmup_batches: int = 10


#: ``DEFAULT_ADAPTIVE_CONFIG`` of SGLang 0.5.23.
DEFAULT_TIERS: tuple[Tier, ...] = (
    Tier(1, (1, 3, 5, 7), 0.0, -0.25),
    Tier(8, (0, 1, 3), 0.0, 0.0),
    Tier(32, (0, 1), 0.0, 0.0),
    Tier(64, (0,), 0.0, 0.0),
)


def tier_index(
    batch: int, tiers: Sequence[Tier] = DEFAULT_TIERS, graph_sizes: Sequence[int] | None = None
) -> int:
    """The tier a batch routes to: padded up to a captured graph size, then the lower bound."""
    if graph_sizes:
        sizes = sorted(graph_sizes)
        i = bisect.bisect_left(sizes, batch)
        if i < len(sizes):
            batch = sizes[i]
    keys = sorted(t.min_batch for t in tiers)
    k = max(0, bisect.bisect_right(keys, batch) - 1)
    return next(i for i, t in enumerate(tiers) if t.min_batch == keys[k])


def _first_batch(
    cap: int, tiers: Sequence[Tier], graph_sizes: Sequence[int] | None, only_zero: bool
) -> int | None:
    for batch in range(1, max(0, cap) + 1):
        steps = tiers[tier_index(batch, tiers, graph_sizes)].candidate_steps
        if (set(steps) == {0}) if only_zero else (0 in steps):
            return batch
    return None


def zero_step_batch(
    cap: int, cuda_graph_max_bs: int | None, tiers: Sequence[Tier] = DEFAULT_TIERS
) -> int | None:
    """The smallest running batch (at most ``cap``) SGLang routes to a tier that may run zero
    steps (padded up to a captured graph size first, as ``AdaptiveSpeculativeParams`` does)."""
    return _first_batch(cap, tiers, graph_batch_sizes(cuda_graph_max_bs, speculative=True), False)


def always_zero_batch(
    cap: int, cuda_graph_max_bs: int | None, tiers: Sequence[Tier] = DEFAULT_TIERS
) -> int | None:
    """The smallest running batch (at most ``cap``) routed to a tier whose only candidate is 0."""
    return _first_batch(cap, tiers, graph_batch_sizes(cuda_graph_max_bs, speculative=True), True)


def overlap_message(cap: int, cuda_graph_max_bs: int | None) -> str | None:
    """Why a launch with ``--speculative-adaptive`` and cap ``cap`` has two controllers on one
    signal (None when the cap keeps every zero-step tier out of reach)."""
    some = zero_step_batch(cap, cuda_graph_max_bs)
    if some is None:
        return None
    only = always_zero_batch(cap, cuda_graph_max_bs)
    tiers = ", ".join(
        f">= {t.min_batch}: {list(t.candidate_steps)}"
        for t in DEFAULT_TIERS
        if 0 in t.candidate_steps
    )
    reach = (
        f"from a running batch of {only} it always runs 0"
        if only is not None
        else f"from a running batch of {some} it may run 0"
    )
    return (
        f"--speculative-adaptive with --max-running-requests {cap}: SGLang's adaptive tiers "
        f"({tiers} draft steps) switch speculation off inside the engine, {reach}; the draft "
        "stays loaded (its weights and KV are not given back) and the engine reports accept "
        "length ~1.0 with sglang:spec_num_steps 0. In mode Auto the operator sees it "
        "(condition EngineZeroSteps) and does not score those readings as speculation"
    )
