"""``specserver-advisor replay`` on a recorded file, and the fleet simulation's targets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import DATA
from specserver_advisor import fleetsim
from specserver_advisor.cli import main

RECORDED = DATA / "observations-rise-fall.jsonl"
L4 = ["--model", "Qwen/Qwen3-8B", "--draft", "Tengyunw/qwen3_8b_eagle3", "--gpu", "L4"]


def replay_jsonl(capsys: pytest.CaptureFixture[str], *argv: str) -> list[dict[str, object]]:
    assert main(["replay", *argv, "--format", "jsonl"]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_replay_switches_off_under_load_and_back_on(capsys: pytest.CaptureFixture[str]) -> None:
    rows = replay_jsonl(capsys, "--observations", str(RECORDED), *L4)
    assert len(rows) == 80
    switches = [(r["action"], r["reason"]) for r in rows if r["action"] != "keep"]
    assert switches[0] == ("disable", "TTFTSLOBreached")
    assert switches[-1] == ("enable", "LoadBelowCrossover")
    assert {r["reason"] for r in rows[35:38]} == {"MetricsStale"}
    for row in rows:
        assert set(row) >= {"ts", "action", "reason", "mode", "thresholds"}


def test_replay_is_deterministic_and_honours_the_policy_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = replay_jsonl(capsys, "--observations", str(RECORDED), *L4)
    assert replay_jsonl(capsys, "--observations", str(RECORDED), *L4) == first
    policy = tmp_path / "policy.yaml"
    policy.write_text("dryRun: true\n")
    dry = replay_jsonl(capsys, "--observations", str(RECORDED), *L4, "--policy", str(policy))
    assert all(r["action"] == "keep" for r in dry)
    assert "DryRun" in {r["reason"] for r in dry}


def test_replay_without_a_model_uses_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    rows = replay_jsonl(capsys, "--observations", str(RECORDED))
    assert rows and all(r["reason"] != "LoadAboveCrossover" for r in rows)


def test_replay_reads_a_specserver_as_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sps = tmp_path / "sps.yaml"
    sps.write_text(
        (Path(__file__).parents[2] / "manifests/examples/qwen3-8b-eagle3-l4.yaml").read_text()
        + "  autoSpeculation: {disableAfterBreaches: 1}\n"
    )
    rows = replay_jsonl(capsys, "--observations", str(RECORDED), "--policy", str(sps))
    first_off = next(i for i, r in enumerate(rows) if r["action"] == "disable")
    assert rows[first_off - 1]["action"] == "keep"


def test_replay_bad_input_names_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "obs.jsonl"
    bad.write_text('{"ts": 1, "running": 2}\n{"running": 3}\n')
    assert main(["replay", "--observations", str(bad)]) == 2
    assert f"{bad}:2: observation has no numeric 'ts'" in capsys.readouterr().err
    policy = tmp_path / "p.yaml"
    policy.write_text("minDwellSeconds: -5\n")
    assert main(["replay", "--observations", str(RECORDED), "--policy", str(policy)]) == 2
    assert (
        f"{policy}: minDwellSeconds: Input should be greater than or equal to 0"
        in capsys.readouterr().err
    )


def test_fleetsim_meets_its_targets() -> None:
    rows = fleetsim.simulate()
    names = {r["trace"] for r in rows}
    assert {"diurnal", "bursty", "prompt_kind_step", "long_context_drift"} <= names
    for r in rows:
        assert r["adaptive_vs_oracle"] >= 0.97, r
        g = r["goodput"]
        if r["mixed"]:
            assert g["adaptive"] > g["always_on"] and g["adaptive"] > g["always_off"], r
        if r["trace"].startswith("steady_"):
            assert r["switches_per_hour"] <= 6.0, r


def test_fleetsim_json_shape(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fleetsim", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    for r in rows:
        assert set(r["goodput"]) == set(r["p99_ttft_s"]) == set(fleetsim.STRATEGIES)
        assert {"trace", "switches_per_hour", "adaptive_vs_oracle"} <= set(r)
