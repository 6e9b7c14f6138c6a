"""The product's headline, end to end: ``scripts/demo`` on the real control plane + Prometheus.

Load rises (speculation switched off with a load reason) and falls (switched back on), with
BlueGreen switches that fail no client request; the summary JSON has the documented keys.
Takes about four minutes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import REPO

LOAD_REASONS = {"TTFTSLOBreached", "QueueBuilding", "LoadAboveCrossover", "OtherModeFasterHere"}


def test_demo_switches_off_under_load_and_back_on(tmp_path: Path) -> None:
    summary_file = tmp_path / "summary.json"
    done = subprocess.run(
        [
            sys.executable,
            "-W",
            "ignore",
            str(REPO / "scripts" / "demo.py"),
            "--summary-json",
            str(summary_file),
            "--state-dir",
            str(tmp_path / "state"),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads(summary_file.read_text())
    assert set(summary) >= {"switches", "time_in_mode", "decisions", "goodput"}
    assert set(summary["goodput"]) >= {"adaptive", "always_on", "always_off"}
    decisions = summary["decisions"]
    assert summary["switches"] >= 2
    first_off = next(d for d in decisions if d["action"] == "disable")
    assert first_off["reason"] in LOAD_REASONS
    later_on = [d for d in decisions[decisions.index(first_off) :] if d["action"] == "enable"]
    assert later_on and later_on[0]["reason"] in ("LoadBelowCrossover", "OtherModeFasterHere")
    assert summary["time_in_mode"]["on"] > 0 and summary["time_in_mode"]["off"] > 0
    # BlueGreen: the Service moves only to a Ready engine and the old one drains first.
    assert summary["switch_strategy"] == "BlueGreen"
    assert summary["client_errors_during_switches"] == 0
    assert "disable -> speculation Off" in done.stdout and "== summary" in done.stdout
    # Everything it started is stopped.
    leftover = subprocess.run(["pgrep", "-f", str(tmp_path / "state")], capture_output=True)
    assert leftover.stdout == b""
