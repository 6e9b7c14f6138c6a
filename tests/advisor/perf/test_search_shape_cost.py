"""``plan --search-shape``'s cost in counted forwards (issue 42: under 2 s for 128 loads).

The search plans every candidate shape of a launch at every load. What does not depend on the
shape is predicted once: speculation off (the same curve for every shape) once per load, not
once per shape and load, and the crossover is read off the curves' own predictions, not
predicted again. A speculative step of a chain shape costs three forwards (the draft's steps
priced as one forward each time, its extend, the verify); adaptive shapes a few more. The
closed loop around a step is worked out once per shape and running batch (every load at or
above a cap runs the cap's batch and differs only in its queue), and the cap recommendation,
which scores every candidate cap at every load, runs for the launch as given and for the
choice only, not for every shape searched. The wall time is a committed benchmark
(``scripts/bench-search-shape``, docs/advisor.md).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from specserver_advisor.cli.main import main
from specserver_advisor.perf import model
from specserver_advisor.perf import plan as perf_plan
from specserver_advisor.perf.autocontext import PLANNED_LOADS

DEEPSEEK = [
    "--model", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--gpus", "8", "--algorithm",
    "NEXTN", "--steps", "1", "--topk", "1", "--draft-tokens", "2", "--accept-length", "1.87",
]  # fmt: skip
LOADS = list(range(1, 129))


def test_a_search_of_128_loads_predicts_speculation_off_once_per_load(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls: Counter[str] = Counter()
    forward, loop, score = model.forward_time, model._loop, perf_plan.score

    def counted(*args: Any, **kwargs: Any) -> float:
        speculative = kwargs.get("speculative", args[8] if len(args) > 8 else False)
        calls["on" if speculative else "off"] += 1
        return forward(*args, **kwargs)

    def counted_loop(*args: Any) -> Any:
        calls["closed loop"] += 1
        return loop(*args)

    def counted_score(*args: Any) -> float:
        calls["cap score"] += 1
        return score(*args)

    monkeypatch.setattr(model, "forward_time", counted)
    monkeypatch.setattr(model, "_loop", counted_loop)
    monkeypatch.setattr(perf_plan, "score", counted_score)
    concurrency = ",".join(map(str, LOADS))
    main(["plan", *DEEPSEEK, "--search-shape", "--concurrency", concurrency, "--format", "json"])
    found = json.loads(capsys.readouterr().out)["search"]
    loads = len({*LOADS, *PLANNED_LOADS})
    plans = found["tried"]
    assert found["accepted"] > 100 and found["crossover_loads_to"] == max(PLANNED_LOADS)
    # Off: one forward per load (cached across shapes), plus each plan's one step for its
    # notes (perf.unmodelled). Planned per shape it was 2 x plans x loads (curve + crossover).
    assert calls["off"] <= loads + plans + 1, calls
    # On: about 3 forwards per shape and load; predicting the crossover again doubled it.
    assert calls["on"] <= 3.5 * plans * loads, (calls, plans, loads)
    # One closed loop per shape and running batch (and per load off), not per load and cap:
    # scored per load and cap it was ~2.4 million here.
    assert calls["closed loop"] <= (plans + 1) * loads, (calls, plans, loads)
    # And about three forwards for each speculative step a closed loop prices.
    assert calls["on"] <= 3.5 * calls["closed loop"], calls
    # The cap recommendation (each candidate cap, at most the loads and 4 more, at each load)
    # twice: the launch as given and the choice.
    assert calls["cap score"] <= 2 * loads * (loads + 4), (calls, plans, loads)
