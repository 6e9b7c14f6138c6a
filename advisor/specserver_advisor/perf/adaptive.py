"""SGLang 0.5.23's own adaptive speculation (``--speculative-adaptive``), modelled.

With ``--speculative-adaptive`` SGLang keeps the draft loaded and picks the number of draft
steps per batch at runtime: the batch size (padded up to a captured CUDA-graph size) selects a
tier, each tier keeps an EMA of accepted drafts per request and, after a warm-up and then every
few batches, moves its steps down while the EMA is at or below the next lower candidate's
threshold (candidate - 0.5, or 0.5 for the zero step, plus the down hysteresis) or else up while
it is above the current one's (step - 0.5 plus the up hysteresis). A tier at zero steps (no
drafting) probes the next candidate at every update. ``num_draft_tokens`` follows as steps + 1;
every request reserves max(candidate) + 1 tokens; the draft's weights and KV layers stay
allocated whatever the steps (so zero steps does not give the KV pool back).

Written from SGLang's ``speculative/adaptive_spec_params.py`` behaviour (not copied). Pure:
used by the simulated engine (per batch, with drawn acceptance), by the performance model's
users (``settle``: the steps a tier runs at a steady acceptance) and by fleetsim.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from specserver_advisor.perf.constants import DEFAULT_CALIBRATION, Calibration
from specserver_advisor.perf.model import (
    Prediction,
    Scenario,
    arriving_wave_prefill,
    closed_loop,
    prompt_prefills,
    step_time,
)
from specserver_advisor.sglang.adaptivetiers import DEFAULT_TIERS, Tier, tier_index
from specserver_advisor.sglang.cudagraphs import graph_batch_sizes

#: Speculative algorithms SGLang 0.5.23 runs adaptive for (others: switched off with a warning).
SUPPORTED_ALGORITHMS = ("EAGLE", "EAGLE3")


def candidate_union(tiers: Sequence[Tier] = DEFAULT_TIERS) -> list[int]:
    """Every tier's candidates (sizes SGLang's runtime buffers)."""
    return sorted({s for t in tiers for s in t.candidate_steps})


def initial_steps(tiers: Sequence[Tier] = DEFAULT_TIERS, requested: int | None = None) -> int:
    """The launch's steps: the middle of the union unless given; must be a candidate."""
    union = candidate_union(tiers)
    if requested is None:
        return union[len(union) // 2]
    if requested not in union:
        raise ValueError(
            f"--speculative-num-steps={requested} is not in the adaptive config "
            f"candidate_steps {union}"
        )
    return requested


def reserved_tokens_per_request(tiers: Sequence[Tier] = DEFAULT_TIERS) -> int:
    """Tokens each request reserves for drafts: the largest candidate + 1."""
    return max(candidate_union(tiers)) + 1


def unsupported_reason(algorithm: str | None, topk: int | None, dp_attention: bool) -> str | None:
    """Why SGLang turns adaptive off for this launch (it warns and runs fixed), or None."""
    if algorithm not in SUPPORTED_ALGORITHMS:
        return f"speculative_algorithm={algorithm} (only EAGLE/EAGLE3 are supported)"
    if topk is not None and topk != 1:
        return f"speculative_eagle_topk={topk} (only topk=1 is supported)"
    if dp_attention:
        return "attention DP is not supported"
    return None


@dataclass
class Slot:
    """One tier's running state: its current steps and EMA of accepted drafts per request."""

    tier: Tier
    steps: int
    ema: float
    batches: int = 0

    @classmethod
    def start(cls, tier: Tier, launch_steps: int) -> Slot:
        cands = sorted(set(tier.candidate_steps))
        steps = launch_steps if launch_steps in cands else cands[len(cands) // 2]
        return cls(tier, steps, float(steps - 1))

    def update(self, mean_correct_drafts: float) -> bool:
        """Feed one verify's mean accepted drafts per request; True when the steps changed."""
        t = self.tier
        if self.steps > 0:
            self.ema = (1 - t.ema_alpha) * self.ema + t.ema_alpha * mean_correct_drafts
        self.batches += 1
        if self.batches <= t.warmup_batches:
            return False
        if (self.batches - t.warmup_batches) % t.update_interval:
            return False
        return self._recompute()

    def _recompute(self) -> bool:
        cands = sorted(set(self.tier.candidate_steps))
        old = self.steps
        idx = cands.index(old)
        if old == 0:
            idx = min(idx + 1, len(cands) - 1)
            if cands[idx] > 0 and self.ema < 0:
                self.ema = float(cands[idx] - 1)
            self.steps = cands[idx]
            return self.steps != old
        start = idx
        while idx > 0:
            lower = cands[idx - 1]
            threshold = (0.5 if lower == 0 else lower - 0.5) + self.tier.down_hysteresis
            if self.ema > threshold:
                break
            idx -= 1
        if idx == start:
            while idx < len(cands) - 1 and self.ema > cands[idx] - 0.5 + self.tier.up_hysteresis:
                idx += 1
        self.steps = cands[idx]
        return self.steps != old


class AdaptiveController:
    """All tiers of one engine: routes batches and feeds verify results (the simulator's)."""

    def __init__(
        self,
        tiers: Sequence[Tier] = DEFAULT_TIERS,
        launch_steps: int | None = None,
        graph_sizes: Sequence[int] | None = None,
    ) -> None:
        self.tiers = tuple(tiers)
        start = initial_steps(self.tiers, launch_steps)
        self.slots = [Slot.start(t, start) for t in self.tiers]
        self.graph_sizes = list(graph_sizes) if graph_sizes else None

    def slot(self, batch: int) -> Slot:
        return self.slots[tier_index(batch, self.tiers, self.graph_sizes)]

    def steps_for_batch(self, batch: int) -> int:
        return self.slot(batch).steps

    def on_verify(self, batch: int, correct_drafts: Sequence[int]) -> int | None:
        """One verify's per-request accepted drafts; returns the tier's new steps if they moved."""
        if not correct_drafts:
            return None
        slot = self.slot(batch)
        return slot.steps if slot.update(sum(correct_drafts) / len(correct_drafts)) else None


def chain_correct_drafts(q: float, steps: int) -> float:
    """Expected accepted drafts per verify of a chain of ``steps`` drafts (keep-probability q)."""
    return float(sum(q**i for i in range(1, steps + 1)))


def settle(
    batch: int,
    correct_drafts: Callable[[int], float],
    tiers: Sequence[Tier] = DEFAULT_TIERS,
    launch_steps: int | None = None,
    graph_sizes: Sequence[int] | None = None,
    batches: int = 400,
) -> dict[int, float]:
    """Share of batches at each step count once a tier has settled at a steady acceptance.

    Runs the tier's update rule on the expected accepted drafts at its current steps
    (``correct_drafts(steps)``) and counts the second half of ``batches``; a tier that
    probes up from zero and falls back shows both step counts.
    """
    tier = tiers[tier_index(batch, tiers, graph_sizes)]
    slot = Slot.start(tier, initial_steps(tiers, launch_steps))
    counts: dict[int, int] = {}
    for i in range(batches):
        if i >= batches // 2:
            counts[slot.steps] = counts.get(slot.steps, 0) + 1
        slot.update(correct_drafts(slot.steps) if slot.steps else 0.0)
    total = sum(counts.values())
    return {s: n / total for s, n in sorted(counts.items())}


def keep_probability(accept_length: float, depth: int) -> float:
    """q with 1 + q + ... + q^depth == accept_length (a chain of ``depth`` drafts)."""
    target = max(1.0, min(accept_length, depth + 1.0))
    lo, hi = 0.0, 1.0
    for _ in range(50):
        q = (lo + hi) / 2
        lo, hi = (q, hi) if sum(q**i for i in range(depth + 1)) < target else (lo, q)
    return (lo + hi) / 2


@lru_cache(maxsize=1024)
def _settled_chain(tier: int, q: float, tiers: tuple[Tier, ...]) -> dict[int, float]:
    """``settle`` of tier ``tier`` on a chain of keep-probability ``q``: the same for every
    batch the tier serves (``plan --search-shape`` asks at each of ~130 loads)."""
    return settle(tiers[tier].min_batch, lambda s: chain_correct_drafts(q, s), tiers)


def predict_adaptive(
    scn: Scenario,
    concurrency: int,
    capacity: int,
    cal: Calibration = DEFAULT_CALIBRATION,
    tiers: Sequence[Tier] = DEFAULT_TIERS,
) -> Prediction:
    """Closed-loop steady state of an engine launched with ``--speculative-adaptive``.

    The draft stays loaded (``capacity`` is the with-draft cap, its prefill is paid); the
    running batch's tier settles on steps (``settle``) from the scenario's acceptance, read as
    a chain at the launch's depth; each step count costs its own step time and commits its own
    accept length.
    """
    spec = scn.spec
    running = max(1, min(concurrency, capacity)) if capacity > 0 else 0
    if spec is None or running == 0:
        return closed_loop(scn, concurrency, capacity, 0.0, 1.0, 0.0)
    q = keep_probability(scn.accept_length, max(1, spec.num_steps))
    sizes = graph_batch_sizes(scn.cuda_graph_max_bs, speculative=True)
    tier = tier_index(running, tiers, sizes)
    shares = _settled_chain(tier, q, tuple(tiers))
    step = accept = 0.0
    for steps, share in shares.items():
        committed = 1.0 + chain_correct_drafts(q, steps)
        trial = replace(scn, accept_length=committed)
        step += share * step_time(trial, running, True, cal, steps=steps)
        accept += share * committed
    prompts = prompt_prefills(scn, True, cal)
    prefill = sum(p.share * p.prefill_s for p in prompts)
    wave = arriving_wave_prefill(scn, running, True, cal)
    return closed_loop(scn, concurrency, capacity, step, accept, prefill, prompts, wave)
