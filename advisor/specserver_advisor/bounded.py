"""Bounded decoding of untrusted JSON: size checked before parsing, nesting depth after.

One primitive for every place that decodes text someone else wrote (a tenant's inline model
config, a config.json from a hub or a directory, an observation line, an AdmissionReview): the
caller names what it is decoding, and every failure is an :class:`InputLimitError` whose message
starts with that name, never a RecursionError or a traceback. Pure; no I/O. Its siblings:
``reading`` (files and stdin: size before reading, UTF-8) and ``bounded_yaml`` (YAML: depth and
alias expansion counted in nodes produced).

Depth is counted iteratively (an explicit stack), so a value nested as deep as the C decoder
allows is measured without recursion; CPython's json decoder itself refuses nesting past the
interpreter's recursion limit with a RecursionError, which is caught here and reported the same
way.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

#: Containers inside containers that any real model config, review or observation needs.
MAX_DEPTH = 64
#: Bytes of JSON text accepted by default (an AdmissionReview body is bounded at 4 MiB).
MAX_BYTES = 4 * 1024 * 1024
#: Characters of one number as written, in any base and any loader (JSON, YAML, TOML): a
#: 64-digit integer is far past any count, size or id a config holds, and every such value
#: still converts to a float (2**1024 needs 309 decimal, 256 hex digits).
MAX_NUMBER_CHARS = 64
#: The largest integer magnitude a loaded value may have (the integers ``MAX_NUMBER_CHARS``
#: decimal digits can write; bits, for values a loader built without showing their text).
MAX_INT_BITS = 213


@contextmanager
def gc_paused() -> Iterator[None]:
    """CPython's cyclic collector paused while a bounded input is read into objects (and on
    again after, when it was on): the collector runs every few hundred allocations and
    walks the objects alive, which made reading a 2 MB YAML file (~300,000 nodes) cost 2-4
    times the parse itself. Nothing read here is garbage until it is returned."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@contextmanager
def gc_young_only() -> Iterator[Callable[[], None]]:
    """The cyclic collector run on young objects only, at points the caller picks: inside,
    automatic collection is off and the yielded ``settle()`` collects the youngest generation
    when it holds as many new objects as the collector's own threshold (the automatic policy,
    without its promotions to full collections). For a run that keeps what each input yields
    until it ends (lint's launches and findings): every object is walked once, when young,
    instead of by every full collection that the growing result triggers (on the lint
    benchmark, 2-3 full and ~30 middle collections, a seventh of its CPU time). Cyclic
    garbage an input leaves behind is still collected at the next ``settle()``, so memory stays
    bounded as before; on again after, when it was on (``settle()`` does nothing when it was
    off: the caller's choice holds)."""
    was = gc.isenabled()
    threshold = gc.get_threshold()[0]
    gc.disable()

    def settle() -> None:
        if was and threshold > 0 and gc.get_count()[0] >= threshold:
            gc.collect(0)

    try:
        yield settle
    finally:
        if was:
            gc.enable()


class InputLimitError(ValueError):
    """Input that cannot be read, is too large, nested too deep or not the expected text; the
    message starts with the input's name. ``reason`` is the message without that name (for
    callers whose report names the file already); ``line``/``column`` (1-based) say where,
    when known."""

    def __init__(
        self, what: str, reason: str, line: int | None = None, column: int | None = None
    ) -> None:
        super().__init__(f"{what}: {reason}")
        self.what, self.reason, self.line, self.column = what, reason, line, column
        #: The JSON decoder's own message, when that is what refused the text.
        self.decoder_message = ""


def depth(value: Any) -> int:
    """How many containers deep ``value`` is (a scalar is 0, ``[]`` and ``{}`` are 1)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        level += 1
        deepest = max(deepest, level)
        stack.extend((child, level) for child in children)
    return deepest


def number_text(text: str, what: str) -> str:
    """``text`` when a number written so is short enough to convert (``MAX_NUMBER_CHARS``),
    else InputLimitError: checked before conversion, so no base (``0x``, ``0o``, ``0b``, YAML
    1.1's ``1:30:00`` sexagesimal) turns a long text into quadratic work or a huge integer."""
    if len(text) > MAX_NUMBER_CHARS:
        raise InputLimitError(
            what,
            f"a number written with {len(text):,} characters (the limit is {MAX_NUMBER_CHARS})",
        )
    return text


def check_numbers(value: Any, what: str) -> Any:
    """``value`` itself when every integer in it is at most ``MAX_INT_BITS`` bits (for loaders
    that build integers before they can be checked, such as TOML's ``0x...``), else
    InputLimitError. Iterative, like :func:`depth`."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, int) and item.bit_length() > MAX_INT_BITS:
            raise InputLimitError(
                what, f"an integer of {item.bit_length():,} bits (the limit is {MAX_INT_BITS})"
            )
    return value


def _bounded_int(what: str) -> Any:
    def parse(text: str) -> int:
        return int(number_text(text, what))

    return parse


def check_depth(value: Any, what: str, max_depth: int = MAX_DEPTH) -> Any:
    """``value`` itself when it is at most ``max_depth`` containers deep, else InputLimitError."""
    if depth(value) > max_depth:
        raise InputLimitError(what, f"nested more than {max_depth} levels deep")
    return value


def json_value(
    text: str | bytes,
    what: str,
    *,
    max_bytes: int = MAX_BYTES,
    max_depth: int = MAX_DEPTH,
) -> Any:
    """The JSON value in ``text``, checked for size before parsing and for depth after."""
    size = len(text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text)
    if size > max_bytes:
        raise InputLimitError(what, f"{size} bytes, over the limit of {max_bytes}")
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputLimitError(what, f"not UTF-8 ({exc.reason} at byte {exc.start})") from None
    try:
        value = json.loads(text, parse_int=_bounded_int(what))
    except RecursionError:
        raise InputLimitError(what, f"nested more than {max_depth} levels deep") from None
    except json.JSONDecodeError as exc:
        error = InputLimitError(
            what,
            f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
            exc.lineno,
            exc.colno,
        )
        error.decoder_message = str(exc)
        raise error from None
    return check_depth(value, what, max_depth)


def json_object(
    text: str | bytes,
    what: str,
    *,
    max_bytes: int = MAX_BYTES,
    max_depth: int = MAX_DEPTH,
) -> dict[str, Any]:
    """:func:`json_value` that must be a JSON object."""
    value = json_value(text, what, max_bytes=max_bytes, max_depth=max_depth)
    if not isinstance(value, dict):
        raise InputLimitError(what, f"expected a JSON object, got {type(value).__name__}")
    return value
