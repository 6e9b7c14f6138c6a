"""What the auto-speculation policy reads, remembers and answers, and what it learns per band.

The data of ``policy.decide``: one cycle's ``Observation`` and the ``Readings`` the policy takes
from it, the model's ``PolicyContext``, the ``PolicyState`` kept between cycles (stored in the
SpecServer status; the operator's policystate.py reads and writes it there) and the ``Decision``
with its ``Reason``; the speculation mode (``SpecMode``) with every spelling it has outside the
policy; plus the per-band learning (``band_of``, ``score``, ``learned_preference``). Pure.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from specserver_advisor.models import AutoSpeculation, Mode, SpeculationState


class SpecMode(StrEnum):
    """Whether the engine runs with the draft: the policy's own spelling ("on"/"off"), which is
    also the engine Deployment's ``specserver.io/mode`` label, the metrics' ``mode`` label, the
    BlueGreen Deployment suffix and the CLI's word. The other spellings are converted here only:
    the status's ``On``/``Off`` (``status``, ``from_status``), a boolean (``speculative``,
    ``of``), the action that switches to it (``action``, ``from_action``) and ``spec.mode``
    (``forced_by``)."""

    ON = "on"
    OFF = "off"

    @property
    def other(self) -> SpecMode:
        return SpecMode.OFF if self is SpecMode.ON else SpecMode.ON

    @property
    def speculative(self) -> bool:
        return self is SpecMode.ON

    @property
    def status(self) -> SpeculationState:
        """The status's spelling (``speculationMode``, ``switch.target``, the ledger)."""
        return SpeculationState.ON if self is SpecMode.ON else SpeculationState.OFF

    @property
    def action(self) -> str:
        """The decision's action that switches to this mode."""
        return ENABLE if self is SpecMode.ON else DISABLE

    @classmethod
    def of(cls, speculative: bool) -> SpecMode:
        return cls.ON if speculative else cls.OFF

    @classmethod
    def from_status(cls, value: str) -> SpecMode:
        """The mode a status value (``On``/``Off``) names."""
        return cls.ON if value == SpeculationState.ON else cls.OFF

    @classmethod
    def from_action(cls, action: str) -> SpecMode:
        return cls.ON if action == ENABLE else cls.OFF

    @classmethod
    def parse(cls, value: object) -> SpecMode | None:
        """The mode any spelling names, case-insensitively (None: none)."""
        text = value.lower() if isinstance(value, str) else None
        return cls(text) if text in (cls.ON, cls.OFF) else None

    @classmethod
    def forced_by(cls, spec_mode: str) -> SpecMode | None:
        """The mode ``spec.mode`` Enabled/Disabled forces (None: Auto decides)."""
        if spec_mode == Mode.ENABLED:
            return cls.ON
        return cls.OFF if spec_mode == Mode.DISABLED else None


ON, OFF = SpecMode.ON, SpecMode.OFF
#: A decision's actions: no switch, or the switch to ``SpecMode.action``.
KEEP, ENABLE, DISABLE = "keep", "enable", "disable"


class Reason(StrEnum):
    """Why the policy decided what it did: ``Decision.reason``, the status's
    ``lastDecisionReason`` and ledger, and the operator's event reasons for them."""

    WITHIN_THRESHOLDS = "WithinThresholds"
    BREACH_PENDING = "BreachPending"
    ENABLE_PENDING = "EnablePending"
    DWELL_TIME = "DwellTime"
    SWITCH_BUDGET_EXHAUSTED = "SwitchBudgetExhausted"
    DRY_RUN = "DryRun"
    MANUAL_MODE = "ManualMode"
    PAUSED = "Paused"
    METRICS_STALE = "MetricsStale"
    EXPLORE_OTHER_MODE = "ExploreOtherMode"
    ACCEPT_LENGTH_LOW = "AcceptLengthLow"
    TTFT_SLO_BREACHED = "TTFTSLOBreached"
    QUEUE_BUILDING = "QueueBuilding"
    OTHER_MODE_FASTER_HERE = "OtherModeFasterHere"
    LOAD_ABOVE_CROSSOVER = "LoadAboveCrossover"
    LOAD_BELOW_CROSSOVER = "LoadBelowCrossover"
    SWITCH_DID_NOT_PAY = "SwitchDidNotPay"
    OVERLOAD_ENDED = "OverloadEnded"
    OVERLOAD_RETURNED = "OverloadReturned"
    SWITCH_CANCELLED = "SwitchCancelled"
    #: SGLang's adaptive tier ran no draft steps on the cycle's readings (``zerosteps``)
    ENGINE_RAN_ZERO_STEPS = "EngineRanZeroSteps"
    #: the operator's: a switch not Ready within ``switchTimeoutSeconds`` was rolled back
    SWITCH_FAILED = "SwitchFailed"
    #: the operator's: a switch cancelled at its deadline, its new engine never got its GPUs
    #: (``autocycle.record_blocked``)
    SWITCH_BLOCKED = "SwitchBlocked"
    #: the operator's: a blocked switch retried as Recreate (``blockedSwitchFallback``)
    SWITCH_FELL_BACK = "SwitchFellBack"
    #: a keep: the switch to the mode a blocked switch was to is backing off
    SWITCH_BACKOFF = "SwitchBackoff"


#: Reasons of a keep that say nothing new (no event when they follow another reason).
ROUTINE_REASONS = (Reason.WITHIN_THRESHOLDS, Reason.BREACH_PENDING, Reason.ENABLE_PENDING)
EWMA = 0.3
#: A learned comparison needs this many samples in each mode before it overrides the model.
MIN_SAMPLES = 3
#: A learned throughput difference below this fraction counts as a tie.
LEARN_MARGIN = 0.05


@dataclass
class Observation:
    """One cycle's signals for one SpecServer; any field may be None or NaN."""

    ts: float
    mode: SpecMode | None = None
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
        if mode is not None:
            if mode not in (ON, OFF):
                raise ValueError(f"observation 'mode' must be 'on' or 'off', got {mode!r}")
            known["mode"] = SpecMode(mode)
        return cls(ts=ts, **known)


@dataclass
class Readings:
    """The observation's signals the policy reads, each a finite number or None (missing, NaN
    or infinite), the load it derives from them and, for a cancelled switch, its cause;
    ``policy.decide`` and ``autocycle.reconsider`` read them the same way (``readings``)."""

    accept_length: float | None = None
    ttft_p99_s: float | None = None
    running: float | None = None
    queued: float | None = None
    output_tok_s: float | None = None
    age_s: float | None = None
    #: running + queued (None until both are known)
    load: float | None = None
    #: why a switch under way was cancelled (``switchcost.cancel_reason``)
    cause: str | None = None
    #: 0 on a cycle SGLang's adaptive tier ran no draft steps (``zerosteps``; else None)
    spec_num_steps: float | None = None

    def to_json(self) -> dict[str, Any]:
        """The decision's inputs: the signals, and ``load``/``cause``/``spec_num_steps`` once
        they are set."""
        out: dict[str, Any] = {name: getattr(self, name) for name in SIGNALS}
        if self.load is not None:
            out["load"] = self.load
        if self.cause is not None:
            out["cause"] = self.cause
        if self.spec_num_steps is not None:
            out["spec_num_steps"] = self.spec_num_steps
        return out


#: The signals ``Readings`` takes from an ``Observation``.
SIGNALS = ("accept_length", "ttft_p99_s", "running", "queued", "output_tok_s", "age_s")


def readings(obs: Observation) -> Readings:
    """What the policy reads of ``obs``."""
    values = [finite_or_none(getattr(obs, k)) for k in SIGNALS]
    accept, ttft, running, queued, tok_s, age = values
    return Readings(accept, ttft, running, queued, tok_s, age)


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
    #: Seconds a restart of this replica takes beyond one pod's (a multi-node group's slowest
    #: pod and rendezvous: ``switchcost.group_restart_extra_s``); 0 on one node.
    restart_extra_s: float = 0.0
    #: Seconds from a restart until this replica is Ready again, as modelled
    #: (``switchcost.restart_seconds`` of its weights per node and node count); None: not
    #: planned (``switchcost.switch_deadline_s`` then assumes one pod with no weights).
    restart_s: float | None = None

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

    mode: SpecMode = ON
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
    #: When ``bands`` was last stored (``autocycle.persisted``; None: not yet).
    bands_saved_at: float | None = None
    #: Until when a switch to ``blocked_mode`` backs off: a switch to it was cancelled at its
    #: deadline, its new engine never got its GPUs (``autocycle.record_blocked``).
    blocked_until: float | None = None
    #: Consecutive blocked switches to ``blocked_mode`` (0: none since one completed).
    blocked_attempts: int = 0
    #: The mode the blocked switch was to (None: none blocked).
    blocked_mode: SpecMode | None = None

    def __post_init__(self) -> None:
        self.mode = SpecMode(self.mode)  # "on"/"off" as written in JSON (ValueError otherwise)
        if self.blocked_mode is not None:
            self.blocked_mode = SpecMode(self.blocked_mode)

    def backing_off(self, target: SpecMode, now: float) -> bool:
        """A switch to ``target`` is held: it was blocked and its back-off has not run out."""
        return (
            self.blocked_mode == target
            and self.blocked_until is not None
            and now < self.blocked_until
        )

    def copied(self) -> PolicyState:
        """A copy that shares nothing mutable with this state."""
        return PolicyState.from_json(self.to_json())

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
        """The state of its JSON form (raises ValueError for a mode that is not on/off)."""
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


@dataclass
class Decision:
    """The policy's answer for one cycle."""

    ts: float
    action: str  # KEEP | ENABLE | DISABLE
    reason: Reason
    mode: SpecMode  # mode after the decision
    inputs: Readings = field(default_factory=Readings)
    thresholds: dict[str, Any] = field(default_factory=dict)
    would: str | None = None  # in dry run: the action that was not taken

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "ts": self.ts,
            "action": self.action,
            "reason": self.reason,
            "mode": self.mode,
        }
        out.update(self.inputs.to_json())
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


def learn_band(state: PolicyState, band: str, mode: SpecMode, score: float, now: float) -> None:
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
) -> SpecMode | None:
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
