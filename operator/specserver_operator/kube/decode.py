"""Decoding what the Kubernetes API sends, so that no one object can end the process or the
shared cycle (issue 25: a SpecServer nested ~3,000 levels deep made kopf's ``json.loads`` raise
RecursionError and the operator exit, and again on every restart). Pure; no I/O.

``loads`` never raises RecursionError: CPython's decoder refuses nesting past the interpreter's
recursion limit, and such text is then parsed by ``parse_iteratively`` (an explicit stack), so
the object's identity can still be read and the object skipped. ``too_deep`` says which objects
are skipped: deeper than any Kubernetes object this operator reads (a Deployment with its
managedFields is ~15 levels). Called by client.py (every answer of the operator's own client)
and kopfdecode.py (kopf's LIST pages and watch lines).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, cast

from specserver_advisor.bounded import depth

#: Containers inside containers of one API object that the operator (and kopf) will hold.
MAX_OBJECT_DEPTH = 64

_SPACE = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_LITERALS = {"true": True, "false": False, "null": None}
#: The C string scanner json's own decoder uses (not in the typeshed stubs).
scanstring = cast(Callable[[str, int], tuple[str, int]], json.decoder.scanstring)  # type: ignore[attr-defined]


class UndecodableError(ValueError):
    """An answer that is not JSON (the message says where)."""


def loads(raw: bytes | str, what: str) -> Any:
    """The JSON value of an API answer, however deeply nested (never a RecursionError)."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    try:
        return json.loads(text)
    except RecursionError:
        pass  # nested past the interpreter's limit: the same text, without recursion
    except ValueError as exc:
        raise UndecodableError(f"{what}: not JSON ({exc})") from None
    try:
        return parse_iteratively(text)
    except ValueError as exc:
        raise UndecodableError(f"{what}: not JSON ({exc})") from None


def too_deep(obj: Any, limit: int = MAX_OBJECT_DEPTH) -> bool:
    """Whether ``obj`` nests more than ``limit`` containers (counted without recursion)."""
    return depth(obj) > limit


def identity(obj: Any) -> str:
    """``Kind namespace/name`` of an object, for a log line (never raises)."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    kind = obj.get("kind") if isinstance(obj, dict) else None
    return f"{kind or 'object'} {meta.get('namespace') or ''}/{meta.get('name') or '?'}"


def resource_version(obj: Any) -> str | None:
    """The object's resourceVersion (None when it has none)."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    version = meta.get("resourceVersion") if isinstance(meta, dict) else None
    return str(version) if version else None


def _space(text: str, pos: int) -> int:
    match = _SPACE.match(text, pos)
    return match.end() if match else pos


def _key(text: str, pos: int) -> tuple[str, int]:
    """An object key and its colon at ``pos``; the position of the value after them."""
    if not text.startswith('"', pos):
        raise ValueError(f"expected a key at character {pos}")
    key, pos = scanstring(text, pos + 1)
    pos = _space(text, pos)
    if not text.startswith(":", pos):
        raise ValueError(f"expected ':' at character {pos}")
    return key, _space(text, pos + 1)


def _scalar(text: str, pos: int) -> tuple[Any, int]:
    """A string, number or literal at ``pos``; the position after it."""
    if text.startswith('"', pos):
        return scanstring(text, pos + 1)
    for word, value in _LITERALS.items():
        if text.startswith(word, pos):
            return value, pos + len(word)
    match = _NUMBER.match(text, pos)
    if match is None or match.end() == pos:
        raise ValueError(f"expected a value at character {pos}")
    number = match.group()
    return (float(number) if match.group(1) or match.group(2) else int(number)), match.end()


def parse_iteratively(text: str) -> Any:
    """``json.loads`` with an explicit stack instead of recursion (slower; any depth)."""
    stack: list[tuple[Any, Any]] = []  # open containers and the key being filled
    pos = _space(text, 0)
    while True:
        char = text[pos : pos + 1]
        value: Any
        if char in ("{", "["):
            pos = _space(text, pos + 1)
            if text.startswith("}" if char == "{" else "]", pos):
                value, pos = ({} if char == "{" else []), pos + 1
            elif char == "{":
                key, pos = _key(text, pos)
                stack.append(({}, key))
                continue
            else:
                stack.append(([], None))
                continue
        else:
            value, pos = _scalar(text, pos)
        while True:  # put the value into its container; close the containers that end here
            if not stack:
                if _space(text, pos) != len(text):
                    raise ValueError(f"extra data at character {pos}")
                return value
            container, key = stack[-1]
            if isinstance(container, dict):
                container[key] = value
            else:
                container.append(value)
            pos = _space(text, pos)
            char = text[pos : pos + 1]
            if char == ",":
                pos = _space(text, pos + 1)
                if isinstance(container, dict):
                    key, pos = _key(text, pos)
                    stack[-1] = (container, key)
                break  # the next value of this container
            if char != ("}" if isinstance(container, dict) else "]"):
                raise ValueError(f"expected ',' or a closing bracket at character {pos}")
            stack.pop()
            value, pos = container, pos + 1


class SkipLog:
    """Which skipped objects to log now: each once per ``every_s`` (a watch replays a skipped
    event after every reconnect; the log must not grow with it), at most ``kept`` remembered."""

    def __init__(self, every_s: float = 600.0, kept: int = 1024) -> None:
        self.every_s, self.kept = every_s, kept
        self.logged: dict[str, float] = {}
        self.skipped = 0

    def due(self, who: str, now: float) -> bool:
        """Count one skip of ``who``; True when it should be logged."""
        self.skipped += 1
        last = self.logged.get(who)
        if last is not None and now - last < self.every_s:
            return False
        if len(self.logged) >= self.kept:
            self.logged = {k: t for k, t in self.logged.items() if now - t < self.every_s}
            if len(self.logged) >= self.kept:
                return False  # a flood of distinct objects: the count still says how many
        self.logged[who] = now
        return True


#: The process's one record of skipped objects (client.py and kopfdecode.py log through it).
SKIPS = SkipLog()
#: What a skipped object's log line says.
SKIP_REASON = (
    f"nested more than {MAX_OBJECT_DEPTH} levels deep: skipped (not cached, not reconciled) "
    "until it is fixed or deleted; every other object is served as usual"
)
