"""fleetsim on a GPU-starved cluster: a switch that needs a spare replica's GPUs never gets them.

BlueGreen's standby and a RollingUpdate surge pod stay Pending; the old mode serves until the
deadline (``switchcost.switch_deadline_s``), then the switch is cancelled and Auto backs off
(``autocycle.record_blocked``, what the operator stores) or, with ``blockedSwitchFallback:
Recreate``, retried as Recreate: the replica is down for a restart, then the new mode serves.
Recreate itself frees its own GPUs first and always lands. Attempts are counted per simulated
hour; goodput is compared with the mode Auto starts in kept all along.
"""

from __future__ import annotations

import pytest

from specserver_advisor.models import AutoSpeculation, BlockedSwitchFallback, SwitchStrategy
from specserver_advisor.policy.model import OFF, ON
from specserver_advisor.replay import fleetbounds, fleetsim, fleetworld
from specserver_advisor.replay.fleetworld import TICK_S, Tick, Trace

KEEPS_SERVING = [SwitchStrategy.BLUE_GREEN, SwitchStrategy.ROLLING_UPDATE]


def overload(hours: float, load: int = 40) -> Trace:
    """``hours`` of ``load`` users (past the crossover: Auto wants speculation off)."""
    return Trace(
        "overload", tuple(Tick(load, 2.7) for _ in range(int(hours * 3600 / TICK_S))), False
    )


def policy(strategy: SwitchStrategy, fallback: str = "Cancel") -> AutoSpeculation:
    return AutoSpeculation.model_validate(
        {"switchStrategy": strategy, "blockedSwitchFallback": fallback}
    )


@pytest.mark.parametrize("strategy", KEEPS_SERVING)
@pytest.mark.parametrize("nodes", [1, 4])
def test_auto_on_a_starved_cluster_backs_off_and_delivers_what_staying_on_does(
    strategy: SwitchStrategy, nodes: int
) -> None:
    trace = overload(8)
    pol = policy(strategy)
    starved = fleetsim.run_auto(trace, pol, spare_gpu=False, nodes=nodes)
    # Every switch decided waited to its deadline and was cancelled (the last one may still
    # be waiting when the trace ends): none landed, no standby ran (it never got GPUs), and
    # the old mode served throughout.
    assert starved.blocked == len(starved.blocked_at) >= 3
    assert starved.switches - starved.blocked in (0, 1)
    assert starved.landed_at == [] and starved.switch_gpu_s == 0.0 and starved.fell_back == 0
    assert starved.results == fleetworld.run_static(trace, ON, pol)
    # Backing off: the gaps between attempts grow, and from the third hour on there is at
    # most one an hour (the back-off's cap plus the attempt's deadline).
    gaps = [b - a for a, b in zip(starved.blocked_at, starved.blocked_at[1:], strict=False)]
    assert gaps == sorted(gaps) and gaps[-1] > 2 * gaps[0]
    per_hour = [
        sum(h * 3600 <= t * TICK_S < (h + 1) * 3600 for t in starved.blocked_at) for h in range(8)
    ]
    assert per_hour[0] <= 3 and all(n <= 1 for n in per_hour[2:]), per_hour
    # With spare GPUs the same policy switches once and stays: the blocked attempts are not
    # what a working cluster sees.
    fed = fleetsim.run_auto(trace, pol, nodes=nodes)
    assert fed.switches == 1 and fed.blocked == 0
    assert sum(r.good_tok_s for r in fed.results) > sum(r.good_tok_s for r in starved.results)


def test_a_blocked_attempt_teaches_the_policy_nothing_about_the_mode_it_never_ran() -> None:
    starved = fleetsim.run_auto(overload(4), policy(SwitchStrategy.BLUE_GREEN), spare_gpu=False)
    assert starved.state.bands
    assert all(OFF not in modes for modes in starved.state.bands.values())
    assert starved.state.blocked_mode == OFF and starved.state.blocked_attempts == starved.blocked


@pytest.mark.parametrize("strategy", KEEPS_SERVING)
def test_the_recreate_fallback_lands_after_the_deadline_and_a_restart(
    strategy: SwitchStrategy,
) -> None:
    trace = overload(2)
    pol = policy(strategy, "Recreate")
    run = fleetsim.run_auto(trace, pol, spare_gpu=False)
    assert run.fell_back == 1 and run.blocked == 0 and len(run.landed_at) == 1
    deadline = fleetworld.deadline_ticks(pol)
    decided = run.blocked_at[0]
    # The old mode served to the deadline, the replica was down for a restart, then Off served.
    landed = run.landed_at[0]
    assert landed == decided + deadline + fleetworld.switch_ticks()
    down = run.results[decided + deadline : landed]
    assert down and all(r.tok_s == 0 for r in down)
    off = fleetworld.run_static(trace, OFF, pol)
    assert run.results[landed:] == off[landed:]
    # Under this overload the switch pays even with the downtime, and the paid oracle (the
    # best schedule knowing the trace, a blocked switch priced as the deadline then a restart)
    # bounds it.
    on = fleetworld.run_static(trace, ON, pol)
    assert sum(r.good_tok_s for r in run.results) > sum(r.good_tok_s for r in on)
    paid, _ = fleetbounds.run_paid_oracle(trace, pol, spare_gpu=False)
    assert sum(r.good_tok_s for r in paid) >= sum(r.good_tok_s for r in run.results)


def test_the_paid_oracle_prices_a_blocked_switch_as_the_deadline_then_a_restart() -> None:
    """Starting On (the operator's start), a switch off priced as Recreate after the deadline:
    exactly the run's ticks; with spare GPUs it lands sooner, without the downtime."""
    trace = overload(2)
    pol = policy(SwitchStrategy.BLUE_GREEN, "Recreate")
    served, best, _ = fleetbounds.paid_oracle_table(trace, pol, spare_gpu=False)
    run = fleetsim.run_auto(trace, pol, spare_gpu=False)
    decided = run.blocked_at[0]
    wait, bridged = fleetbounds.switch_shape(pol, spare_gpu=False) or (0, 0)
    assert (wait, bridged) == (
        fleetworld.deadline_ticks(pol) + fleetworld.switch_ticks(),
        fleetworld.deadline_ticks(pol),
    )
    # The best from On at the first tick is at least what the run delivered from there.
    assert best[0][ON] >= sum(r.good_tok_s for r in run.results) - 1e-6
    assert decided > 0 and served
    _, fed_best, _ = fleetbounds.paid_oracle_table(trace, pol)
    assert fed_best[0][ON] > best[0][ON]


def test_recreate_needs_no_spare_gpus_and_cancel_never_switches_in_the_paid_oracle() -> None:
    trace = overload(2)
    recreate = policy(SwitchStrategy.RECREATE)
    assert fleetworld.switch_lands(SwitchStrategy.RECREATE, spare_gpu=False)
    assert fleetsim.run_auto(trace, recreate, spare_gpu=False).results == (
        fleetsim.run_auto(trace, recreate).results
    )
    for strategy in KEEPS_SERVING:
        assert not fleetworld.switch_lands(strategy, spare_gpu=False)
        _, made = fleetbounds.run_paid_oracle(trace, policy(strategy), spare_gpu=False)
        assert made == 0


def test_the_blocked_table_reports_the_attempts_and_the_fallback() -> None:
    pol = policy(SwitchStrategy.BLUE_GREEN)
    assert pol.blocked_switch_fallback == BlockedSwitchFallback.CANCEL
    rows = fleetsim.simulate(pol, spare_gpu=False)
    by_trace = {r["trace"]: r for r in rows}
    steady = by_trace["steady_40"]
    assert steady["blocked_switches"] >= 2 and steady["fell_back"] == 0
    assert steady["goodput"]["auto"] == steady["goodput"]["on"]
    assert all(r["goodput"]["auto"] >= r["goodput"]["on"] for r in rows)
    text = fleetsim.render_table(rows)
    assert "blockedSwitchFallback Cancel" in text and "blocked to the deadline" in text
