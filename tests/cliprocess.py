"""``specserver-advisor`` run as a child process: exit code, output, time and peak memory.

Shared by the input-limit regression tests (tests/advisor/test_input_limits.py,
test_config_values.py): a traceback, a hang or gigabytes only show in a real process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Run:
    rc: int
    out: str
    err: str
    seconds: float
    max_rss_mib: float


def advisor(cwd: Path, *argv: str, stdin: bytes = b"", timeout: float = 60) -> Run:
    """``specserver-advisor ARGV`` as a child process, with its time and peak memory (wait4)."""
    with tempfile.TemporaryDirectory() as io_dir:
        io = Path(io_dir)
        (io / "in").write_bytes(stdin)
        with (
            (io / "in").open("rb") as i,
            (io / "out").open("wb") as o,
            (io / "err").open("wb") as e,
        ):
            started = time.monotonic()
            proc = subprocess.Popen(
                [sys.executable, "-m", "specserver_advisor.cli", *argv],
                cwd=cwd,
                stdin=i,
                stdout=o,
                stderr=e,
                env={**os.environ, "HF_HUB_CACHE": str(cwd / "no-cache"), "HF_ENDPOINT": ""},
            )
            timer = threading.Timer(timeout, proc.kill)
            timer.start()
            try:
                _, status, usage = os.wait4(proc.pid, 0)
            finally:
                timer.cancel()
            proc.returncode = os.waitstatus_to_exitcode(status)
        return Run(
            proc.returncode,
            (io / "out").read_text(errors="replace"),
            (io / "err").read_text(errors="replace"),
            time.monotonic() - started,
            usage.ru_maxrss / 1024,
        )


def clean_refusal(run: Run, *names: str) -> str:
    """The run exited 2 with no traceback and names every one of ``names``; its output."""
    text = run.out + run.err
    assert run.rc == 2, text
    assert "Traceback" not in text, text
    for name in names:
        assert name in text, (name, text)
    return text
