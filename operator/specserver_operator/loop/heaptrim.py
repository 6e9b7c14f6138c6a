"""Hand the heap pages a cycle freed back to the kernel (glibc ``malloc_trim``).

Called by ``cycle.Cycle.run_forever`` after each cycle. A cycle over a thousand SpecServers
allocates and frees tens of megabytes (rendered children, status patches, parsed watch events);
glibc keeps the freed pages mapped, so the process's RSS is the high-water mark of its busiest
cycle rather than what it holds. ``malloc_trim(0)`` releases the free pages (also those in the
middle of the heap, with ``MADV_DONTNEED``). Where the C library is not glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable

_trim: Callable[[int], int] | None = None


def _load() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        libc = ctypes.CDLL(name)
        trim = libc.malloc_trim
    except (OSError, AttributeError):  # musl and others have no malloc_trim
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def release_free_pages() -> bool:
    """Give freed heap pages back to the kernel; whether the C library could (glibc)."""
    global _trim
    if _trim is None:
        _trim = _load() or (lambda _pad: 0)
    return bool(_trim(0))
