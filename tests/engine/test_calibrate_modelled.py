"""``calibrate --modelled-clock``: the in-process engine's figures are its modelled steps alone."""

from __future__ import annotations

import dataclasses
import time

from specserver_advisor.perf.constants import DEFAULT_CALIBRATION
from specserver_advisor.perf.model import step_time
from specserver_engine.sim.calibrate import L4_ARGS, measure_modelled
from specserver_engine.sim.config import build_sim_config


def test_the_figures_do_not_depend_on_the_wall_clock() -> None:
    first = measure_modelled(False, 4, "random", 1.0, 2)
    time.sleep(0.05)  # a pause between runs, as a loaded machine's would be
    second = measure_modelled(False, 4, "random", 1.0, 2)
    assert first == second
    assert first["completed"] == 8


def test_tpot_is_the_modelled_decode_step_of_the_batch() -> None:
    summary = measure_modelled(False, 8, "random", 1.0, 2)
    scn = build_sim_config([*L4_ARGS, "--sim-startup-seconds", "0"], env={}).plan.scenario
    # 8 users of 512+128 tokens decode together; the median context is about 512 + 64.
    step = step_time(
        dataclasses.replace(scn, input_len=576, output_len=0), 8, False, DEFAULT_CALIBRATION
    )
    assert 0.95 * step * 1000 < summary["median_tpot_ms"] < 1.15 * step * 1000
