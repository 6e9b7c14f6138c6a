"""The README's main command, run the way a newcomer runs it, and its fail-fast watchdog.

``scripts/demo`` runs in a temporary copy of this checkout (tracked and untracked, non-ignored
files: what a fresh clone would hold plus uncommitted work) with no virtualenv, so it must
install everything it needs itself: the test suite's ``.venv`` cannot make it pass. Load rises
(speculation switched off with a load reason) and falls (switched back on), with BlueGreen
switches that fail no client request. Takes about five minutes.

The second test gives the demo a node agent that cannot start (its ``kubernetes`` import fails,
the original fresh-clone bug) and asserts the demo stops at once with the agent's own error.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stack import REPO, TEST_BASE_PORT

#: No control-plane fixture, but the demo starts its own control plane and Prometheus.
pytestmark = pytest.mark.cluster

LOAD_REASONS = {"TTFTSLOBreached", "QueueBuilding", "LoadAboveCrossover", "OtherModeFasterHere"}
#: Demo ports inside the test's own range, so a demo a developer runs by hand cannot collide
#: (its control plane takes +50..+54: the apiserver, etcd, LWS's webhook and probe).
DEMO_PORTS = f"{TEST_BASE_PORT + 50},{TEST_BASE_PORT + 55},{TEST_BASE_PORT + 56}"


def copy_checkout(dest: Path) -> Path:
    """Copy what a clone would hold (plus uncommitted, non-ignored files) to ``dest``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, listed):
        src = REPO / name.decode()
        if src.is_file():
            target = dest / name.decode()
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
    return dest


def newcomer_env() -> dict[str, str]:
    """The environment without any trace of the test suite's virtualenv."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    venv_bin = str(REPO / ".venv" / "bin")
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if p != venv_bin)
    return env


def test_demo_from_a_fresh_copy_switches_both_ways(tmp_path: Path) -> None:
    checkout = copy_checkout(tmp_path / "clone")
    assert not (checkout / ".venv").exists()
    summary_file = tmp_path / "summary.json"
    state = tmp_path / "state"
    done = subprocess.run(
        [
            "bash",
            str(checkout / "scripts" / "demo"),
            "--summary-json",
            str(summary_file),
            "--state-dir",
            str(state),
            "--ports",
            DEMO_PORTS,
        ],
        cwd=checkout,
        env=newcomer_env(),
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # It ran from its own virtualenv, not the suite's.
    assert (checkout / ".venv" / "bin" / "python").exists()
    summary = json.loads(summary_file.read_text())
    assert set(summary) >= {"switches", "time_in_mode", "decisions", "goodput"}
    assert set(summary["goodput"]) >= {"adaptive", "always_on", "always_off"}
    # All three measured: the static arms ran beside Auto under the same load and served.
    assert all(isinstance(v, float) and v > 0 for v in summary["goodput"].values()), summary
    assert "measured side by side under the same load" in done.stdout
    decisions = summary["decisions"]
    assert summary["switches"] >= 2
    first_off = next(d for d in decisions if d["action"] == "disable")
    assert first_off["reason"] in LOAD_REASONS
    later_on = [d for d in decisions[decisions.index(first_off) :] if d["action"] == "enable"]
    # OverloadEnded: the load fell below the crossover within the dwell (BlueGreen, no downtime).
    assert later_on and later_on[0]["reason"] in (
        "LoadBelowCrossover",
        "OtherModeFasterHere",
        "OverloadEnded",
    )
    assert summary["time_in_mode"]["on"] > 0 and summary["time_in_mode"]["off"] > 0
    # BlueGreen: the Service moves only to a Ready engine and the old one drains first.
    assert summary["switch_strategy"] == "BlueGreen"
    assert summary["client_errors_during_switches"] == 0
    assert "disable -> speculation Off" in done.stdout and "== summary" in done.stdout
    assert "client requests that failed during switches (BlueGreen): 0" in done.stdout
    # Everything it started is stopped.
    leftover = subprocess.run(["pgrep", "-f", str(state)], capture_output=True)
    assert leftover.stdout == b""


def test_demo_stops_at_once_with_the_node_agents_error(tmp_path: Path) -> None:
    # The agent's import of the official client fails exactly as on a venv without it; the
    # operator blocks that import on purpose, so only the agent is affected.
    shadow = tmp_path / "shadow" / "kubernetes"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'kubernetes'\", name='kubernetes')\n"
    )
    state = tmp_path / "state"
    env = dict(os.environ, PYTHONPATH=str(shadow.parent))
    lines: list[str] = []
    cluster_up_at = None
    with subprocess.Popen(
        [
            sys.executable,
            "-W",
            "ignore",
            str(REPO / "scripts" / "demo.py"),
            "--state-dir",
            str(state),
            "--ports",
            DEMO_PORTS,
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as demo:
        assert demo.stdout is not None
        for line in demo.stdout:
            lines.append(line)
            if cluster_up_at is None and "devcluster: up:" in line:
                cluster_up_at = time.monotonic()
        code = demo.wait(timeout=300)
    exited_at = time.monotonic()
    output = "".join(lines)
    assert code == 1, output[-3000:]
    assert "demo failed: the node agent exited with code 1" in output
    assert "No module named 'kubernetes'" in output
    assert "agent.log" in output
    # Fails fast once the stack is up: not the 180 s engine-readiness timeout it used to wait out.
    assert cluster_up_at is not None, output[-3000:]
    assert exited_at - cluster_up_at < 60, exited_at - cluster_up_at
    assert "== load" not in output
    leftover = subprocess.run(["pgrep", "-f", str(state)], capture_output=True)
    assert leftover.stdout == b""
