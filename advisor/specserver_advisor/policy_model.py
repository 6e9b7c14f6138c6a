"""What the auto-speculation policy reads, remembers and answers, and what it learns per band.

The data of ``policy.decide``: one cycle's ``Observation``, the model's ``PolicyContext``, the
``PolicyState`` kept between cycles (plain JSON, stored in the SpecServer status) and the
``Decision``; plus the per-band learning (``band_of``, ``score``, ``learned_preference``). Pure.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

from specserver_advisor.models import AutoSpeculation

ON, OFF = "on", "off"
EWMA = 0.3
#: A learned comparison needs this many samples in each mode before it overrides the model.
MIN_SAMPLES = 3
#: A learned throughput difference below this fraction counts as a tie.
LEARN_MARGIN = 0.05


@dataclass
class Observation:
    """One cycle's signals for one SpecServer; any field may be None or NaN."""

    ts: float
    mode: str | None = None
    accept_length: float | None = None
    ttft_p99_s: float | None = None
    ttft_p50_s: float | None = None
    tpot_p50_ms: float | None = None
    itl_p99_ms: float | None = None
    running: float | None = None
    queued: float | None = None
    output_tok_s: float | None = None
    kv_usage: float | None = None
    max_running_requests: float | None = None
    age_s: float | None = None
    #: The most draft steps SGLang reported over the window (``sglang:spec_num_steps``): 0
    #: on an adaptive On engine means its tier ran no drafts (``zerosteps``).
    spec_num_steps: float | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Observation:
        known: dict[str, Any] = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        ts = finite_or_none(known.pop("ts", None))
        if ts is None:
            raise ValueError("observation has no numeric 'ts'")
        mode = known.get("mode")
        if mode is not None and mode not in (ON, OFF):
            raise ValueError(f"observation 'mode' must be 'on' or 'off', got {mode!r}")
        return cls(ts=ts, **known)


def readings(obs: Observation) -> dict[str, Any]:
    """The observation's signals the policy reads, each a finite number or None (missing, NaN
    or infinite); ``policy.decide`` and ``autocycle.reconsider`` read them the same way."""
    return {
        k: finite_or_none(getattr(obs, k))
        for k in ("accept_length", "ttft_p99_s", "running", "queued", "output_tok_s", "age_s")
    }


def finite_or_none(value: float | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) or math.isinf(number) else number


@dataclass
class PolicyContext:
    """What the performance model predicts for this target, draft and GPU."""

    #: (accept length, crossover concurrency) pairs, ascending accept length. ``math.inf``:
    #: speculation wins everywhere in range; 0: it never wins.
    crossover_by_accept: list[tuple[float, float]]
    #: Accept length below which speculation does not pay even at low load.
    break_even_accept: float
    prior_accept: float
    #: The On engine runs SGLang's ``--speculative-adaptive``: SGLang itself cuts the draft
    #: steps when acceptance is low, so low acceptance alone is no reason to restart without
    #: the draft (the policy still unloads it for load, queueing and measured losses).
    engine_adapts_steps: bool = False
    #: The smallest running batch the On engine's adaptive tiers may run zero draft steps at,
    #: under its cap (``zerosteps.zero_step_batch``); inf: none reachable or not adaptive.
    zero_step_batch: float = math.inf

    def crossover(self, accept: float) -> float:
        """Predicted crossover concurrency at an accept length (linear interpolation)."""
        table = self.crossover_by_accept
        if not table:
            return math.inf
        if accept <= table[0][0]:
            return table[0][1]
        for (a0, c0), (a1, c1) in itertools.pairwise(table):
            if a0 <= accept <= a1:
                if math.isinf(c0) or math.isinf(c1):
                    return c1 if accept - a0 > a1 - accept else c0
                return c0 + (c1 - c0) * (accept - a0) / (a1 - a0)
        return table[-1][1]


#: The context with no load-based decisions (crossover at infinity): where Auto starts when
#: the launch cannot be planned or has no KV pool to reason on (the launch model, replay).
NEUTRAL_CONTEXT = PolicyContext([(1.0, math.inf)], break_even_accept=1.0, prior_accept=2.5)


@dataclass
class PolicyState:
    """Everything the policy remembers between cycles (JSON round-trippable)."""

    mode: str = ON
    mode_since: float = 0.0
    last_switch: float | None = None
    switch_times: list[float] = field(default_factory=list)
    disable_breaches: int = 0
    enable_passes: int = 0
    queue_growth: int = 0
    last_queued: float | None = None
    last_accept: float | None = None
    #: The last switch was an exploration: reverting it is not held by the dwell time.
    exploring: bool = False
    #: The load band of the last cycle and for how many consecutive cycles it has held.
    last_band: str | None = None
    band_streak: int = 0
    #: band -> mode -> {"tok_s": ewma, "n": samples}
    bands: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        # Not dataclasses.asdict: its deep copy was most of the operator's per-object CPU.
        out = {name: getattr(self, name) for name in self.__dataclass_fields__}
        out["switch_times"] = list(self.switch_times)
        out["bands"] = {
            b: {m: dict(e) for m, e in modes.items()} for b, modes in self.bands.items()
        }
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PolicyState:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


@dataclass
class Decision:
    """The policy's answer for one cycle."""

    ts: float
    action: str  # keep | enable | disable
    reason: str
    mode: str  # mode after the decision
    inputs: dict[str, Any] = field(default_factory=dict)
    thresholds: dict[str, Any] = field(default_factory=dict)
    would: str | None = None  # in dry run: the action that was not taken

    def to_json(self) -> dict[str, Any]:
        out = {"ts": self.ts, "action": self.action, "reason": self.reason, "mode": self.mode}
        out.update(self.inputs)
        out["thresholds"] = self.thresholds
        if self.would:
            out["would"] = self.would
        return out


#: Accept lengths past this share one band (a hostile 1e308 made ``accept * 5`` infinite).
MAX_BAND_ACCEPT = 1000.0


def band_of(load: float, accept: float) -> str:
    """Learning key: half-octave concurrency band x accept-length band (0.2 wide)."""
    accept = min(accept, MAX_BAND_ACCEPT)
    step = max(0, round(2 * math.log2(max(1.0, load))))
    return f"{round(2 ** (step / 2))}@{round(accept * 5) / 5:.1f}"


def learn_band(state: PolicyState, band: str, mode: str, score: float, now: float) -> None:
    entry = state.bands.setdefault(band, {}).setdefault(mode, {"score": score, "n": 0})
    entry["score"] = score if entry["n"] == 0 else (1 - EWMA) * entry["score"] + EWMA * score
    entry["n"] += 1
    entry["at"] = now


def score(tok_s: float, ttft_p99_s: float | None, slo_s: float) -> float:
    """What a cycle delivered: output throughput, scaled down when TTFT P99 misses its SLO."""
    if ttft_p99_s is None or ttft_p99_s <= slo_s:
        return tok_s
    return tok_s * slo_s / ttft_p99_s


def fresh_band_entry(entry: dict[str, float] | None, now: float, max_age: float) -> bool:
    if not entry:
        return False
    return entry["n"] >= MIN_SAMPLES and now - entry.get("at", now) <= max_age


def learned_preference(
    state: PolicyState, band: str, now: float = 0.0, max_age: float = math.inf
) -> str | None:
    """The mode that delivered more in this band, when both were seen enough, recently."""
    seen = state.bands.get(band, {})
    on, off = seen.get(ON), seen.get(OFF)
    if (
        not on
        or not off
        or not fresh_band_entry(on, now, max_age)
        or not fresh_band_entry(off, now, max_age)
    ):
        return None
    if on["score"] > off["score"] * (1 + LEARN_MARGIN):
        return ON
    if off["score"] > on["score"] * (1 + LEARN_MARGIN):
        return OFF
    return None


def accept_floor(policy: AutoSpeculation, ctx: PolicyContext) -> float:
    """The configured floor, or 5% above the model's low-load break-even accept length."""
    return policy.accept_length_floor or round(ctx.break_even_accept * 1.05, 3)
