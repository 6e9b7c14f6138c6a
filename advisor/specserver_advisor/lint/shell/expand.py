"""Word expansion for the launch-script evaluator: variables (``$V``, ``${V:-default}``,
``${V:=x}``, ``${V:+x}``, ``${#V}``, arrays and ``$@``), ``$(( ))`` integer arithmetic and
field splitting, over one "world" (a possible state of the script's variables). What cannot be
known becomes a piece marked ``unknown``, named for the INFO the linter reports. Every piece
produced spends the file's ``Budget`` (``chars``); a value that does not fit becomes an unknown
piece named ``OVER`` (INFO004 reports it). Arithmetic is 64-bit, as in bash; a result beyond it
is unknown. Pure.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from specserver_advisor.lint.model import Position
from specserver_advisor.lint.shell.budget import MAX_VALUE, OVER, PIECE_COST, Budget
from specserver_advisor.lint.shell.words import Arith, Lit, Part, Subst, Var, Word


class Piece(NamedTuple):
    """Expanded text with where it came from; ``unknown`` names what could not be resolved."""

    text: str
    line: int
    column: int
    split: bool = False
    unknown: str | None = None


Value = tuple[Piece, ...]


@dataclass
class World:
    """One possible state of the script's variables."""

    vars: dict[str, Value | list[Value]] = field(default_factory=dict)
    exported: set[str] = field(default_factory=set)
    assigned_at: dict[str, Position] = field(default_factory=dict)
    params: list[Value] = field(default_factory=list)

    def copy(self) -> World:
        return World(dict(self.vars), set(self.exported), dict(self.assigned_at), list(self.params))

    def key(self) -> tuple[object, ...]:
        texts: list[tuple[str, object]] = []
        for k, v in self.vars.items():
            texts.append((k, tuple([text_of(x) for x in v]) if isinstance(v, list) else text_of(v)))
        texts.sort()
        return (
            tuple(texts),
            tuple(sorted(self.exported)),
            tuple([text_of(p) for p in self.params]),
        )


@dataclass
class Field:
    """One word after expansion and field splitting."""

    text: str
    position: Position
    unknown: list[str] = field(default_factory=list)
    #: Nothing but unknown, unquoted expansions: may stand for any number of words.
    only_unknown: bool = False
    #: Characters of ``text`` before the first unknown piece (None: no unknown piece), so
    #: ``--flag=$V`` is known to name ``--flag`` whatever ``$V`` holds.
    decided: int | None = None


def text_of(value: Value) -> str:
    """A value's text."""
    if len(value) == 1:
        return value[0].text
    return "".join([p.text for p in value])


def _unknowntext_of(name: str) -> str:
    return name if name.startswith("$(") else f"${name}"


# ------------------------------------------------------------------------------ expansion


def lookup(world: World, name: str, index: str) -> Value | list[Value] | None:
    if name.isdigit():
        n = int(name)
        return world.params[n - 1] if 0 < n <= len(world.params) else None
    if name in ("@", "*"):
        return list(world.params)
    if name == "#":
        return (Piece(str(len(world.params)), 1, 1),)
    value = world.vars.get(name)
    if isinstance(value, list) and not index:
        return value[0] if value else ()
    return value


def _size(segments: list[list[Piece]]) -> int:
    total = 0
    for seg in segments:
        total += PIECE_COST * len(seg)
        for p in seg:
            total += len(p.text)
    return total


def stored(name: str, value: Value, budget: Budget, line: int, column: int) -> Value:
    """The value a variable keeps: itself, or an unknown piece when it is over ``MAX_VALUE``
    (a value doubled again and again); the budget notes it."""
    if _size([list(value)]) <= MAX_VALUE:
        return value
    budget.note("value")
    return (Piece(OVER + name, line, column, split=True, unknown=OVER + name),)


def _affordable(part: Part, segments: list[list[Piece]], budget: Budget) -> list[list[Piece]]:
    """The segments, or one unknown piece when their size does not fit the budget."""
    if budget.spend("chars", _size(segments)):
        return segments
    name = OVER + (part.name if isinstance(part, Var) else "text")
    line, column = (part.line, part.column)
    return [[Piece(name, line, column, split=True, unknown=name)]]


def _expand_part(part: Part, world: World, quoted: bool, budget: Budget) -> list[list[Piece]]:
    """Segments of pieces; a new segment is a forced word boundary ("$@", "${a[@]}")."""
    return _affordable(part, _expand_unpaid(part, world, quoted, budget), budget)


def _expand_unpaid(part: Part, world: World, quoted: bool, budget: Budget) -> list[list[Piece]]:
    if isinstance(part, Lit):
        return [[Piece(part.text, part.line, part.column, split=False)]]
    if isinstance(part, Subst):
        body = " ".join(part.text.split())
        name = "$(" + (body if len(body) <= 24 else body[:21] + "...") + ")"
        return [[Piece(name, part.line, part.column, split=not quoted, unknown=name)]]
    if isinstance(part, Arith):
        return [[_arith(part, world)]]
    split = not (quoted or part.quoted)
    value = lookup(world, part.name, part.index)
    is_set = value is not None
    non_empty = bool(value) if isinstance(value, list) else bool(value and text_of(value))
    if part.op == "#":
        n = len(value) if isinstance(value, list) else len(text_of(value or ()))
        return [[Piece(str(n), part.line, part.column)]]
    if part.op in (":-", "-", ":=", "="):
        if (non_empty if part.op.startswith(":") else is_set) and value is not None:
            return _value_segments(value, split, part.index)
        segs = expand_parts(part.arg, world, quoted or part.quoted, budget)
        if part.op in (":=", "="):
            value = tuple(p for seg in segs for p in seg)
            world.vars[part.name] = stored(part.name, value, budget, part.line, part.column)
        return segs
    if part.op in (":+", "+"):
        if non_empty if part.op == ":+" else is_set:
            return expand_parts(part.arg, world, quoted or part.quoted, budget)
        return [[]]
    if value is None:
        name = part.name
        return [[Piece(_unknowntext_of(name), part.line, part.column, split=split, unknown=name)]]
    return _value_segments(value, split, part.index or ("@" if part.name == "@" else ""))


def _value_segments(value: Value | list[Value], split: bool, index: str) -> list[list[Piece]]:
    def mark(v: Value) -> list[Piece]:
        return [p if p.split == split else p._replace(split=split) for p in v]

    if isinstance(value, list):
        if index == "@" and not split:
            return [mark(v) for v in value] or [[]]
        joined: list[Piece] = []
        for k, v in enumerate(value):
            if k:
                joined.append(Piece(" ", 1, 1, split))
            joined += mark(v)
        return [joined]
    return [mark(value)]


def expand_parts(
    parts: tuple[Part, ...] | list[Part], world: World, quoted: bool, budget: Budget
) -> list[list[Piece]]:
    segs: list[list[Piece]] = [[]]
    for part in parts:
        pieces = _expand_part(part, world, quoted, budget)
        segs[-1] += pieces[0]
        segs += pieces[1:]
    return segs


_BINOPS: dict[type[ast.operator], Callable[[int, int], int]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Mod: lambda a, b: int(a - b * int(a / b)),
    ast.Div: lambda a, b: int(a / b),
    ast.FloorDiv: lambda a, b: int(a / b),
}


#: Longer ``$(( ))`` expressions are not evaluated (their value is unknown).
MAX_ARITH = 1_000
INT64 = 2**63


def _arith(part: Arith, world: World) -> Piece:
    unknown: list[str] = []
    if len(part.expr) > MAX_ARITH:
        name = "$((" + part.expr[:18] + "...))"
        return Piece(name, part.line, part.column, unknown=name)

    def value_of(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2) or m.group(3)
        value = lookup(world, name, "")
        text = text_of(value) if value is not None and not isinstance(value, list) else ""
        if not text.strip().lstrip("-").isdigit():
            unknown.append(name)
            return "0"
        return text.strip()

    expr = re.sub(
        r"\$\{([A-Za-z_]\w*)\}|\$([A-Za-z_]\w*|[0-9])|\b([A-Za-z_]\w*)\b",
        value_of,
        part.expr,
    )
    if not unknown:
        try:
            result = _eval(ast.parse(expr.strip().replace("/", "//"), mode="eval").body)
            return Piece(str(result), part.line, part.column)
        except (SyntaxError, ValueError, ZeroDivisionError, KeyError, RecursionError):
            unknown.append(f"$(({part.expr.strip()}))")
    name = unknown[0]
    return Piece(_unknowntext_of(name), part.line, part.column, unknown=name)


def _eval(node: ast.expr) -> int:
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        if not -INT64 <= node.value < INT64:
            raise ValueError("beyond 64-bit arithmetic")
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        v = _eval(node.operand)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        result = _BINOPS[type(node.op)](_eval(node.left), _eval(node.right))
        if not -INT64 <= result < INT64:
            raise ValueError("beyond 64-bit arithmetic")
        return result
    raise ValueError("unsupported arithmetic")


#: Field splitting's separators (kept by ``split``, so positions can be counted).
_SPACE_RUNS = re.compile(r"(\s+)")


def split_fields(segments: list[list[Piece]]) -> list[Field]:
    """Field splitting of expanded segments (only unquoted expansion text splits)."""
    out: list[Field] = []
    for seg in segments:
        if len(seg) == 1 and not seg[0].split:  # one quoted or literal piece: one field
            only = seg[0]
            at = Position(only.line, only.column)
            if only.unknown is None:
                out.append(Field(only.text, at, [], False, None))
            else:
                out.append(Field(only.text, at, [only.unknown], False, 0))
            continue
        if seg and not any(p.split for p in seg):  # quoted or literal only: one field
            unknown = [p.unknown for p in seg if p.unknown is not None]
            text = "".join(p.text for p in seg)
            first = next((k for k, p in enumerate(seg) if p.unknown is not None), None)
            decided = None if first is None else sum(len(p.text) for p in seg[:first])
            out.append(Field(text, Position(seg[0].line, seg[0].column), unknown, False, decided))
            continue
        current: Field | None = None
        quoted_seen = False
        for piece in seg:
            if not piece.split:
                quoted_seen = True
            chunks = _SPACE_RUNS.split(piece.text) if piece.split else [piece.text]
            offset = 0
            for chunk in chunks:
                column = piece.column + offset
                offset += len(chunk)
                if piece.split and chunk.isspace():
                    if current is not None:
                        out.append(current)
                    current = None
                    continue
                if not chunk and piece.split and piece.unknown is None:
                    continue
                if current is None:
                    current = Field("", Position(piece.line, column), only_unknown=True)
                if piece.unknown is not None and current.decided is None:
                    current.decided = len(current.text)
                current.text += chunk
                if piece.unknown is not None:
                    current.unknown.append(piece.unknown)
                if piece.unknown is None or not piece.split:
                    current.only_unknown = False
        if current is not None:
            out.append(current)
        elif quoted_seen and seg:
            out.append(Field("", Position(seg[0].line, seg[0].column)))
    return out


def expand_word(word: Word, world: World, budget: Budget) -> list[Field]:
    """A word's fields in one world (each field spends a ``words`` unit)."""
    fields = split_fields(expand_parts(word.parts, world, False, budget))
    budget.spend("words", len(fields))
    return fields
