"""Status written by anyone but the operator changes nothing (issue 25, finding 7): a forged
``status.switch`` restarts no engine, a forged ``status.policyState`` resets no switch budget or
dwell; both are written back (ownstatus.py). On test_autopilot's fake of our client seam."""

from __future__ import annotations

import copy

from operatorfakes import STEADY, FakeClient, Signals, cycle, mode

from specserver_operator.core import ownstatus

FORGED_SWITCH = {
    "target": "Off",
    "previous": "On",
    "startedAt": "2026-01-01T00:16:45Z",
    "reason": "Forged",
}


def test_a_forged_switch_restarts_nothing_and_is_written_back() -> None:
    client = FakeClient()
    cycle(client, Signals(**STEADY), 1000)
    assert mode(client) == "on" and "switch" not in client.status
    engine = copy.deepcopy(client.deployment)
    client.status["switch"] = dict(FORGED_SWITCH)  # a tenant's status write
    out = cycle(client, Signals(**STEADY), 1006)
    assert client.deployment == engine  # not rendered Off, not touched
    assert "switch" not in client.status
    restored = [(t, m) for t, r, m in out.events if r == ownstatus.REASON]
    assert restored and restored[0][0] == "Warning" and "status.switch" in restored[0][1]
    for t in (1012, 1018):  # and it stays that way
        cycle(client, Signals(**STEADY), t)
    assert client.deployment == engine and "switch" not in client.status


def test_a_forged_policy_state_resets_no_budget_or_dwell() -> None:
    client = FakeClient()
    cycle(client, Signals(**STEADY), 1000)
    genuine = copy.deepcopy(client.status["policyState"])
    engine = copy.deepcopy(client.deployment)
    forged = copy.deepcopy(genuine)
    forged.update(mode="Off", modeSince=0.0, switchTimes=[])
    client.status["policyState"] = forged
    cycle(client, Signals(**STEADY), 1006)
    assert client.deployment == engine  # Auto did not follow the forged mode
    state = client.status["policyState"]
    assert state["mode"] == "On" and state.get("modeSince") == genuine.get("modeSince")
    assert state.get("switchTimes") == genuine.get("switchTimes")


def test_the_record_follows_the_operators_own_writes() -> None:
    record = ownstatus.guarded({"switch": None, "policyState": {"mode": "On", "a": 1}})
    after = ownstatus.after_write(record, {"policyState": {"a": None, "b": 2}}, None)
    assert after == {"switch": None, "policyState": {"mode": "On", "b": 2}}
    answer = {"status": {"policyState": {"mode": "Off"}, "switch": {"target": "On"}}}
    assert ownstatus.after_write(record, {}, answer) == answer["status"]
    assert ownstatus.trusted({"switch": {"target": "Off"}}, None) == (
        {"switch": {"target": "Off"}},
        {},
    )
    status, restore = ownstatus.trusted({"switch": {"target": "Off"}, "x": 1}, record)
    assert status == {"policyState": {"mode": "On", "a": 1}, "x": 1}
    assert restore == {"switch": None, "policyState": {"mode": "On", "a": 1}}


def test_the_record_shares_the_stored_values_it_equals() -> None:
    """One copy per SpecServer in memory, not two (the cache's and the record's)."""
    stored = {"policyState": {"mode": "On", "switchTimes": [1.0]}, "switch": None}
    record = ownstatus.seen(None, stored)
    assert record["policyState"] is stored["policyState"]
    again = {"policyState": {"mode": "On", "switchTimes": [1.0]}}  # the next watch event
    record = ownstatus.seen(record, again)
    assert record["policyState"] is again["policyState"]
    forged = {"policyState": {"mode": "Off"}}
    assert ownstatus.seen(record, forged)["policyState"] is again["policyState"]
