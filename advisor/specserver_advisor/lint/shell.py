"""A small shell evaluator for launch scripts: what a launch line's arguments really are.

Tracks assignments and ``export``, arrays, ``$V``/``${V}``/``${V:-default}`` (and ``:=``,
``:+``), strings built by appending, ``$(( ))`` integer arithmetic, functions called in the
file (with ``$1``/``$@``), and ``if``/``case`` branches: every branch runs in its own copy of
the variables (a "world"), so a launch after ``fi`` is linted once per distinct argv. Anything
it cannot know (a variable set outside the file, a command's output) is recorded on the launch
as unresolved, never guessed: a word that is only an unknown expansion is dropped from the
argv (it may stand for any number of arguments), or kept as the value of the flag before it.
Pure.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import NamedTuple

from specserver_advisor.lint.argv import detect, make_launch
from specserver_advisor.lint.model import Launch, Position
from specserver_advisor.lint.shellparse import (
    Block,
    Branches,
    Command,
    Function,
    Loop,
    Node,
    parse,
)
from specserver_advisor.lint.shellwords import Arith, Lit, Part, Subst, Var, Word, tokenize
from specserver_advisor.sglang.flags import match_option

MAX_WORLDS = 16
MAX_CALL_DEPTH = 8
ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\+?)=")
DECLARERS = ("export", "local", "declare", "typeset", "readonly")


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
        def text(v: Value | list[Value]) -> object:
            if isinstance(v, list):
                return tuple(_text(x) for x in v)
            return _text(v)

        return (
            tuple(sorted((k, text(v)) for k, v in self.vars.items())),
            tuple(sorted(self.exported)),
            tuple(_text(p) for p in self.params),
        )


@dataclass
class Field:
    """One word after expansion and field splitting."""

    text: str
    position: Position
    unknown: list[str] = field(default_factory=list)
    #: Nothing but unknown, unquoted expansions: may stand for any number of words.
    only_unknown: bool = False


def _text(value: Value) -> str:
    return "".join(p.text for p in value)


def _unknown_text(name: str) -> str:
    return name if name.startswith("$(") else f"${name}"


# ------------------------------------------------------------------------------ expansion


def _lookup(world: World, name: str, index: str) -> Value | list[Value] | None:
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


def _expand_part(part: Part, world: World, quoted: bool) -> list[list[Piece]]:
    """Segments of pieces; a new segment is a forced word boundary ("$@", "${a[@]}")."""
    if isinstance(part, Lit):
        return [[Piece(part.text, part.line, part.column, split=False)]]
    if isinstance(part, Subst):
        name = "$(" + part.text.strip()[:30] + ")"
        return [[Piece(name, part.line, part.column, split=not quoted, unknown=name)]]
    if isinstance(part, Arith):
        return [[_arith(part, world)]]
    split = not (quoted or part.quoted)
    value = _lookup(world, part.name, part.index)
    is_set = value is not None
    non_empty = bool(value) if isinstance(value, list) else bool(value and _text(value))
    if part.op == "#":
        n = len(value) if isinstance(value, list) else len(_text(value or ()))
        return [[Piece(str(n), part.line, part.column)]]
    if part.op in (":-", "-", ":=", "="):
        if (non_empty if part.op.startswith(":") else is_set) and value is not None:
            return _value_segments(value, split, part.index)
        segs = _expand_parts(part.arg, world, quoted or part.quoted)
        if part.op in (":=", "="):
            world.vars[part.name] = tuple(p for seg in segs for p in seg)
        return segs
    if part.op in (":+", "+"):
        if non_empty if part.op == ":+" else is_set:
            return _expand_parts(part.arg, world, quoted or part.quoted)
        return [[]]
    if value is None:
        name = part.name
        return [[Piece(_unknown_text(name), part.line, part.column, split=split, unknown=name)]]
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


def _expand_parts(
    parts: tuple[Part, ...] | list[Part], world: World, quoted: bool
) -> list[list[Piece]]:
    segs: list[list[Piece]] = [[]]
    for part in parts:
        pieces = _expand_part(part, world, quoted)
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


def _arith(part: Arith, world: World) -> Piece:
    unknown: list[str] = []

    def value_of(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2) or m.group(3)
        value = _lookup(world, name, "")
        text = _text(value) if value is not None and not isinstance(value, list) else ""
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
    return Piece(_unknown_text(name), part.line, part.column, unknown=name)


def _eval(node: ast.expr) -> int:
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        v = _eval(node.operand)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return _BINOPS[type(node.op)](_eval(node.left), _eval(node.right))
    raise ValueError("unsupported arithmetic")


def split_fields(segments: list[list[Piece]]) -> list[Field]:
    """Field splitting of expanded segments (only unquoted expansion text splits)."""
    out: list[Field] = []
    for seg in segments:
        if seg and not any(p.split for p in seg):  # quoted or literal only: one field
            unknown = [p.unknown for p in seg if p.unknown is not None]
            text = "".join(p.text for p in seg)
            out.append(Field(text, Position(seg[0].line, seg[0].column), unknown))
            continue
        current: Field | None = None
        quoted_seen = False
        for piece in seg:
            if not piece.split:
                quoted_seen = True
            chunks = re.split(r"(\s+)", piece.text) if piece.split else [piece.text]
            offset = 0
            for chunk in chunks:
                at = Position(piece.line, piece.column + offset)
                offset += len(chunk)
                if piece.split and chunk.isspace():
                    if current is not None:
                        out.append(current)
                    current = None
                    continue
                if not chunk and piece.split and piece.unknown is None:
                    continue
                if current is None:
                    current = Field("", at, only_unknown=True)
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


def expand_word(word: Word, world: World) -> list[Field]:
    """A word's fields in one world."""
    return split_fields(_expand_parts(word.parts, world, False))


# ------------------------------------------------------------------------------ evaluation


@dataclass
class Found:
    """A launch found in one world, before it becomes a ``Launch``."""

    fields: list[Field]
    env: dict[str, str]
    env_positions: dict[str, Position]
    first_line: int
    last_line: int
    #: Lines of the function calls that led to the launch (suppressions there count too).
    call_lines: list[int] = field(default_factory=list)


class Evaluator:
    """Runs the parsed script over worlds, collecting launch commands."""

    def __init__(self, env: dict[str, str]) -> None:
        start = World()
        for name, value in env.items():
            start.vars[name] = (Piece(value, 1, 1),)
            start.exported.add(name)
        self.worlds = [start]
        self.functions: dict[str, list[Node]] = {}
        self.found: list[Found] = []
        self.depth = 0
        self.call_sites: list[tuple[int, int]] = []

    def run(self, nodes: list[Node]) -> None:
        for node in nodes:
            self.worlds = _dedupe([w for world in self.worlds for w in self.node(node, world)])

    def node(self, node: Node, world: World) -> list[World]:
        if isinstance(node, Function):
            self.functions[node.name] = node.body
            return [world]
        if isinstance(node, Block):
            return self.body(node.body, [world])
        if isinstance(node, Loop):  # one world per value (bounded), as for branches
            values = [_as_value(f) for item in node.items for f in expand_word(item, world)]
            out_worlds: list[World] = []
            for value in values[:MAX_WORLDS] or [()]:
                inner = world.copy()
                inner.vars[node.name] = value
                out_worlds += self.body(node.body, [inner])
            return out_worlds
        if isinstance(node, Branches):
            out: list[World] = [] if node.exhaustive else [world]
            for body in node.bodies:
                out += self.body(body, [world.copy()])
            return out
        return self.command(node, world)

    def body(self, nodes: list[Node], worlds: list[World]) -> list[World]:
        saved = self.worlds
        self.worlds = worlds
        self.run(nodes)
        result, self.worlds = self.worlds, saved
        return result

    def command(self, cmd: Command, world: World) -> list[World]:
        assigns: list[tuple[int, Word]] = []
        for k, word in enumerate(cmd.words):
            first = word.parts[0] if word.parts else None
            if isinstance(first, Lit) and not first.quoted and ASSIGN.match(first.text):
                assigns.append((k, word))
            else:
                break
        rest = cmd.words[len(assigns) :]
        if not rest:
            for k, word in assigns:
                self.assign(world, word, cmd.arrays.get(k), export=False)
            return [world]
        name = rest[0].unquoted_literal()
        if name in DECLARERS:
            for word in rest[1:]:
                k = cmd.words.index(word)
                first = word.parts[0] if word.parts else None
                if isinstance(first, Lit) and ASSIGN.match(first.text):
                    self.assign(world, word, cmd.arrays.get(k), export=name == "export")
                elif name == "export" and (lit := word.literal()) and not lit.startswith("-"):
                    world.exported.add(lit)
            return [world]
        if name == "unset":
            for word in rest[1:]:
                world.vars.pop(word.literal() or "", None)
            return [world]
        if name == "shift":
            world.params = world.params[1:]
            return [world]
        if name in self.functions and self.depth < MAX_CALL_DEPTH:
            self.call_sites.append((cmd.first_line, cmd.last_line))
            try:
                return self.call(self.functions[name], rest[1:], world)
            finally:
                self.call_sites.pop()
        if not any(_may_launch(part, world) for word in rest for part in word.parts):
            return [world]
        fields = [f for word in rest for f in expand_word(word, world)]
        texts = [f.text for f in fields]
        if detect(texts):
            prefix = world.copy()
            for k, word in assigns:
                self.assign(prefix, word, cmd.arrays.get(k), export=True)
            env = {
                n: _text(v)
                for n, v in prefix.vars.items()
                if n in prefix.exported and not isinstance(v, list)
            }
            positions = {n: p for n, p in prefix.assigned_at.items() if n in env}
            calls = [n for a, b in self.call_sites for n in range(a, b + 1)]
            self.found.append(Found(fields, env, positions, cmd.first_line, cmd.last_line, calls))
        return [world]

    def call(self, body: list[Node], args: list[Word], world: World) -> list[World]:
        params = [_as_value(f) for word in args for f in expand_word(word, world)]
        inner = world.copy()
        saved = inner.params
        inner.params = params
        self.depth += 1
        try:
            results = self.body(body, [inner])
        finally:
            self.depth -= 1
        for w in results:
            w.params = saved
        return results

    def assign(self, world: World, word: Word, items: list[Word] | None, export: bool) -> None:
        first = word.parts[0]
        assert isinstance(first, Lit)
        m = ASSIGN.match(first.text)
        assert m is not None
        name, append = m.group(1), m.group(2) == "+"
        world.assigned_at[name] = Position(word.line, word.column)
        if export:
            world.exported.add(name)
        if items is not None:
            values = [_as_value(f) for item in items for f in expand_word(item, world)]
            old = world.vars.get(name)
            world.vars[name] = (list(old) if isinstance(old, list) and append else []) + values
            return
        rest = Lit(first.text[m.end() :], first.line, first.column + m.end(), first.quoted)
        parts = [rest, *word.parts[1:]]
        value = tuple(p for seg in _expand_parts(parts, world, True) for p in seg)
        old = world.vars.get(name)
        if append and old is not None:
            if isinstance(old, list):
                world.vars[name] = [*old, value]
                return
            value = old + value
        world.vars[name] = value


def _may_launch(part: Part, world: World) -> bool:
    """Whether expanding this part could yield an SGLang command or change a variable."""
    if isinstance(part, Lit):
        return "sglang" in part.text
    if not isinstance(part, Var):
        return False
    if part.op in (":=", "="):
        return True
    value = _lookup(world, part.name, part.index)
    values = value if isinstance(value, list) else [value] if value is not None else []
    if any("sglang" in _text(v) for v in values):
        return True
    return any(_may_launch(p, world) for p in part.arg)


def _as_value(f: Field) -> Value:
    """A field stored as a value (an array item, a function argument)."""
    unknown = f.unknown[0] if f.unknown else None
    return (Piece(f.text, f.position.line, f.position.column, unknown=unknown),)


def _dedupe(worlds: list[World]) -> list[World]:
    if len(worlds) <= 1:
        return worlds
    seen: dict[tuple[object, ...], World] = {}
    for w in worlds:
        seen.setdefault(w.key(), w)
    return list(seen.values())[:MAX_WORLDS]


# ------------------------------------------------------------------------------ launches


@lru_cache(maxsize=1024)
def _takes_value(token: str) -> bool:
    if not token.startswith("--") or "=" in token:
        return False
    flag, _ = match_option(token)
    return flag is None or not flag.is_bool


Relocate = Callable[[Position], Position]


def to_launch(path: str, found: Found, where: Relocate | None, in_container: bool) -> Launch | None:
    """The Launch for one found command; unknown words dropped or kept as flag values."""
    texts = [f.text for f in found.fields]
    detected = detect(texts)
    if detected is None:
        return None
    kind, first = detected
    positional = kind == "server" and texts[first - 1] == "serve"
    args: list[str] = []
    positions: list[Position] = []
    unresolved: dict[str, Position] = {}
    unresolved_fields: set[int] = set()
    for f in found.fields[first:]:
        for name in f.unknown:
            unresolved.setdefault(name, where(f.position) if where else f.position)
        if f.only_unknown and not (
            args and _takes_value(args[-1]) and len(args) - 1 not in unresolved_fields
        ):
            continue
        if f.unknown:
            unresolved_fields.add(len(args))
        args.append(f.text)
        positions.append(where(f.position) if where else f.position)
    start = found.fields[0].position if found.fields else Position()
    start = where(start) if where else start
    launch = make_launch(path, kind, args, positions, start, found.env, in_container, positional)
    launch.first_line, launch.last_line = (
        (where(Position(found.first_line, 1)).line, where(Position(found.last_line, 1)).line)
        if where
        else (found.first_line, found.last_line)
    )
    launch.env_positions = {} if where else found.env_positions
    launch.call_lines = [] if where else found.call_lines
    launch.unresolved = unresolved
    forget_unresolved(launch, unresolved_fields)
    return launch


def forget_unresolved(launch: Launch, indexes: set[int]) -> None:
    """Issues and values that come from unknown words are not findings: drop them."""
    if not indexes:
        return
    parsed = launch.parsed
    near = indexes | {i - 1 for i in indexes}
    texts = {repr(launch.args[i]) for i in indexes}
    parsed.issues = [
        iss
        for iss in parsed.issues
        if iss.index not in near and not any(t in iss.message for t in texts)
    ]
    for name, at in list(parsed.positions.items()):
        valued_by_next = at + 1 in indexes and _takes_value(launch.args[at])
        if at in indexes or valued_by_next:
            launch.unresolved_fields.add(name)
            if not isinstance(parsed.values.get(name), str):
                parsed.values.pop(name, None)


def from_shell(
    path: str,
    text: str,
    env: dict[str, str] | None = None,
    base: Position | None = None,
    in_container: bool = False,
    where: Relocate | None = None,
) -> list[Launch]:
    """Launches in a shell script or command string.

    ``where`` maps positions in ``text`` to positions in the file (a command embedded in
    YAML); ``base`` reports every position there instead.
    """
    if where is None and base is not None:
        at = base
        where = lambda _: at  # noqa: E731
    evaluator = Evaluator(env or {})
    evaluator.run(parse(tokenize(text)))
    out: list[Launch] = []
    seen: set[tuple[int, tuple[str, ...]]] = set()
    for found in evaluator.found:
        launch = to_launch(path, found, where, in_container)
        if launch is None:
            continue
        key = (found.first_line, tuple(launch.args))
        if key not in seen:
            seen.add(key)
            out.append(launch)
    return out
