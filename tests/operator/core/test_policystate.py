"""status.policyState: read into the policy's ``PolicyState`` and written back, exactly."""

from __future__ import annotations

import json
import math

from specserver_advisor.models import (
    MAX_POLICY_BANDS,
    MAX_SWITCH_TIMES,
    AutoPolicyState,
    AutoSpeculation,
    SpecServerStatus,
)
from specserver_advisor.policy.autocycle import evaluate, load_state, record_blocked
from specserver_advisor.policy.model import Observation, PolicyContext, PolicyState
from specserver_operator.core import policystate

CTX = PolicyContext(crossover_by_accept=[(2.0, 8.0), (3.0, 16.0)], break_even_accept=1.4,
                    prior_accept=2.5)  # fmt: skip


def _learned_state() -> PolicyState:
    """The state to store after a few evaluations (bands, counters, readings)."""
    stored: PolicyState | None = None
    for k in range(8):
        obs = Observation(ts=1000.0 + 5 * k, accept_length=2.6, running=4.0, queued=0.0,
                          output_tok_s=400.0, ttft_p99_s=0.5, age_s=1.0)  # fmt: skip
        _, _, stored = evaluate(obs, stored, "on", obs.ts, AutoSpeculation(), CTX)
    assert stored is not None
    return stored


def test_the_advisor_state_round_trips_through_the_structured_field() -> None:
    assert set(PolicyState.__dataclass_fields__) == set(AutoPolicyState.model_fields)
    stored = _learned_state()
    record = policystate.to_status(stored)
    assert record is not None and record["mode"] == "On"
    (scores,) = [entry for modes in record["bands"].values() for entry in modes.values()]
    assert set(scores) == {"score", "samples", "at"}  # not "n": YAML 1.1 reads that as false
    SpecServerStatus.model_validate({"policyState": record})  # what the CRD schema holds
    again = policystate.parse(json.loads(json.dumps(record)))  # as the API server returns it
    assert again is not None and again == stored
    assert policystate.to_status(again) == record


def test_an_unchanged_evaluation_yields_the_same_object() -> None:
    record = policystate.to_status(_learned_state())
    obs = Observation(ts=1040.0, accept_length=2.6, running=4.0, queued=0.0,
                      output_tok_s=400.0, ttft_p99_s=0.5, age_s=1.0)  # fmt: skip
    held = policystate.parse(record)
    _, _, stored = evaluate(obs, held, "on", 1040.0, AutoSpeculation(), CTX)
    assert stored is held and policystate.to_status(stored) == record


def test_the_previous_versions_json_string_is_read() -> None:
    legacy = json.dumps(PolicyState(mode="off", mode_since=12.0, queue_growth=2).to_json())
    state = policystate.parse(legacy)
    assert state is not None and state.mode == "off" and state.queue_growth == 2
    assert load_state(state, "on").mode == "off"
    record = policystate.to_status(state)
    assert record is not None and record["modeSince"] == 12.0 and record["queueGrowth"] == 2


def test_unreadable_state_starts_afresh_instead_of_failing() -> None:
    for junk in ("{not json", "[1, 2]", json.dumps({"mode": "sideways"}), 42, {"mode": None}):
        assert policystate.parse(junk) is None
    assert load_state(policystate.parse("{not json"), "off").mode == "off"


def test_non_finite_numbers_are_dropped() -> None:
    state = PolicyState(mode="on", last_accept=math.nan, switch_times=[1.0, math.inf])
    record = policystate.to_status(state)
    assert record is not None and "lastAccept" not in record and record["switchTimes"] == [1.0]
    assert AutoPolicyState.model_validate(record).last_accept is None


def test_a_state_without_optional_fields_is_evaluated() -> None:
    """The advisor reads absent fields as its defaults (found on the real stack: a null
    ``bands_saved_at`` crashed ``persisted``)."""
    record = policystate.to_status(
        policystate.parse(json.dumps({"mode": "on", "switch_times": [1.0]}))
    )
    assert record is not None and "bandsSavedAt" not in record
    stored = policystate.parse(record)
    assert stored is not None and stored.bands_saved_at is None
    obs = Observation(ts=2000.0, accept_length=2.6, running=4.0, queued=0.0,
                      output_tok_s=400.0, ttft_p99_s=0.5, age_s=1.0)  # fmt: skip
    _, state, _ = evaluate(obs, stored, "on", 2000.0, AutoSpeculation(), CTX)
    assert state.mode == "on"


def test_a_json_string_state_is_migrated_with_any_other_status_write() -> None:
    legacy = json.dumps({"mode": "off", "mode_since": 3.0})
    assert policystate.migrated({"policyState": legacy}) == {
        "policyState": {**policystate.to_status(policystate.parse(legacy)), "mode": "Off"}  # type: ignore[dict-item]
    }
    assert policystate.migrated({"policyState": "{broken"}) == {"policyState": None}
    assert policystate.migrated({"policyState": {"mode": "On"}}) == {}
    assert policystate.migrated({}) == {}


def test_a_string_state_nested_thousands_deep_starts_afresh_instead_of_raising() -> None:
    # json.loads of this raised RecursionError (not ValueError), out of the whole pass.
    deep = '{"mode": "on", "bands": ' + "[" * 5000 + "]" * 5000 + "}"
    assert policystate.parse(deep) is None


def test_a_policy_that_learned_more_bands_than_the_crd_stores_keeps_the_newest() -> None:
    # The CRD bounds bands (maxProperties): a status with more would be refused on every write.
    bands = {f"{k}@2.0": {"on": {"score": 1.0, "n": 1, "at": float(k)}} for k in range(300)}
    times = [float(t) for t in range(400)]
    state = PolicyState(mode="on", bands=bands, switch_times=times)
    record = policystate.to_status(state)
    assert record is not None
    assert len(record["bands"]) == MAX_POLICY_BANDS and "299@2.0" in record["bands"]
    assert "0@2.0" not in record["bands"]
    assert record["switchTimes"] == times[-MAX_SWITCH_TIMES:]
    SpecServerStatus.model_validate({"policyState": record})  # what the CRD accepts


def test_a_blocked_switchs_back_off_round_trips_through_the_status() -> None:
    """The back-off a blocked switch left (``record_blocked``) survives an operator restart:
    the stored object parses to the same state, with the blocked mode in the status's On/Off."""
    stored = record_blocked(_learned_state(), "on", "off", 2000.0, AutoSpeculation(), CTX)
    assert stored.blocked_attempts == 1 and stored.blocked_until is not None
    record = policystate.to_status(stored)
    assert record is not None and record["blockedMode"] == "Off"
    assert record["blockedAttempts"] == 1 and record["blockedUntil"] == stored.blocked_until
    SpecServerStatus.model_validate({"policyState": record})
    again = policystate.parse(json.loads(json.dumps(record)))
    assert again == stored
    # A tenant's unreadable blocked mode drops the back-off, not the whole state.
    record["blockedMode"] = "sideways"
    hostile = policystate.parse(record)
    assert hostile is not None and hostile.blocked_mode is None and hostile.bands == stored.bands
