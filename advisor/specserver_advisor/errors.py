"""Errors the advisor's CLI turns into one line and exit code 2, and the one escaping of
input-derived text every CLI prints (issue 38).

``shown`` is the escaping: control characters (C0 with CR, LF and TAB, DEL, C1), the bidi
controls (U+202A-U+202E, U+2066-U+2069, U+200E/U+200F), line and paragraph separators, the BOM
and lone surrogates (bytes that were not UTF-8) become visible escapes (``\\x1b``,
``\\u202e``, ``\\n``), so a file name, a YAML value or an argument cannot clear the screen,
reorder a line or start a line of its own. ``guarded_output`` is the sink every CLI's ``main``
writes through: it applies the same escaping to whatever reaches stdout and stderr (keeping the
CLI's own newlines and tabs) and shows a line that would start with ``::`` as ``\\x3a:``, so
no input can write a GitHub Actions workflow command (``::error``, ``::stop-commands::``,
``::add-mask::``) into a job log; ``write_annotations`` is the one way past that rule, for
the ``github`` format's own annotation lines. Pure but for the streams it wraps.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
from collections.abc import Iterator
from typing import TextIO


class UsageError(Exception):
    """Bad arguments or unusable input."""


_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff\ud800-\udfff]"
)
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def shown(text: object) -> str:
    """``text`` (``str()`` of it) as one printable line: every control, bidi and separator
    character as a visible escape. Apply to every input-derived string in a message."""
    return _UNSAFE.sub(_escape, str(text))


#: What the sink leaves as written: the CLI's own line structure.
_KEEP = {"\n", "\t"}


def _sink_escape(match: re.Match[str]) -> str:
    char = match.group()
    return char if char in _KEEP else _escape(match)


#: How a ``::`` at the start of a line not written by ``write_annotations`` is shown.
COLON = "\\x3a"


class GuardedStream(io.TextIOBase):
    """A text stream over ``raw`` that escapes what ``shown`` escapes (newlines and tabs kept)
    and shows a line starting with ``::`` as ``\\x3a:`` (a lone ``:`` at a line's start is
    held until the next character shows whether a second follows)."""

    def __init__(self, raw: TextIO) -> None:
        super().__init__()
        self.raw = raw
        self._start = True
        self._held = ""

    def _line(self, part: str, trusted: bool) -> str:
        text, self._held = self._held + part, ""
        if self._start and not trusted:
            if text == ":":
                self._held = ":"
                return ""
            if text.startswith("::"):
                text = COLON + text[1:]
        if text:
            self._start = False
        return _UNSAFE.sub(_sink_escape, text)

    def _write(self, s: str, trusted: bool) -> int:
        parts = s.split("\n")
        out = []
        for k, part in enumerate(parts):
            if k:
                out.append(self._held + "\n")
                self._held, self._start = "", True
            out.append(self._line(part, trusted))
        self.raw.write("".join(out))
        return len(s)

    def write(self, s: str) -> int:
        return self._write(s, trusted=False)

    def write_trusted(self, s: str) -> int:
        return self._write(s, trusted=True)

    def flush(self) -> None:
        self.raw.flush()

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.raw.fileno()

    def isatty(self) -> bool:
        return self.raw.isatty()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.raw, "encoding", "utf-8")

    @property
    def buffer(self) -> object:
        return getattr(self.raw, "buffer", None)

    def close_line(self) -> None:
        """Write a held ``:`` (the end of output)."""
        if self._held:
            self.raw.write(self._held)
            self._held = ""


@contextlib.contextmanager
def guarded_output() -> Iterator[None]:
    """``sys.stdout`` and ``sys.stderr`` as :class:`GuardedStream` while the block runs (the
    streams in place when it starts, restored when it ends)."""
    saved = sys.stdout, sys.stderr
    out, err = GuardedStream(saved[0]), GuardedStream(saved[1])
    sys.stdout, sys.stderr = out, err
    try:
        yield
    finally:
        for stream in (out, err):
            with contextlib.suppress(Exception):
                stream.close_line()
                stream.flush()
        sys.stdout, sys.stderr = saved


def write_annotations(text: str) -> None:
    """Print the ``github`` format's own annotation lines (``::error file=...``): past the
    ``::`` rule of :class:`GuardedStream`, with control characters still escaped."""
    stream = sys.stdout
    if isinstance(stream, GuardedStream):
        stream.write_trusted(text + "\n")
    else:
        stream.write(text + "\n")
