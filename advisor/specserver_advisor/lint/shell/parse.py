"""The shell script structure the launch evaluator walks: commands, ``if``/``case`` branches,
loops, groups and function definitions, parsed from ``shellwords`` tokens; blocks nested deeper
than ``MAX_NESTING`` are a ``ShellSyntaxError`` (no launch script nests a hundred levels). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from specserver_advisor.lint.shell.budget import MAX_NESTING
from specserver_advisor.lint.shell.words import ShellSyntaxError, Word

SEPARATORS = ("\n", ";", "&", "&&", "||", "|")


@dataclass
class Command:
    """A simple command; ``arrays`` maps a word index (``NAME=(``) to the array's items."""

    words: list[Word]
    arrays: dict[int, list[Word]] = field(default_factory=dict)
    first_line: int = 1
    last_line: int = 1


@dataclass
class Branches:
    """``if``/``case``: every body may run; ``exhaustive`` when one of them always runs."""

    bodies: list[list[Node]]
    exhaustive: bool


@dataclass
class Block:
    """A loop body, group or subshell: run once."""

    body: list[Node]


@dataclass
class Loop:
    """``for NAME in WORDS; do BODY; done``: the body runs once per word."""

    name: str
    items: list[Word]
    body: list[Node]


@dataclass
class Function:
    """``name() { ... }``."""

    name: str
    body: list[Node]


Node = Command | Branches | Block | Loop | Function


class _Parser:
    def __init__(self, tokens: list[Word]) -> None:
        self.tokens = tokens
        self.i = 0
        self.level = 0

    def peek(self, k: int = 0) -> Word | None:
        j = self.i + k
        return self.tokens[j] if j < len(self.tokens) else None

    def keyword(self) -> str | None:
        if self.i >= len(self.tokens):
            return None
        w = self.tokens[self.i]
        return None if w.op else w.unquoted_literal()

    def op(self) -> str:
        return self.tokens[self.i].op if self.i < len(self.tokens) else ""

    def skip_separators(self) -> None:
        tokens = self.tokens
        while self.i < len(tokens) and tokens[self.i].op in SEPARATORS:
            self.i += 1

    def expect(self, word: str) -> None:
        self.skip_separators()
        if self.keyword() == word:
            self.i += 1

    def parse_list(self, stops: tuple[str, ...]) -> list[Node]:
        nodes: list[Node] = []
        while True:
            self.skip_separators()
            w = self.peek()
            if w is None or self.op() in (";;", ";&", ")") or self.keyword() in stops:
                return nodes
            node = self.statement()
            if node is not None:
                nodes.append(node)

    def statement(self) -> Node | None:
        if self.level >= MAX_NESTING:
            w = self.peek()
            line, column = (w.line, w.column) if w is not None else (1, 1)
            raise ShellSyntaxError(f"blocks nested deeper than {MAX_NESTING} levels", line, column)
        self.level += 1
        try:
            return self._statement()
        finally:
            self.level -= 1

    def _statement(self) -> Node | None:
        kw = self.keyword()
        if kw == "if":
            return self.if_()
        if kw == "case":
            return self.case()
        if kw in ("for", "while", "until", "select"):
            loop = self.loop_header() if kw == "for" else None
            self.skip_to("do")
            body = self.parse_list(("done",))
            self.expect("done")
            if loop is not None:
                return Loop(loop[0], loop[1], body)
            return Block(body)
        if kw == "function":
            self.i += 1
            name = (self.keyword() or "").removesuffix("()")
            self.i += 1
            if self.op() == "(" and (nxt := self.peek(1)) is not None and nxt.op == ")":
                self.i += 2
            return Function(name, self.compound())
        if kw in ("{", "!"):
            if kw == "{":
                return Block(self.compound())
            self.i += 1
            return None
        if self.op() == "(":
            self.i += 1
            body = self.parse_list(())
            if self.op() == ")":
                self.i += 1
            return Block(body)
        nxt, after = self.peek(1), self.peek(2)
        if (
            kw
            and nxt is not None
            and nxt.op == "("
            and after is not None
            and after.op == ")"
            and (w := self.peek()) is not None
            and not w.glued_paren
        ):
            self.i += 3
            return Function(kw, self.compound())
        return self.command()

    def loop_header(self) -> tuple[str, list[Word]] | None:
        """``for NAME in WORDS``: the name and the words (None for other forms)."""
        name, keyword = self.peek(1), self.peek(2)
        if name is None or keyword is None or keyword.unquoted_literal() != "in":
            return None
        self.i += 3
        items = []
        while (w := self.peek()) is not None and not w.op and self.keyword() != "do":
            items.append(w)
            self.i += 1
        return (name.unquoted_literal() or "", items)

    def skip_to(self, word: str) -> None:
        while self.peek() is not None and self.keyword() != word:
            self.i += 1
        self.i += 1

    def compound(self) -> list[Node]:
        self.skip_separators()
        if self.keyword() == "{":
            self.i += 1
            body = self.parse_list(("}",))
            self.expect("}")
            return body
        node = self.statement()
        return [node] if node is not None else []

    def if_(self) -> Branches:
        bodies: list[list[Node]] = []
        exhaustive = False
        self.i += 1  # if
        while True:
            self.parse_list(("then",))  # the condition
            self.expect("then")
            bodies.append(self.parse_list(("elif", "else", "fi")))
            kw = self.keyword()
            self.i += 1
            if kw == "elif":
                continue
            if kw == "else":
                bodies.append(self.parse_list(("fi",)))
                exhaustive = True
                self.expect("fi")
            return Branches(bodies, exhaustive)

    def case(self) -> Branches:
        self.i += 2  # case WORD
        self.expect("in")
        bodies: list[list[Node]] = []
        exhaustive = False
        while True:
            self.skip_separators()
            if self.peek() is None or self.keyword() == "esac":
                self.i += 1
                return Branches(bodies, exhaustive)
            if self.op() == "(":
                self.i += 1
            patterns = []
            while self.peek() is not None and self.op() != ")":
                patterns.append(self.keyword())
                self.i += 1
            self.i += 1
            exhaustive = exhaustive or "*" in patterns
            bodies.append(self.parse_list(("esac",)))
            if self.op() in (";;", ";&"):
                self.i += 1

    def command(self) -> Command:
        cmd = Command([])
        while (w := self.peek()) is not None and not (w.op and w.op != "("):
            if w.op == "(":  # stray parenthesis: not a construct we model
                self.i += 1
                continue
            self.i += 1
            cmd.words.append(w)
            if w.glued_paren and self.op() == "(":
                self.i += 1
                items: list[Word] = []
                while (item := self.peek()) is not None and item.op != ")":
                    if not item.op:
                        items.append(item)
                    self.i += 1
                self.i += 1
                cmd.arrays[len(cmd.words) - 1] = items
        lines = [w.line for w in cmd.words] + [
            i.line for items in cmd.arrays.values() for i in items
        ]
        cmd.first_line, cmd.last_line = (min(lines), max(lines)) if lines else (1, 1)
        return cmd


def parse(tokens: list[Word]) -> list[Node]:
    """The script's top-level nodes."""
    parser = _Parser(tokens)
    nodes: list[Node] = []
    while parser.peek() is not None:
        nodes += parser.parse_list(())
        if parser.peek() is not None:  # a stray ')' or ';;' at top level
            parser.i += 1
    return nodes
