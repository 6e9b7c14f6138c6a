"""Auto under a GPU-starved cluster does not flap, end to end on the real scheduler (issue 43,
Done when; the harness: scarcity.py).

Load that keeps breaching the TTFT objective asks for a switch every evaluation (scarcity's
forced switch; ``minDwellSeconds`` 0 and a large hourly budget, so nothing but the scarcity
handling holds a retry), and the one 1-GPU node never has room for the BlueGreen standby. Each
attempt is cancelled at its deadline (``SwitchBlocked``), and Auto backs off before the next:
the deadline after the first, twice it after the second (``autocycle.backoff_s``). The test
sees two attempts, the stored back-off after each, the wait between them at least the first
back-off, the third after the doubled one (the interval between attempts grows;
``SwitchBackoff`` kept meanwhile), and no request failing throughout: the
old engine serves all along, which is what staying in the current mode would give (fleetsim
prices goodput under the same rule: tests/advisor/policy).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from scarcity import (
    NAME,
    USERS,
    Clients,
    Stack,
    Timer,
    apply,
    forced_spec,
    ledger,
    parse_time,
    scarce_stacks,
    serving,
    status,
    unschedulable,
)

from stack import KubeHandle, wait_for

pytestmark = pytest.mark.cluster

DEADLINE_S = 30
STANDBY = f"{NAME}-off"


@pytest.fixture
def scarce(
    kube: KubeHandle, prom: Any, tmp_path: Path, namespace: str
) -> Iterator[Callable[..., Stack]]:
    yield from scarce_stacks(kube, prom, tmp_path, namespace)


def backoff(kube: KubeHandle, namespace: str) -> tuple[float, int]:
    """(blockedUntil, blockedAttempts) of the stored policy state."""
    state = status(kube, namespace).get("policyState") or {}
    return float(state.get("blockedUntil") or 0), int(state.get("blockedAttempts") or 0)


def test_e_auto_on_a_starved_cluster_backs_off_instead_of_flapping(
    kube: KubeHandle, namespace: str, scarce: Callable[..., Stack]
) -> None:
    timer = Timer("back-off")
    stack = scarce(nodes=1, gpus=1)
    apply(kube, namespace, forced_spec(switchTimeoutSeconds=DEADLINE_S))
    wait_for(lambda: stack.endpoint(namespace), 120, "the engine Ready")
    clients = Clients(stack, namespace)  # type: ignore[arg-type]
    reasons: set[str] = set()

    def entries(reason: str) -> list[dict[str, Any]]:
        st = status(kube, namespace)
        reasons.add(str(st.get("lastDecisionReason")))
        return [d for d in st.get("decisions") or [] if d["reason"] == reason]

    def disables() -> list[float]:
        """When each attempt (a decision to switch speculation off) was made."""
        return [parse_time(d["time"]) for d in entries("TTFTSLOBreached")]

    try:
        clients.users(USERS, "chat")
        # The first attempt: its standby Pending with the scheduler's condition (the system
        # acted), then cancelled at the deadline.
        wait_for(lambda: unschedulable(kube, namespace, STANDBY), 180, "the standby Unschedulable")
        (first,) = wait_for(lambda: entries("SwitchBlocked"), DEADLINE_S + 90, "the first block")
        timer.mark("first blocked")
        until1, attempts1 = backoff(kube, namespace)
        assert attempts1 == 1 and 0 <= until1 - parse_time(first["time"]) - DEADLINE_S < 1, (
            until1,
            attempts1,
        )
        # Held while it backs off, then tried again, blocked again: the back-off doubles.
        second = wait_for(
            lambda: (found := entries("SwitchBlocked"))[1:] and found[1],
            4 * DEADLINE_S + 120,
            "the second block",
        )
        timer.mark("second blocked")
        until2, attempts2 = backoff(kube, namespace)
        assert attempts2 == 2 and 0 <= until2 - parse_time(second["time"]) - 2 * DEADLINE_S < 1, (
            until2,
            attempts2,
        )
        tries = disables()
        assert len(tries) == 2, ledger(kube, namespace)
        # The second attempt waited out the first back-off (no retry every cycle).
        assert tries[1] >= math.floor(until1), (tries, until1)
        assert "SwitchBackoff" in reasons, reasons
        # The third attempt waits out the doubled back-off: the interval between attempts grows.
        third = wait_for(
            lambda: (found := disables())[2:] and found[2],
            4 * DEADLINE_S + 120,
            "the third attempt",
        )
        timer.mark("third attempt")
        tries.append(third)
        assert tries[2] >= math.floor(until2), (tries, until2)
        assert tries[2] - tries[1] > tries[1] - tries[0], tries
        assert len(entries("SwitchBlocked")) == 2  # the third is under way, not yet blocked
    finally:
        clients.stop()
    assert serving(kube, namespace) == "on"  # the Service never left the old engine
    assert clients.failed == [] and clients.no_endpoint == [], clients.failed[:5]
    print(f"{len(clients.ok)} requests served, 0 failed; attempts at {tries}")
    timer.report()
