"""The price of a multi-node restart (issue 27): a LeaderWorkerSet group restarts slower than
one pod with the same weights per node (its slowest pod, then the cross-node rendezvous), the
policy confirms an overload for longer before it pays that restart, and fleetsim charges it.
Driven through ``autocycle.evaluate`` (the operator's call) with the context the performance
model gives the plan (``perf.plan.policy_context``)."""

from __future__ import annotations

import pytest

from specserver_advisor.gpus import lookup_gpu
from specserver_advisor.loaders.configs import bundled
from specserver_advisor.models import AutoSpeculation, SwitchStrategy
from specserver_advisor.perf.plan import PlanInputs, make_plan, policy_context
from specserver_advisor.policy import switchcost
from specserver_advisor.policy.autocycle import evaluate
from specserver_advisor.policy.model import ON, Observation, PolicyContext, PolicyState
from specserver_advisor.replay import fleetsim, fleetworld
from specserver_advisor.sglang.flags import parse_server_argv

GB = 1e9


def test_a_group_is_ready_only_when_its_slowest_pod_is_and_after_its_rendezvous() -> None:
    for weights in (16 * GB, 340 * GB):
        one = switchcost.restart_seconds(weights)
        two = switchcost.restart_seconds(weights, 2)
        four = switchcost.restart_seconds(weights, 4)
        assert one < two < four  # the same bytes per node, read in parallel: still slower
        assert two - one > switchcost.RENDEZVOUS_S  # the rendezvous, and the slowest pod
        assert switchcost.group_restart_extra_s(weights, 1) == 0.0
        assert switchcost.group_restart_extra_s(weights, 2) == pytest.approx(two - one)
    # Each node reads its own share: a node's bytes, not the model's, set the load time.
    assert switchcost.restart_seconds(340 * GB, 2) < switchcost.restart_seconds(680 * GB, 1)


def _deepseek_context(gpus: int, nodes: int) -> PolicyContext:
    target = bundled("deepseek-ai/DeepSeek-V3")
    assert target is not None
    argv = ["--model-path", "deepseek-ai/DeepSeek-V3", "--tp-size", str(gpus)]
    argv += ["--speculative-algorithm", "NEXTN", "--max-running-requests", "32"]
    if nodes > 1:
        argv += ["--nnodes", str(nodes)]
    plan = make_plan(
        PlanInputs(
            parse_server_argv(argv).values,
            target.config,
            None,
            lookup_gpu("H200"),
            concurrency=[1, 8, 32],
        )
    )
    return policy_context(plan, AutoSpeculation())


def test_the_plan_gives_a_two_node_group_a_longer_restart_than_one_node() -> None:
    # DeepSeek-V3 on 16 H200 (tp 16): one node of 16, or two of 8 (the same weights per GPU).
    one = _deepseek_context(16, 1)
    two = _deepseek_context(16, 2)
    assert one.restart_extra_s == 0.0
    assert two.restart_extra_s > switchcost.RENDEZVOUS_S


def _overload() -> Observation:
    return Observation(
        ts=0.0,
        accept_length=2.7,
        ttft_p99_s=20.0,
        running=16,
        queued=24,
        output_tok_s=300.0,
        age_s=5.0,
    )


def _breaches_until_off(ctx: PolicyContext, policy: AutoSpeculation) -> int:
    stored: PolicyState | None = None
    now = 0.0
    for n in range(1, 60):
        now += policy.evaluation_interval_seconds
        decision, _, stored = evaluate(_overload(), stored, ON, now, policy, ctx)
        if decision.action == "disable":
            return n
    raise AssertionError("never switched off")


@pytest.mark.parametrize("strategy", list(SwitchStrategy))
def test_the_policy_waits_out_an_overload_as_long_as_the_groups_longer_restart(
    strategy: SwitchStrategy,
) -> None:
    policy = AutoSpeculation.model_validate({"switchStrategy": strategy})
    base = PolicyContext([(1.0, 16.0), (4.0, 16.0)], break_even_accept=1.3, prior_accept=2.7)
    group = PolicyContext(
        [(1.0, 16.0), (4.0, 16.0)], break_even_accept=1.3, prior_accept=2.7, restart_extra_s=70
    )
    one, two = _breaches_until_off(base, policy), _breaches_until_off(group, policy)
    keeps = strategy != SwitchStrategy.RECREATE
    assert one == (3 if keeps else 6)  # disableAfterBreaches (halved without downtime)
    extra = 3  # 70 s of extra restart spans 3 evaluations of 30 s
    assert two == ((6 + extra + 1) // 2 if keeps else 6 + extra)


def test_fleetsim_charges_a_two_node_restart() -> None:
    assert fleetworld.switch_seconds("L4") == fleetworld.STARTUP_S
    assert fleetworld.switch_seconds("L4", 2) > fleetworld.STARTUP_S
    assert fleetworld.switch_ticks("L4", 2) > fleetworld.SWITCH_TICKS
    trace = next(t for t in fleetworld.traces() if t.name == "diurnal")
    policy = AutoSpeculation()
    one = fleetsim.run_auto(trace, policy)
    two = fleetsim.run_auto(trace, policy, nodes=2)
    assert one.switches > 0 and two.switches > 0
    # Each Recreate switch keeps the replica down longer: less goodput for as many switches.
    down_one = sum(1 for r in one.results if r.tok_s == 0.0)
    down_two = sum(1 for r in two.results if r.tok_s == 0.0)
    assert down_two / two.switches > down_one / one.switches


def test_a_rolling_update_without_a_surge_does_not_keep_the_old_mode_serving() -> None:
    """On a LeaderWorkerSet a RollingUpdate surges only when the spec says a spare group exists
    (maxSurge 1): without it the old group goes first, so the switch budget treats it as a
    Recreate (the full breach count), and with it as BlueGreen (half)."""
    from specserver_advisor.launch.multinode import effective_policy
    from specserver_advisor.models import SpecServerSpec

    def spec(nodes: int, surge: int | None) -> SpecServerSpec:
        auto = {"switchStrategy": "RollingUpdate", "disableAfterBreaches": 6}
        if surge is not None:
            auto["maxSurge"] = surge
        return SpecServerSpec.model_validate(
            {
                "model": {"path": "deepseek-ai/DeepSeek-V3"},
                "speculative": {"algorithm": "NEXTN"},
                "resources": {"gpuType": "H100", "gpus": 8 * nodes, "nodes": nodes},
                "autoSpeculation": auto,
            }
        )

    state = PolicyState(mode=ON)
    needed = {
        (nodes, surge): switchcost.breaches_needed(effective_policy(spec(nodes, surge)), state)
        for nodes, surge in ((1, None), (2, None), (2, 1), (1, 0))
    }
    assert needed[(1, None)] == needed[(2, 1)] == 3  # a surge keeps the old mode serving
    assert needed[(2, None)] == needed[(1, 0)] == 6  # none: the old engine stops first
