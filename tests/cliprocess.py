"""``specserver-advisor`` run as a child process: exit code, output, CPU time and peak memory.

Shared by the input-limit regression tests (tests/advisor/cli/test_input_limits.py,
test_config_values.py): a traceback, a hang or gigabytes only show in a real process.
"""

from __future__ import annotations

import contextlib
import os
import signal
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
    #: CPU seconds (user + system) the CLI spent: the verdict, the same on a busy machine.
    seconds: float
    max_rss_mib: float
    #: wall seconds, for the report only (the timeout is the backstop against hangs).
    wall_seconds: float = 0.0


#: Runs argv[1:] as its own child and writes that child's peak RSS (KiB) and CPU seconds to the
#: file named by SPECSERVER_MAXRSS_FILE: Linux
#: carries the peak RSS of the process that forks into its child's ``ru_maxrss`` (across exec),
#: so a child forked straight from a large pytest process reports pytest's size, not its own.
_MEASURE = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
with open(os.environ["SPECSERVER_MAXRSS_FILE"], "w") as f:
    f.write(f"{usage.ru_maxrss} {usage.ru_utime + usage.ru_stime}")
sys.exit(os.waitstatus_to_exitcode(status))
"""


CLI = "specserver_advisor.cli.main"


def advisor(cwd: Path, *argv: str, stdin: bytes = b"", timeout: float = 60) -> Run:
    """``specserver-advisor ARGV`` as a child process, with its time and peak memory (wait4 in
    a small parent of its own, ``_MEASURE``)."""
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
                [sys.executable, "-c", _MEASURE, sys.executable, "-m", CLI, *argv],
                cwd=cwd,
                stdin=i,
                stdout=o,
                stderr=e,
                env={
                    **os.environ,
                    "HF_HUB_CACHE": str(cwd / "no-cache"),
                    "HF_ENDPOINT": "",
                    "SPECSERVER_MAXRSS_FILE": str(io / "maxrss"),
                },
                start_new_session=True,  # the timer kills the wrapper and the CLI together
            )
            timer = threading.Timer(timeout, _kill_group, (proc.pid,))
            timer.start()
            try:
                _, status = os.waitpid(proc.pid, 0)
            finally:
                timer.cancel()
            proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - started
        peak_kib, cpu = _usage(io / "maxrss", wall)
        return Run(
            proc.returncode,
            (io / "out").read_text(errors="replace"),
            (io / "err").read_text(errors="replace"),
            cpu,
            peak_kib / 1024,
            wall,
        )


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def _usage(path: Path, wall: float) -> tuple[float, float]:
    """The measured child's peak RSS (KiB) and CPU seconds; infinite RSS and the wall time when
    the wrapper was killed (a hang, at the timeout) before writing them."""
    try:
        rss, cpu = path.read_text().split()
        return float(rss), float(cpu)
    except (OSError, ValueError):
        return float("inf"), wall


def clean_refusal(run: Run, *names: str) -> str:
    """The run exited 2 with no traceback and names every one of ``names``; its output."""
    text = run.out + run.err
    assert run.rc == 2, text
    assert "Traceback" not in text, text
    for name in names:
        assert name in text, (name, text)
    return text
