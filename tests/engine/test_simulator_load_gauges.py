"""The simulated engine sets its load gauges when SGLang 0.5.23's scheduler metrics do.

``metrics_reporter``: ``report_prefill_stats`` after each prefill batch (``num_running_reqs``
is the running batch as it was when the prefill batch was built, ``PrefillStats.from_adder``,
which leaves out the prompts it prefills), ``report_decode_stats`` every
``--decode-log-interval`` (40) decode batches (the decode batch) and ``_maybe_log_idle_metrics``
when idle (0); the gauge holds between them. So under a synchronized closed loop (fixed lengths,
no speculation: every request of a wave finishes in the same step) the next wave's prefill
report reads 0 running while the whole wave runs, until the 40th decode batch after it. Checked
on an in-process engine on its modelled clock, the gauges read after every step.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from specserver_engine.sim.config import build_sim_config
from specserver_engine.sim.engine import SimEngine
from specserver_engine.sim.metrics import EngineMetrics

L4 = ["--model-path", "Qwen/Qwen3-8B", "--mem-fraction-static", "0.85", "--sim-gpu", "L4"]


@dataclass
class Step:
    """One step as seen after it: prefill or decode, the gauges and the engine's own counts."""

    prefill: bool
    gauge_running: float
    gauge_queued: float
    running: int
    waiting: int


def closed_loop(users: int, rounds: int, *args: str) -> tuple[list[Step], float]:
    """``users`` users of ``rounds`` requests (256+48 tokens, ignore_eos); every step, and the
    running gauge once the engine is idle again."""
    cfg = build_sim_config([*L4, *args, "--sim-startup-seconds", "0"], env={})
    metrics = EngineMetrics(cfg.served_model_name)
    engine = SimEngine(cfg, metrics, modelled_clock=True)
    steps: list[Step] = []
    labels = metrics.sched
    record = engine._update_gauges

    seen = [0.0]

    def after_step() -> None:
        record()
        if engine.clock > seen[0]:  # a step ran (idle passes do not move the clock)
            seen[0] = engine.clock
            steps.append(
                Step(
                    prefill=engine.window[-1][1] == 0 if engine.window else True,
                    gauge_running=metrics.num_running_reqs.labels(**labels)._value.get(),
                    gauge_queued=metrics.num_queue_reqs.labels(**labels)._value.get(),
                    running=len(engine.running),
                    waiting=len(engine.waiting),
                )
            )

    engine._update_gauges = after_step  # type: ignore[method-assign]

    async def user(index: int) -> None:
        for k in range(rounds):
            req = engine.submit(256, 48, True, "random", True, f"{index}-{k}")
            while not (await req.chunks.get()).finished:
                pass

    async def run() -> float:
        loop = asyncio.create_task(engine.run())
        try:
            await asyncio.gather(*(user(i) for i in range(users)))
            await asyncio.sleep(0)  # the engine loop reaches idle
            await asyncio.sleep(0)
            return float(metrics.num_running_reqs.labels(**labels)._value.get())
        finally:
            loop.cancel()

    idle = asyncio.run(run())
    return steps, idle


def test_a_waves_prefill_report_reads_zero_running_until_the_next_decode_report() -> None:
    steps, idle = closed_loop(4, 3, "--decode-log-interval", "40")
    prefills = [i for i, s in enumerate(steps) if s.prefill]
    assert len(prefills) == 3  # one prefill batch per wave: the waves stay together
    for i in prefills:
        # The whole wave runs, yet the report counts the running batch before the prefill.
        assert steps[i].running == 4 and steps[i].gauge_running == 0
    decodes = [s.gauge_running for s in steps if not s.prefill]
    # 47 decode batches a wave (48 tokens, the first from the prefill): the 40th, 80th and
    # 120th decode batches report the batch; the gauge holds until the next prefill report.
    assert len(decodes) == 3 * 47
    assert decodes[:39] == [0.0] * 39 and decodes[39:47] == [4.0] * 8
    assert decodes[47:79] == [0.0] * 32 and decodes[79:94] == [4.0] * 15
    assert decodes[94:119] == [0.0] * 25 and decodes[119:] == [4.0] * 22
    assert idle == 0


def test_the_queue_is_reported_with_the_running_count() -> None:
    # 6 users, 4 running at most: each prefill report sees 2 left queued (or 0 when the
    # last ones go in) and 0 running for the first wave.
    steps, _ = closed_loop(6, 2, "--max-running-requests", "4", "--decode-log-interval", "40")
    first = next(s for s in steps if s.prefill)
    assert (first.gauge_running, first.gauge_queued) == (0, 2) and first.running == 4
    # The 40th decode batch reports the batch and the queue behind it.
    fortieth = [s for s in steps if not s.prefill][39]
    assert (fortieth.gauge_running, fortieth.gauge_queued) == (4, 2)
