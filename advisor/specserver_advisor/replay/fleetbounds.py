"""Fleet simulation's bounds: the free oracle and the paid oracle (pure).

The ``oracle`` picks the best of on, off and on_adaptive in every interval and switches for
free: an upper bound on every arm. The ``paid_oracle`` is the best schedule knowing the whole
trace when every switch costs what the SpecServer's ``switchStrategy`` makes it cost
(``fleetsim_model.keeps_serving``): under Recreate the replica is down until the new engine is
Ready, under BlueGreen the old mode serves until then. The most any switching policy can
deliver with that strategy.
"""

from __future__ import annotations

from specserver_advisor.models import AutoSpeculation, BlockedSwitchFallback
from specserver_advisor.replay.fleetworld import (
    MODES,
    TickResult,
    Trace,
    deadline_ticks,
    keeps_serving,
    serve,
    switch_lands,
    switch_seconds,
    switch_ticks,
)


def run_oracle(
    trace: Trace, policy: AutoSpeculation, gpu: str = "L4"
) -> tuple[list[TickResult], int]:
    """The best of on, off and on_adaptive in every interval, switching for free.

    An upper bound on every arm: no arm can beat the best mode of each interval, and no
    switch here costs anything.
    """
    results: list[TickResult] = []
    switches, last = 0, None
    for tick in trace.ticks:
        served = {m: serve(tick, m, 0.0, policy, gpu) for m in MODES}
        best = max(MODES, key=lambda m: served[m].good_tok_s)
        if last is not None and best != last:
            switches += 1
        results.append(served[best])
        last = best
    return results, switches


def switch_shape(
    policy: AutoSpeculation, gpu: str = "L4", spare_gpu: bool = True, nodes: int = 1
) -> tuple[int, int] | None:
    """(ticks a switch takes, of which the first ones the old mode serves), or None when no
    switch can land. A switch that lands: ``switch_ticks``, served throughout when the
    strategy keeps the old mode serving, down throughout under Recreate. A blocked one (no
    spare GPUs, ``switch_lands``) falls back to Recreate where the spec says so: the old mode
    serves until the deadline (``deadline_ticks``), then the replica is down for a restart;
    under Cancel it never lands."""
    wait = switch_ticks(gpu, nodes)
    serves = keeps_serving(policy.switch_strategy)
    if switch_lands(policy.switch_strategy, spare_gpu):
        return wait, wait if serves else 0
    if policy.blocked_switch_fallback == BlockedSwitchFallback.RECREATE:
        deadline = deadline_ticks(policy, gpu, nodes)
        return deadline + wait, deadline
    return None


def _switching(
    served: dict[str, TickResult], old: str, new: str, serving: bool, down_s: float
) -> TickResult:
    """A tick while the switch from ``old`` to ``new`` (``down_s`` seconds) is under way."""
    if serving:
        return served[old]
    return TickResult(0.0, 0.0, served[new].ttft_p99_s + down_s)  # down: Recreate


def paid_oracle_table(
    trace: Trace,
    policy: AutoSpeculation,
    gpu: str = "L4",
    spare_gpu: bool = True,
    hold: frozenset[int] = frozenset(),
    nodes: int = 1,
) -> tuple[list[dict[str, TickResult]], list[dict[str, float]], list[dict[str, str]]]:
    """The paid oracle's dynamic programme: what each mode serves per tick, and the best totals.

    ``best[i][m]``: the most goodput (summed over ticks) from tick ``i`` on with mode ``m``
    serving at tick ``i``; ``choice[i][m]``: the mode it runs next (another mode: a switch
    decided at the end of tick ``i``, taking ``switch_ticks`` ticks as in the policy arm (more
    for a replica across ``nodes`` nodes), during
    which the replica is down under Recreate and ``m`` keeps serving under BlueGreen, and no
    other switch can start). No switch is decided at the end of a tick in ``hold`` (a bound for
    schedules that cannot time a switch there), nor at all when no switch can land (no spare
    GPUs and ``blockedSwitchFallback: Cancel``: the mode never changes). A blocked switch that
    falls back to Recreate takes the deadline, the old mode serving, then a restart
    (``switch_shape``).
    """
    ticks = trace.ticks
    n = len(ticks)
    shape = switch_shape(policy, gpu, spare_gpu, nodes)
    wait, bridged = shape or (switch_ticks(gpu, nodes), 0)
    if shape is None:
        hold = frozenset(range(n))
    served = [{m: serve(t, m, 0.0, policy, gpu) for m in MODES} for t in ticks]
    best: list[dict[str, float]] = [dict.fromkeys(MODES, 0.0) for _ in range(n + 1)]
    choice: list[dict[str, str]] = [dict.fromkeys(MODES, "") for _ in range(n)]
    for i in range(n - 1, -1, -1):
        end = min(n, i + 1 + wait)
        for m in MODES:
            options = {m: best[i + 1][m]}
            bridge = sum(served[j][m].good_tok_s for j in range(i + 1, min(end, i + 1 + bridged)))
            for other in MODES:
                if other != m and i not in hold:
                    options[other] = bridge + best[end][other]
            nxt = m  # a switch only for more goodput (not for a rounding-level tie)
            for k, total in options.items():
                if total > options[nxt] + 1e-9 * abs(options[nxt]):
                    nxt = k
            best[i][m] = served[i][m].good_tok_s + options[nxt]
            choice[i][m] = nxt
    return served, best, choice


def run_paid_oracle(
    trace: Trace, policy: AutoSpeculation, gpu: str = "L4", spare_gpu: bool = True, nodes: int = 1
) -> tuple[list[TickResult], int]:
    """The best schedule of on, off and on_adaptive knowing the whole trace, paying each switch.

    Dynamic programming over the trace (``paid_oracle_table``) with no dwell time or switch
    budget; the first mode is free. Returns the ticks and the number of switches.
    """
    served, best, choice = paid_oracle_table(trace, policy, gpu, spare_gpu, nodes=nodes)
    wait, bridged = switch_shape(policy, gpu, spare_gpu, nodes) or (0, 0)
    down_s = switch_seconds(gpu, nodes)
    n = len(served)
    mode = max(MODES, key=lambda m: best[0][m])
    results: list[TickResult] = []
    switches = i = 0
    while i < n:
        results.append(served[i][mode])
        nxt = choice[i][mode]
        if nxt != mode:
            switches += 1
            for j in range(i + 1, min(n, i + 1 + wait)):
                serving = j < i + 1 + bridged
                results.append(_switching(served[j], mode, nxt, serving, down_s))
            i += wait
        mode = nxt
        i += 1
    return results, switches
