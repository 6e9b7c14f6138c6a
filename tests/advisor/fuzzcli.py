"""The fuzz suites' harness: run ``specserver-advisor`` in-process on one hostile input, under
a CPU-time bound (a profiling interval timer: CPU seconds, not wall time, so a loaded
machine does not fail a run) and a memory bound (an address-space limit), with its output
captured, and say what was wrong with the run.

Used by ``test_fuzz_lint.py`` and ``test_fuzz_plan_replay.py``. The promise checked: exit 0, 1
or 2, no traceback (nothing escapes ``main``, nothing printed as one), done within
``SECONDS`` of CPU and within ``MEMORY`` bytes more than the test process already had.
"""

from __future__ import annotations

import contextlib
import io
import os
import resource
import signal
import sys
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from types import FrameType

from hypothesis import HealthCheck, Phase, settings

from specserver_advisor.cli.main import main

#: CPU seconds per input. A hostile input the advisor handles takes well under a second.
SECONDS = float(os.environ.get("SPECSERVER_FUZZ_SECONDS", "10"))
MEMORY = 1024 * 2**20
#: Examples per strategy; CI's default keeps every fuzz test to a few seconds on 2 cores.
EXAMPLES = int(os.environ.get("SPECSERVER_FUZZ_EXAMPLES", "30"))
#: Set to skip the ``@example`` cases and only generate (to look past a known failure).
GENERATE_ONLY = os.environ.get("SPECSERVER_FUZZ_GENERATE_ONLY") == "1"

FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,  # the bound is SECONDS of CPU, checked by the harness, not a wall deadline
    derandomize=True,  # the same examples on every CI run
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    phases=[Phase.generate] if GENERATE_ONLY else [Phase.explicit, Phase.generate],
)


class Overrun(BaseException):
    """The time bound: a BaseException, so that no ``except Exception`` in the CLI eats it."""


@dataclass
class Outcome:
    argv: list[str]
    code: int | None
    stdout: str
    stderr: str
    #: CPU seconds (user + system) the run took.
    seconds: float
    #: What escaped ``main`` (formatted), if anything.
    escaped: str = ""

    def problems(self) -> list[str]:
        """Every broken promise of this run, empty when it kept them all."""
        out = []
        if self.escaped:
            out.append(f"escaped main:\n{self.escaped}")
        if self.code not in (0, 1, 2):
            out.append(f"exit code {self.code}")
        if "Traceback" in self.stderr or "Traceback" in self.stdout:
            out.append(f"a traceback in the output:\n{self.stderr[-3000:]}")
        if self.seconds > SECONDS:
            out.append(f"took {self.seconds:.1f} s of CPU (bound {SECONDS} s)")
        return out

    def check(self) -> None:
        problems = self.problems()
        assert not problems, f"specserver-advisor {' '.join(self.argv)}: " + "\n".join(problems)


def _virtual_size() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


@contextlib.contextmanager
def _bounded() -> Iterator[None]:
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = _virtual_size() + MEMORY
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)

    def overrun(_signum: int, frame: FrameType | None) -> None:
        if frame is not None and frame.f_code.co_name == "gc_callback":
            return  # Hypothesis's gc hook: raised there it is only printed; the next tick
        raise Overrun(f"still running after {SECONDS} s of CPU")

    previous = signal.signal(signal.SIGPROF, overrun)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    # ITIMER_PROF counts the process's CPU time (user + system), not the wall clock; again
    # every half CPU second, should one land where it cannot propagate.
    signal.setitimer(signal.ITIMER_PROF, SECONDS, 0.5)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def advisor(argv: list[str], stdin: bytes = b"") -> Outcome:
    """``specserver-advisor ARGV`` in-process, bounded; stdin as the bytes given (decoded the
    way Python decodes a pipe under the C locale: bad bytes become surrogates)."""
    out, err = io.StringIO(), io.StringIO()
    fake_in = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8", errors="surrogateescape")
    code: int | None = None
    escaped = ""
    start = time.process_time()
    saved_in = sys.stdin
    sys.stdin = fake_in
    try:
        with _bounded(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:  # argparse's usage errors
                code = exc.code if isinstance(exc.code, int) else 2
    except (Exception, Overrun) as exc:
        escaped = "".join(traceback.format_exception(exc))[-4000:]
    finally:
        sys.stdin = saved_in
    spent = time.process_time() - start
    return Outcome(argv, code, out.getvalue(), err.getvalue(), spent, escaped)
