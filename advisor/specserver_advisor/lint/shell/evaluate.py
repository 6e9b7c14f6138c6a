"""A small shell evaluator for launch scripts: what a launch line's arguments really are.

Tracks assignments and ``export``, arrays, ``$V``/``${V}``/``${V:-default}`` (and ``:=``,
``:+``), strings built by appending, ``$(( ))`` integer arithmetic, functions called in the
file (with ``$1``/``$@``), and ``if``/``case`` branches: every branch runs in its own copy of
the variables (a "world"), so a launch after ``fi`` is linted once per distinct argv. Anything
it cannot know (a variable set outside the file, a command's output) is recorded on the launch
as unresolved, never guessed: a word that is only an unknown expansion is dropped from the
argv (it may stand for any number of arguments), or kept as the value of the flag before it.
Every construct spends one ``Budget`` per file (``shellbudget``): when it runs out the rest is
evaluated along one path, and the launches carry the reason (``Launch.incomplete``, INFO004);
a launch line is linted up to ``MAX_ARGS`` arguments. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from functools import lru_cache

from specserver_advisor.lint.argv import detect, launcher_of, make_launch
from specserver_advisor.lint.model import Launch, Position
from specserver_advisor.lint.shell.budget import (
    FOUND_COST,
    MAX_ARGS,
    MAX_NESTING,
    OVER,
    Budget,
    Exhausted,
    key_cost,
    world_cost,
)
from specserver_advisor.lint.shell.expand import (
    Field,
    Piece,
    Value,
    World,
    expand_parts,
    expand_word,
    lookup,
    stored,
    text_of,
)
from specserver_advisor.lint.shell.parse import (
    Block,
    Branches,
    Command,
    Function,
    Loop,
    Node,
    parse,
)
from specserver_advisor.lint.shell.words import Lit, Part, ShellSyntaxError, Var, Word, tokenize
from specserver_advisor.sglang.flags import ArgvIssue, match_option

MAX_WORLDS = 16
MAX_CALL_DEPTH = 8
ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\+?)=")
DECLARERS = ("export", "local", "declare", "typeset", "readonly")


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
    #: Arguments past ``MAX_ARGS`` on the launch line, not expanded (0: none).
    cut: int = 0
    #: Run by ``docker run/exec`` or ``kubectl exec`` (``bash -c``): in a container.
    remote: bool = False


class Evaluator:
    """Runs the parsed script over worlds, collecting launch commands."""

    def __init__(self, env: dict[str, str], budget: Budget | None = None) -> None:
        self.budget = budget or Budget()
        start = World()
        for name, value in env.items():
            start.vars[name] = (Piece(value, 1, 1),)
            start.exported.add(name)
        self.worlds = [start]
        self.functions: dict[str, list[Node]] = {}
        self.found: list[Found] = []
        self.depth = 0
        self.level = 0
        self.call_sites: list[tuple[int, int]] = []
        #: Functions entered since the budget ran out (the cheap mode enters each once).
        self.entered: set[str] = set()
        #: Launches already found (a loop finds the same one again and again).
        self.seen: set[tuple[object, ...]] = set()

    def run(self, nodes: list[Node]) -> None:
        for node in nodes:
            worlds = [w for world in self.worlds for w in self.node(node, world)]
            self.worlds = worlds[:1] if self.budget.cheap else self.dedupe(worlds)

    def dedupe(self, worlds: list[World]) -> list[World]:
        """Distinct worlds (by their variables' text), at most ``MAX_WORLDS``."""
        if len(worlds) <= 1:
            return worlds
        seen: dict[tuple[object, ...], World] = {}
        for w in worlds:
            key = w.key()
            self.budget.spend("steps", key_cost(key))
            seen.setdefault(key, w)
        return list(seen.values())[:MAX_WORLDS]

    def copy(self, world: World) -> World:
        self.budget.spend("steps", world_cost(len(world.vars)))
        return world.copy()

    def node(self, node: Node, world: World) -> list[World]:
        self.budget.spend("steps")
        if isinstance(node, Function):
            self.functions[node.name] = node.body
            return [world]
        if isinstance(node, Block):
            return self.body(node.body, [world])
        if isinstance(node, Loop):  # one world per value (bounded), as for branches
            values = [_as_value(f) for item in node.items for f in self.expand(item, world)]
            out_worlds: list[World] = []
            for value in values[:MAX_WORLDS] or [()]:
                inner = self.copy(world)
                inner.vars[node.name] = value
                out_worlds += self.body(node.body, [inner])
                if self.budget.cheap:  # one value per loop from here on
                    break
            return out_worlds
        if isinstance(node, Branches):
            out: list[World] = [] if node.exhaustive else [world]
            for body in node.bodies:
                out += self.body(body, [self.copy(world)])
            return out
        return self.command(node, world)

    def expand(self, word: Word, world: World) -> list[Field]:
        return expand_word(word, world, self.budget)

    def body(self, nodes: list[Node], worlds: list[World]) -> list[World]:
        if self.level >= MAX_NESTING:  # nested blocks through function calls
            self.budget.note("nesting")
            return worlds
        saved = self.worlds
        self.worlds = worlds
        self.level += 1
        try:
            self.run(nodes)
        finally:
            self.level -= 1
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
        if name in self.functions and self.depth < MAX_CALL_DEPTH and self.may_enter(name):
            self.call_sites.append((cmd.first_line, cmd.last_line))
            try:
                return self.call(self.functions[name], rest[1:], world)
            finally:
                self.call_sites.pop()
        if not any(self.may_launch(part, world) for word in rest for part in word.parts):
            return [world]
        fields: list[Field] = []
        cut = 0
        for k, word in enumerate(rest):
            fields += self.expand(word, world)
            if len(fields) > MAX_ARGS:
                cut = len(fields) - MAX_ARGS + len(rest) - k - 1
                del fields[MAX_ARGS:]
                break
        texts = [f.text for f in fields]
        detected = detect(texts)
        if not detected and (inner := shell_string(texts)) is not None:
            self.nested(fields[inner], _remote(texts[:inner]), world)
            return [world]
        if detected:
            prefix = self.copy(world)
            for k, word in assigns:
                self.assign(prefix, word, cmd.arrays.get(k), export=True)
            env = {
                n: text_of(v)
                for n, v in prefix.vars.items()
                if n in prefix.exported and not isinstance(v, list)
            }
            self.budget.spend("chars", sum(len(t) for t in env.values()))
            positions = {n: p for n, p in prefix.assigned_at.items() if n in env}
            key = (
                cmd.first_line,
                tuple((f.text, tuple(f.unknown), f.only_unknown) for f in fields),
                tuple(env.items()),
            )
            if key not in self.seen:  # the first of equal launches is the one reported
                self.budget.spend("steps", FOUND_COST)
                self.seen.add(key)
                calls = [n for a, b in self.call_sites for n in range(a, b + 1)]
                found = Found(fields, env, positions, cmd.first_line, cmd.last_line, calls, cut)
                found.remote = _remote(texts[: detected[1]])
                self.found.append(found)
        return [world]

    def nested(self, script: Field, remote: bool, world: World) -> None:
        """Run the command string of ``bash -c STRING`` (in a container's fresh environment
        when ``remote``); the launches it holds are the file's, at the string's place."""
        before = len(self.found)
        try:
            nodes = parse(tokenize(script.text, self.budget))
        except ShellSyntaxError:
            return
        self.body(nodes, [World() if remote else self.copy(world)])
        at = script.position
        for found in self.found[before:]:
            found.remote = found.remote or remote
            for f in found.fields:
                p = f.position
                column = at.column + p.column - 1 if p.line == 1 else p.column
                f.position = Position(at.line + p.line - 1, column)
            found.first_line = found.last_line = at.line

    def may_enter(self, name: str) -> bool:
        """Whether to run a function's body: always, or once each in the cheap mode."""
        if not self.budget.cheap:
            return True
        if name in self.entered:
            return False
        self.entered.add(name)
        return True

    def call(self, body: list[Node], args: list[Word], world: World) -> list[World]:
        params = [_as_value(f) for word in args for f in self.expand(word, world)]
        inner = self.copy(world)
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
            values = [_as_value(f) for item in items for f in self.expand(item, world)]
            old = world.vars.get(name)
            world.vars[name] = (list(old) if isinstance(old, list) and append else []) + values
            return
        rest = Lit(first.text[m.end() :], first.line, first.column + m.end(), first.quoted)
        parts = [rest, *word.parts[1:]]
        value = tuple(p for seg in expand_parts(parts, world, True, self.budget) for p in seg)
        old = world.vars.get(name)
        if append and old is not None:
            if isinstance(old, list):
                world.vars[name] = [*old, value]
                return
            value = old + value
        world.vars[name] = stored(name, value, self.budget, word.line, word.column)

    def may_launch(self, part: Part, world: World) -> bool:
        """Whether expanding this part could yield an SGLang command or change a variable."""
        if isinstance(part, Lit):
            return "sglang" in part.text
        if not isinstance(part, Var):
            return False
        if part.op in (":=", "="):
            return True
        value = lookup(world, part.name, part.index)
        values = value if isinstance(value, list) else [value] if value is not None else []
        for v in values:
            text = text_of(v)
            self.budget.spend("chars", len(text))
            if "sglang" in text:
                return True
        return any(self.may_launch(p, world) for p in part.arg)


SHELLS = ("bash", "sh", "zsh", "dash", "ash")
#: Commands that run their arguments in a container (``docker run/exec``, ``kubectl exec``).
CONTAINER_RUNNERS = ("docker", "podman", "nerdctl", "kubectl", "oc")


def shell_string(texts: list[str]) -> int | None:
    """The index of STRING in ``... bash [-l] -c STRING ...`` (a wrapper's shell), or None."""
    for i, text in enumerate(texts[:-2]):
        if text.rsplit("/", 1)[-1] not in SHELLS:
            continue
        for j in range(i + 1, min(i + 4, len(texts) - 1)):
            opt = texts[j]
            if re.fullmatch(r"-[a-z]*c[a-z]*", opt):
                return j + 1
            if not opt.startswith("-"):
                break
    return None


def _remote(texts: list[str]) -> bool:
    return any(t.rsplit("/", 1)[-1] in CONTAINER_RUNNERS for t in texts)


def _as_value(f: Field) -> Value:
    """A field stored as a value (an array item, a function argument)."""
    unknown = f.unknown[0] if f.unknown else None
    return (Piece(f.text, f.position.line, f.position.column, unknown=unknown),)


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
    named: set[int] = set()
    gaps: set[int] = set()
    flags: dict[str, list[str]] = {}  # variable -> the options whose value it supplies
    for f in found.fields[first:]:
        for name in f.unknown:
            if not name.startswith(OVER):  # INFO004 says why, not INFO002
                unresolved.setdefault(name, where(f.position) if where else f.position)
        if f.only_unknown and not (
            args and _takes_value(args[-1]) and len(args) - 1 not in unresolved_fields
        ):
            gaps.add(len(args))  # any number of words may stand here
            continue
        if f.unknown:
            unresolved_fields.add(len(args))
            option = args[-1] if args and not f.text.startswith("-") else None
            if name_decided(f.text, f.decided):
                named.add(len(args))
                option = f.text.split("=", 1)[0]
            for name in f.unknown:
                if option:
                    flags.setdefault(name, []).append(option)
        args.append(f.text)
        positions.append(where(f.position) if where else f.position)
    start = found.fields[0].position if found.fields else Position()
    start = where(start) if where else start
    launch = make_launch(
        path,
        kind,
        args,
        positions,
        start,
        found.env,
        in_container or found.remote,
        positional,
        launcher=launcher_of(texts, first),
    )
    launch.first_line, launch.last_line = (
        (where(Position(found.first_line, 1)).line, where(Position(found.last_line, 1)).line)
        if where
        else (found.first_line, found.last_line)
    )
    launch.env_positions = {} if where else found.env_positions
    launch.call_lines = [] if where else found.call_lines
    launch.unresolved = unresolved
    launch.unresolved_flags = {n: v for n, v in flags.items() if n in unresolved}
    if found.cut:
        launch.incomplete = (
            f"the launch line has more than {MAX_ARGS:,} arguments ({found.cut:,} more were "
            f"read); only the first {MAX_ARGS:,} are checked"
        )
    forget_unresolved(launch, unresolved_fields, named, gaps)
    return launch


def name_decided(text: str, decided: int | None) -> bool:
    """Whether an argv item that holds an unknown value still names its option: the unknown
    part comes after ``--name=`` (``--cuda-graph-max-bs=$BS``)."""
    return decided is not None and text.startswith("-") and "=" in text[:decided]


def forget_unresolved(
    launch: Launch,
    indexes: set[int],
    named: set[int] | None = None,
    gaps: set[int] | None = None,
) -> None:
    """Issues and values that come from unknown words are not findings: drop them.

    Only values wait for the variables: an option's name is decided whatever its value holds
    (argparse matches names, prefixes and ambiguity before it reads a value), so issues about
    the name stay. ``indexes`` are the argv items holding an unknown part, ``named`` those of
    them whose option name is literal (``--flag=$V``), ``gaps`` the items that follow a dropped
    unknown word (which may have been any number of words: an option taking them as values).
    """
    named = named or set()
    gaps = gaps or set()
    launch.held = (indexes, named, gaps)
    if not indexes and not gaps:
        return
    parsed = launch.parsed
    texts = {repr(launch.args[i]) for i in indexes}

    def waits(iss: ArgvIssue) -> bool:
        if iss.kind == "value":  # a value, a count of values, a type: all from the variable
            return (
                iss.index in indexes
                or iss.index + 1 in indexes
                or iss.index + 1 in gaps
                or any(t in iss.message for t in texts)
            )
        if iss.token.startswith("-"):  # a name: decided unless the name itself is unknown
            return iss.index in indexes and iss.index not in named
        return iss.index in indexes or iss.index in gaps  # a bare word: maybe a value

    parsed.issues = [iss for iss in parsed.issues if not waits(iss)]
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
    budget: Budget | None = None,
) -> list[Launch]:
    """Launches in a shell script or command string.

    ``where`` maps positions in ``text`` to positions in the file (a command embedded in
    YAML); ``base`` reports every position there instead. ``budget`` is the file's (shared by
    the commands of one YAML file); a fresh one when not given.
    """
    if where is None and base is not None:
        at = base
        where = lambda _: at  # noqa: E731
    budget = budget or Budget()
    evaluator = Evaluator(env or {}, budget)
    with suppress(Exhausted):  # the launches found so far are linted; each carries the reason
        evaluator.run(parse(tokenize(text, budget)))
    out: list[Launch] = []
    seen: set[tuple[int, tuple[str, ...]]] = set()
    reason = budget.reason()
    for found in evaluator.found:
        launch = to_launch(path, found, where, in_container)
        if launch is None:
            continue
        key = (found.first_line, tuple(launch.args))
        if key not in seen:
            seen.add(key)
            if reason is not None:
                launch.incomplete = "; ".join(filter(None, [reason, launch.incomplete]))
            out.append(launch)
    return out
