"""The calibration keeps every field figure within the issue's errors, and the docs show the fit."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from specserver_advisor.perf import calibration

DOCS = Path(__file__).resolve().parents[3] / "docs" / "advisor.md"

#: model/field of every figure when issue 19 set its bound ("within the errors shown today or
#: better"; docs/advisor.md at the start of wave 2). A model change may move a figure towards
#: the field, never further from it.
BASELINE = {
    "L4 KV pool, target alone (tokens)": 0.96,
    "L4 KV pool with EAGLE-3 draft (tokens; field 8,827-9,951)": 0.97,
    "L4 output throughput ratio on/off, c=1": 0.93,
    "L4 output throughput ratio on/off, c=32": 0.93,
    "L4 median TTFT c=32 on (ms)": 1.19,
    "L4 median TTFT c=32 off (ms)": 0.76,
    "L4@900MHz TPOT c=8 off (ms)": 0.99,
    "L4@900MHz TPOT c=8 on (ms; field 33.8-39.4)": 0.86,
    "L4@900MHz output tok/s c=32 off": 0.85,
    "L4@900MHz output tok/s c=32 on": 0.84,
    "L4@900MHz GSM8K-like (120/120) tok/s ratio on/off, c=32": 0.90,
    "GB10 TPOT gain off/on, c=1": 0.98,
    "GB10 TPOT gain off/on, c=32": 1.16,
    "GB10 TPOT gain off/on, c=64": 1.29,
    "GB10 output tok/s c=64 on (48 cap)": 1.19,
    "GB10 output tok/s c=64 off": 0.90,
    "GB10 median TTFT c=64 on (ms; 16 queued)": 1.19,
    # Issue 28's blind check on the published H200 case (not fitted; vLLM): bounded from here.
    # It moved from 0.71/0.42 when each TP rank's sharded small kernels stopped paying the
    # whole layer's work (docs/advisor.md, per-layer fixed cost and tensor parallelism).
    "H200 x2 Qwen3-32B TPOT c=1 off (ms; vLLM, TP 2 assumed)": 0.665,
    "H200 x2 Qwen3-32B TPOT c=1 on (ms; vLLM, prior acceptance)": 0.40,
}


def test_every_field_figure_within_the_issues_error_or_better() -> None:
    values = calibration.evaluate()
    assert {t.label for t, _ in values} == set(BASELINE)
    for target, value in values:
        error = abs(math.log(value / target.field_value))
        # The baseline ratios are rounded to two decimals: allow that rounding, no more.
        allowed = abs(math.log(BASELINE[target.label])) + 0.006
        assert error <= allowed, (target.label, value / target.field_value)


def test_docs_show_the_fit_the_calibrate_command_prints() -> None:
    text = DOCS.read_text()
    for line in calibration.report().splitlines():
        if line.startswith("| ") and not line.startswith("| figure"):
            assert line in text, f"docs/advisor.md lacks `specserver-advisor calibrate`'s {line}"


def test_fit_on_one_card_scores_only_that_cards_figures() -> None:
    cal = calibration.DEFAULT_CALIBRATION
    gb10 = [(t, v) for t, v in calibration.evaluate(cal) if t.case == "gb10" and t.fitted]
    by_hand = sum(t.weight * math.log(v / t.field_value) ** 2 for t, v in gb10)
    assert calibration.loss(cal, cards=("gb10",)) == by_hand / sum(t.weight for t, _ in gb10)
    # Fitted on the L4 alone, the constants only dense figures see move (the committed joint
    # fit is a compromise with the GB10, so the L4's own loss falls); the MoE ones cannot.
    l4 = calibration.fit(cal, rounds=1, cards=("l4",))
    assert calibration.loss(l4, cards=("l4",)) < calibration.loss(cal, cards=("l4",))
    assert l4.launch_s_per_moe_layer == cal.launch_s_per_moe_layer
    assert l4.moe_routing_independence == cal.moe_routing_independence


def test_cards_without_fit_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    from specserver_advisor.cli.main import main

    assert main(["calibrate", "--cards", "l4"]) == 2
    assert "--cards selects the figures of a fit: add --fit" in capsys.readouterr().err
