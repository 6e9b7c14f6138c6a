"""heaptrim.release_free_pages: freed heap pages really leave the process's RSS (glibc)."""

from __future__ import annotations

import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

#: Fills ~64 MB of malloc'd (not pymalloc: over 512 bytes) buffers, keeps one allocated above
#: them so glibc cannot give the pages back by shrinking the heap's top, frees the rest, and
#: prints VmRSS before and after the call (optionally skipped).
PROBE = """
import sys
sys.path.insert(0, {operator!r})
from specserver_operator.loop import heaptrim

def rss_kb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])

bufs = [bytearray(4000) for _ in range(16000)]
pin = [bytearray(4000) for _ in range(4)]
del bufs
before = rss_kb()
released = heaptrim.release_free_pages() if sys.argv[1] == "trim" else False
print(before, rss_kb(), released)
"""


def _probe(mode: str) -> tuple[int, int, bool]:
    code = PROBE.format(operator=str(ROOT / "operator"))
    out = subprocess.run(
        [sys.executable, "-c", code, mode], capture_output=True, text=True, check=True
    ).stdout.split()
    return int(out[0]), int(out[1]), out[2] == "True"


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_freed_heap_pages_leave_the_rss_after_release() -> None:
    before, after, released = _probe("trim")
    assert released
    assert before - after > 32 * 1024, (before, after)  # most of the ~64 MB freed


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_without_release_the_freed_pages_stay_resident() -> None:
    """The probe itself: without the call the freed buffers stay in the RSS (what the cycle
    would carry into the next one)."""
    before, after, _ = _probe("keep")
    assert before - after < 8 * 1024, (before, after)


def test_each_cycle_trims_within_its_own_cpu_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """``Cycle.run_once`` hands the freed pages back at its end, and the trim's CPU is counted
    in ``specserver_cycle_cpu_seconds`` with the rest of the cycle (stand-in trim: 50 ms of
    the calling thread's CPU)."""
    from test_faults import FaultyCycle, RecordingClient, specserver

    from specserver_operator.loop import heaptrim
    from specserver_operator.metrics import registry as opmetrics

    trims: list[str] = []

    def busy_trim() -> bool:
        trims.append(threading.current_thread().name)
        started = time.thread_time()
        while time.thread_time() - started < 0.05:
            pass
        return True

    monkeypatch.setattr(heaptrim, "release_free_pages", busy_trim)
    client = RecordingClient()
    client.bodies = [specserver("good")]
    cycle = FaultyCycle(client)
    cycle.broken, cycle.passed = {}, []
    before = opmetrics.CYCLE_CPU._value.get()
    assert cycle.run_once() == 1
    assert trims == [threading.current_thread().name]  # once, on the cycle's thread
    assert opmetrics.CYCLE_CPU._value.get() - before >= 0.05
