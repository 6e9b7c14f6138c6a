"""plan's advice never contradicts its own numbers (issue 40): the recommended
``--max-running-requests`` is the cap with the most goodput (output tok/s, scaled down where the
TTFT P99 misses the SLO) over the loads asked, among every cap up to the largest anyone would set;
or it is the largest safe cap (the KV pool, the decode graphs) and plan says why. Checked on every
example SpecServer, every calibration card's field plan and the measured Llama-3.1-8B NGRAM case."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from specserver_advisor.cli.main import main
from specserver_advisor.cli.planfrom import plan_specserver, specserver_from
from specserver_advisor.launch.model import plan_launch
from specserver_advisor.launch.multinode import as_leader
from specserver_advisor.loaders.specserver import configs_for_spec
from specserver_advisor.perf import calibration
from specserver_advisor.perf.plan import DEFAULT_CONCURRENCY, Plan, goodput, safe_cap
from stack import REPO

EXAMPLES = sorted((REPO / "manifests" / "examples").glob("*.yaml"))
CARDS = ("l4", "l4-locked", "l4-gsm8k", "gb10", "h200")


def _caps(plan: Plan, loads: list[int]) -> list[int]:
    """Every cap worth comparing: 1..max load, and beyond it to the pool in steps."""
    top = max(plan.fits_on, plan.sglang_default_mrr, max(loads), 1)
    caps = set(range(1, max(loads) + 1)) | set(range(max(loads), top + 1, 16))
    return sorted(caps | {top, plan.sglang_default_mrr})


def assert_cap_is_best_or_explained(plan: Plan, loads: list[int]) -> None:
    scn, spec = plan.scenario, plan.resolution.speculative
    chosen = plan.recommended_mrr
    mine = goodput(scn, loads, chosen, spec)
    better = [c for c in _caps(plan, loads) if goodput(scn, loads, c, spec) > mine * 1.001]
    if not better:
        return
    # a cap that scores higher is only ever above the largest safe one, and plan says why
    safe = safe_cap(plan.fits_on, plan.mem.settings.cuda_graph_max_bs)
    assert chosen == safe and min(better) > safe, (chosen, better[:5])
    assert any(f"--max-running-requests {chosen} is the largest safe cap" in n for n in plan.notes)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_each_example_plans_the_cap_with_the_most_goodput(path: Path) -> None:
    spec = specserver_from(yaml.safe_load(path.read_text()), path)
    configs = configs_for_spec(spec, dict(os.environ), None)
    planned = plan_specserver(spec, configs, None, [], None, DEFAULT_CONCURRENCY)
    assert planned.plan is not None and planned.engine is not None
    # the launch as rendered, less the cap the operator computed: what the cap was chosen on
    argv = list(planned.argv)
    if spec.engine.max_running_requests is None and "--max-running-requests" in argv:
        at = argv.index("--max-running-requests")
        del argv[at : at + 2]
    plan = plan_launch(
        spec, configs, planned.gpu, as_leader(argv, spec.resources.nodes), planned.env
    )
    assert_cap_is_best_or_explained(plan, DEFAULT_CONCURRENCY)
    if spec.engine.max_running_requests is None:
        # the operator renders the cap plan recommends: one cap, the same numbers
        assert planned.engine.max_running_requests == plan.recommended_mrr


@pytest.mark.parametrize("case", CARDS)
def test_each_calibration_card_plans_the_cap_with_the_most_goodput(case: str) -> None:
    loads = [1, 2, 4, 8, 16, 32, 64]
    assert_cap_is_best_or_explained(calibration.field_plan(case, loads), loads)


def test_the_measured_ngram_case_no_longer_caps_below_the_default(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Llama-3.1-8B NGRAM on one H100: plan said "set --max-running-requests 7" (the throughput
    crossover) while its own curves gave less throughput and a 4x TTFT P99 at 64 users."""
    argv = ["plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--algorithm", "NGRAM"]
    assert main([*argv, "--gpu", "H100"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    cap = int(first.rsplit(" ", 1)[1])
    assert first.startswith("starts; set --max-running-requests ") and cap >= 64
    assert (
        main([*argv, "--gpu", "H100", "--max-running-requests", str(cap), "--format", "json"]) == 0
    )
    at_cap = json.loads(capsys.readouterr().out)
    assert main([*argv, "--gpu", "H100", "--max-running-requests", "7", "--format", "json"]) == 0
    at_seven = json.loads(capsys.readouterr().out)
    top = {pt["concurrency"]: pt["on"] for pt in at_cap["curves"]}[64]
    low = {pt["concurrency"]: pt["on"] for pt in at_seven["curves"]}[64]
    assert top["output_tok_s"] > low["output_tok_s"]
    assert top["ttft_p99_ms"] < low["ttft_p99_ms"]
