"""The operator announces a computed ``--mem-fraction-static`` once, by an event (the advisor's
computation itself: tests/advisor/sglang/test_memfraction.py)."""

from __future__ import annotations

import copy

from operatorfakes import SPEC, FakeClient

from specserver_advisor.sglang.memfraction import CEILING
from specserver_operator.reconcile import controller


def test_the_computed_fraction_is_announced_once_by_an_event() -> None:
    client = FakeClient()
    body = copy.deepcopy(SPEC)
    body["metadata"]["uid"] = "u-mfs"
    body["spec"]["mode"] = "Enabled"
    body["spec"]["engine"] = {"maxRunningRequests": 16}

    def reconcile(now: float) -> list[tuple[str, str, str]]:
        body["status"] = copy.deepcopy(client.status)
        out = controller.reconcile(client, body, "2026-01-01T00:00:00Z", now_ts=now)  # type: ignore[arg-type]
        return out.events

    first = [(t, m) for t, r, m in reconcile(1000.0) if r == "MemFractionComputed"]
    assert len(first) == 1 and first[0][0] == "Normal" and "0.701" in first[0][1]
    assert client.status["memFractionStaticSource"] == "Computed"
    assert 0.701 < client.status["memFractionStatic"] <= CEILING
    assert (
        "--mem-fraction-static"
        in client.deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    )  # type: ignore[index]
    assert not [r for _, r, _ in reconcile(1005.0) if r == "MemFractionComputed"]
