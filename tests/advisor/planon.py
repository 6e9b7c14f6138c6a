"""A plan of one of the field's model configs on a card, for the tests that compare cards and
launches (``tests/advisor/perf``): the launch's flags as ``launch_server`` takes them, one
request, no draft."""

from __future__ import annotations

from specserver_advisor.gpus import Gpu, lookup_gpu
from specserver_advisor.perf import calibration
from specserver_advisor.perf.plan import Plan, PlanInputs, make_plan
from specserver_advisor.sglang.flags import parse_server_argv


def plan_on(gpu: str | Gpu, argv: list[str], model: str) -> Plan:
    """``make_plan`` for ``model`` (a field config's name) on ``gpu`` (a name or a card)."""
    card = lookup_gpu(gpu) if isinstance(gpu, str) else gpu
    values = parse_server_argv(["--model-path", "m", *argv]).values
    config = calibration.field_config(model)
    return make_plan(PlanInputs(values, config, None, card, concurrency=[1]))


#: Where the plan's note says every all-reduce is NCCL's (``allreduceflags.nccl_note``).
NCCL_NOTE = "custom all-reduce does not run"


def nccl_notes(plan: Plan) -> list[str]:
    """The plan's notes that say its all-reduces are NCCL's."""
    return [n for n in plan.notes if NCCL_NOTE in n]
