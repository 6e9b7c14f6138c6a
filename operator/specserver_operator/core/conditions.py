"""SpecServer status conditions and the one rule for updating them (pure).

Condition types (``status.conditions``, a list keyed by ``type``):

- ``Ready``: True when the engine Deployment has all replicas ready; False while it starts or
  when the spec is invalid; Unknown before the first reconcile.
- ``ConfigValid``: True when the advisor finds nothing that stops SGLang from starting; False
  with the advisor's rule code as reason (e.g. SPEC002); Unknown when a model config could not
  be read (the reason says which).
- ``Progressing``: True while the engine rolls out a new template; False when it is done.
- ``SpeculationActive``: True when the engine runs with speculative flags; False otherwise.
- ``MetricsAvailable`` (mode Auto): True when fresh signals were read; False (reason
  NoPrometheusURL, PrometheusUnavailable, NoSeries or Stale) when the policy holds the mode
  for lack of them.
- ``EngineZeroSteps`` (mode Auto, an On engine with ``speculative.adaptive`` whose cap reaches
  a zero-step tier): which level acted. True (reason ``EngineRanZeroSteps``) when SGLang's
  adaptive tier ran zero draft steps over the signal window (``sglang:spec_num_steps`` 0 at a
  batch its tiers route to a zero-capable tier): speculation is off inside the engine, the draft
  still loaded, and Auto does not score those readings; False with ``DraftStepsRunning`` (the
  engine drafts) or ``DraftUnloaded`` (Auto runs the engine without the draft).
- ``AutoscalerPresent``: True when an HPA or KEDA ScaledObject targets the engine Deployment
  (they coexist, but replica changes and speculation switches interact; the message says how).
- ``SwitchBlocked``: True while a new engine workload (an Auto switch's standby or new
  template, a rollout, a ``resources.nodes`` change, a first deploy) is not Ready and a cause
  is known (core/blocked.py): reason ``Unschedulable``, ``QuotaExceeded``, ``NotAdmitted``
  (held by Kueue), ``ImagePullBackOff`` or ``CrashLoopBackOff``; the message names the workload
  and quotes the cause's own words (the scheduler's, the apiserver's, the kubelet's). False
  (reason ``NotBlocked``) once nothing is blocked; absent on a SpecServer never blocked. With
  no engine serving, Ready=False takes the same reason and message.
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter, ValidationError

from specserver_advisor.models import Condition, ConditionStatus
from specserver_advisor.policy.model import Reason

READY = "Ready"
CONFIG_VALID = "ConfigValid"
PROGRESSING = "Progressing"
SPECULATION_ACTIVE = "SpeculationActive"
METRICS_AVAILABLE = "MetricsAvailable"
ENGINE_ZERO_STEPS = "EngineZeroSteps"
AUTOSCALER_PRESENT = "AutoscalerPresent"
#: The condition shares its spelling with the policy's reason for a switch cancelled because
#: its engine never got its GPUs (one spelling: tests/test_one_spelling.py).
SWITCH_BLOCKED = Reason.SWITCH_BLOCKED.value
#: SwitchBlocked=False's reason, once no engine workload is blocked any more.
NOT_BLOCKED = "NotBlocked"

#: ConfigValid's reason when no admission review's grant lets the HF token Secret reach a pod
#: (secretgrants.py)
SECRET_NOT_APPROVED = "SecretNotApproved"
#: Ready/Progressing reason: a multi-node SpecServer in a cluster without LeaderWorkerSet.
LWS_MISSING = "LeaderWorkerSetMissing"

TYPES = (
    READY,
    CONFIG_VALID,
    PROGRESSING,
    SPECULATION_ACTIVE,
    METRICS_AVAILABLE,
    ENGINE_ZERO_STEPS,
    AUTOSCALER_PRESENT,
    SWITCH_BLOCKED,
)
#: Written on the first visit; MetricsAvailable only exists in mode Auto.
INITIAL_TYPES = TYPES[:4]
_ORDER = {t: i for i, t in enumerate(TYPES)}
_LIST = TypeAdapter(list[Condition])


def condition(
    type_: str, status: str, reason: str, message: str, generation: int | None, now: str
) -> Condition:
    """A typed condition (``lastTransitionTime`` ``now``; set_condition keeps an older one)."""
    return Condition(
        type=type_,
        status=ConditionStatus(status),
        reason=reason or "Unknown",
        message=message or reason or "-",
        observed_generation=generation,
        last_transition_time=now,
    )


def parse(stored: Any) -> list[Condition]:
    """The stored ``status.conditions`` as typed conditions; an entry the model cannot read
    (edited by hand, written by something else) is left out, so the next write replaces it."""
    if not isinstance(stored, list):
        return []
    try:
        return _LIST.validate_python(stored)  # one call for the usual, readable list
    except ValidationError:
        pass
    out = []
    for item in stored:
        try:
            out.append(Condition.model_validate(item))
        except ValidationError:
            continue
    return out


def set_condition(conditions: list[Condition], new: Condition, now: str) -> list[Condition]:
    """Replace the condition of ``new.type``; ``lastTransitionTime`` moves only on a flip.

    Returns a new list (input untouched), in the order of ``TYPES`` then any others.
    """
    old = get_condition(conditions, new.type)
    same = old is not None and old.status == new.status
    since = old.last_transition_time if old is not None and same else now
    if new.last_transition_time != since:
        new = new.model_copy(update={"last_transition_time": since})
    out = [c for c in conditions if c.type != new.type]
    out.append(new)
    return sorted(out, key=lambda c: _ORDER.get(c.type, len(TYPES)))


def put(
    conditions: list[Condition],
    type_: str,
    status: str,
    reason: str,
    message: str,
    generation: int | None,
    now: str,
) -> list[Condition]:
    """``set_condition`` of a new condition, built once with the time it should carry (and in
    the place of the one it replaces: a pass puts every condition, most of them unchanged)."""
    for i, old in enumerate(conditions):
        if old.type == type_:
            since = old.last_transition_time if old.status == status else now
            new = condition(type_, status, reason, message, generation, since)
            return [*conditions[:i], new, *conditions[i + 1 :]]
    new = condition(type_, status, reason, message, generation, now)
    return set_condition(conditions, new, now)


def initial_conditions(generation: int | None, now: str) -> list[Condition]:
    """All types as Unknown, for the first visit."""
    return [
        condition(t, "Unknown", "Reconciling", "first reconcile", generation, now)
        for t in INITIAL_TYPES
    ]


def get_condition(conditions: list[Condition], type_: str) -> Condition | None:
    """The condition of a type, if present."""
    return next((c for c in conditions if c.type == type_), None)


def as_api(conditions: list[Condition]) -> list[dict[str, Any]]:
    """The conditions as the API stores them: the model's camelCase dump without nulls, built
    by hand (a pass serialises every condition; pydantic's dump costs several times more)."""
    out = []
    for c in conditions:
        item: dict[str, Any] = {"type": c.type, "status": c.status.value}
        if c.observed_generation is not None:
            item["observedGeneration"] = c.observed_generation
        item["lastTransitionTime"] = c.last_transition_time
        item["reason"] = c.reason
        item["message"] = c.message
        out.append(item)
    return out
