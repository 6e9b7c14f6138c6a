"""The one reader of files and stdin for the advisor: size checked before reading, UTF-8 decoded.

Every file, stdin stream and configuration the advisor reads (``lint`` files and ``-``, a
``--config`` settings file, ``replay --observations``/``--policy``, ``plan --from``, a model
directory's ``config.json``) comes through :func:`read_bytes` or :func:`read_text`: a regular
file larger than the limit is refused from its size before a byte is read, anything else (a
pipe, stdin) is read at most one byte past the limit, and text that is not UTF-8 is refused
with the line and byte where it broke. A named pipe is opened without waiting for a writer (one
that has none reads as empty, never hangs the run). Every failure is an ``InputLimitError``
naming the input.
I/O: the read itself; decoding is pure (``decode_utf8``).
"""

from __future__ import annotations

import fcntl
import os
import stat
from pathlib import Path
from typing import BinaryIO

from specserver_advisor.bounded import InputLimitError

#: Bytes of one file or stream the CLI reads by default (lint's limit since its first release).
MAX_FILE_BYTES = 2_000_000


def _too_large(what: str, size: int | None, max_bytes: int) -> InputLimitError:
    if size is None:
        return InputLimitError(what, f"too large (more than the limit of {max_bytes} bytes)")
    return InputLimitError(what, f"too large ({size} bytes, over the limit of {max_bytes})")


def read_stream(
    stream: BinaryIO, what: str, *, max_bytes: int = MAX_FILE_BYTES, size: int | None = None
) -> bytes:
    """At most ``max_bytes`` from an open binary stream (InputLimitError when there is more).
    ``size``: the bytes a regular file holds (``fstat``), read in one call of that size (a
    read sized for ``max_bytes`` allocates 2 MB for every small file); a file that grew since
    is read on, still to at most one byte past the limit."""
    try:
        if size is None or size >= max_bytes:
            raw = stream.read(max_bytes + 1)
        else:
            raw = stream.read(size + 1)
            if len(raw) > size:  # it grew: the rest, up to the limit's byte past
                raw += stream.read(max_bytes + 1 - len(raw))
    except OSError as exc:
        raise InputLimitError(what, f"cannot read: {exc.strerror or exc}") from None
    if len(raw) > max_bytes:
        raise _too_large(what, None, max_bytes)
    return raw


def _open(path: Path | str) -> BinaryIO:
    """``path`` open for reading; O_NONBLOCK so that opening a FIFO with no writer returns at
    once (then blocking again: a FIFO without a writer reads as EOF, a writer's bytes arrive)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(
    path: Path | str, what: str | None = None, *, max_bytes: int = MAX_FILE_BYTES
) -> bytes:
    """The bytes of ``path``: its size checked (``fstat``) before any is read."""
    what = str(path) if what is None else what
    try:
        with _open(path) as stream:
            info = os.fstat(stream.fileno())
            regular = stat.S_ISREG(info.st_mode)
            if regular and info.st_size > max_bytes:
                raise _too_large(what, info.st_size, max_bytes)
            size = info.st_size if regular else None
            return read_stream(stream, what, max_bytes=max_bytes, size=size)
    except OSError as exc:
        raise InputLimitError(what, f"cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:  # a path with a NUL byte
        if isinstance(exc, InputLimitError):
            raise
        raise InputLimitError(what, f"cannot read: {exc}") from None


def decode_utf8(raw: bytes, what: str) -> str:
    """``raw`` as UTF-8 text, or an InputLimitError with the line and byte it broke at."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise InputLimitError(
            what, f"not UTF-8 text ({exc.reason} at byte {exc.start}, line {line})", line
        ) from None


def read_text(path: Path | str, what: str | None = None, *, max_bytes: int = MAX_FILE_BYTES) -> str:
    """The UTF-8 text of ``path`` (``read_bytes`` then ``decode_utf8``)."""
    what = str(path) if what is None else what
    return decode_utf8(read_bytes(path, what, max_bytes=max_bytes), what)
