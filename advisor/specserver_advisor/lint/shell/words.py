"""Shell words with their origins: the tokenizer under the launch-script evaluator.

Splits a script into words and operators the way a POSIX shell reads them (quotes, backslash
escapes, line continuations, comments, here-documents skipped), keeping every word as parts:
literal text (with its line and column), ``$V``/``${V...}`` expansions, ``$(( ))`` arithmetic
and command substitutions. At most ``MAX_WORDS`` words are read (the budget records it when a
file has more) and ``${V:-${W:-...}}`` is read ``MAX_EXPANSION_NESTING`` deep (deeper is an
unknown value). Pure; ``evaluate.py`` evaluates the words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from specserver_advisor.lint.shell.budget import MAX_EXPANSION_NESTING, MAX_WORDS, Budget

OPERATORS = ("&&", "||", ";;", ";&", ";", "&", "|", "(", ")", "\n")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
BLANKS = re.compile(r"[ \t\r]+")
REDIRECT = re.compile(r"&>>?|<<<|<>|>>|>&|<&|>\||[<>]")
DUP_TARGET = re.compile(r"[0-9]+-?|-")
OPERATOR = re.compile(r"&&|\|\||;;|;&|[;&|()\n]")
#: Runs of characters with no special meaning in double quotes, and inside $( ) / ${ }.
QUOTED_PLAIN = re.compile(r'[^"\\$`]+')
#: A run of characters with no special meaning outside quotes.
PLAIN = re.compile(r"[^\s;&|()<>\\'\"$`]+")


class ShellSyntaxError(ValueError):
    """Unterminated quote or expansion; carries the 1-based line and column."""

    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(f"{message} (line {line}, column {column})")
        self.line, self.column = line, column


@dataclass(frozen=True)
class Lit:
    """Literal text starting at (line, column); ``quoted``: not subject to splitting."""

    text: str
    line: int
    column: int
    quoted: bool


@dataclass(frozen=True)
class Var:
    """``$NAME`` or ``${NAME<op><arg>}`` (op one of '', ':-', '-', ':=', '=', ':+', '+', '#')."""

    name: str
    op: str
    arg: tuple[Lit | Var | Arith | Subst, ...]
    line: int
    column: int
    quoted: bool
    index: str = ""  # "@" or "*" for ${NAME[@]}


@dataclass(frozen=True)
class Arith:
    """``$(( expr ))``."""

    expr: str
    line: int
    column: int


@dataclass(frozen=True)
class Subst:
    """``$( ... )`` or backticks: the output of a command, unknown to a linter."""

    text: str
    line: int
    column: int


Part = Lit | Var | Arith | Subst


@dataclass
class Word:
    """One shell word (or an operator, with ``op`` set)."""

    parts: list[Part] = field(default_factory=list)
    line: int = 1
    column: int = 1
    op: str = ""
    #: ``NAME=(`` array assignment opened right after this word.
    glued_paren: bool = False

    def literal(self) -> str | None:
        """The word's text when it has no expansions."""
        parts = self.parts
        if len(parts) == 1:
            only = parts[0]
            return only.text if isinstance(only, Lit) else None
        if all(isinstance(p, Lit) for p in parts):
            return "".join(p.text for p in parts if isinstance(p, Lit))
        return None

    def unquoted_literal(self) -> str | None:
        """The text when the word is plain unquoted literal (keywords, operators-like words)."""
        parts = self.parts
        if len(parts) == 1:
            only = parts[0]
            return only.text if isinstance(only, Lit) and not only.quoted else None
        if all(isinstance(p, Lit) and not p.quoted for p in parts):
            return self.literal()
        return None


class _Reader:
    def __init__(self, text: str, nesting: int = 0) -> None:
        self.text = text
        self.nesting = nesting
        self.i = 0
        self.line = 1
        self.col = 1
        self.heredocs: list[tuple[str, bool]] = []
        #: Expansions and quoted strings read (``$``, backquotes, quotes): a word of 1,000,000
        #: ``$`` is one word.
        self.expansions = 0

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.text[j] if j < len(self.text) else ""

    def take(self, n: int = 1) -> str:
        out = self.text[self.i : self.i + n]
        newlines = out.count("\n")
        if newlines:
            self.line += newlines
            self.col = len(out) - out.rfind("\n")
        else:
            self.col += len(out)
        self.i += len(out)
        return out

    def error(self, message: str, line: int, col: int) -> ShellSyntaxError:
        return ShellSyntaxError(message, line, col)


#: The characters a word cannot start with (everything ``_tokens`` checks before ``_word``).
_NOT_WORD_START = frozenset("\\ \t\r#\n<>&;|()")


def tokenize(text: str, budget: Budget | None = None) -> list[Word]:
    """Words and operators (``\\n`` included) of a whole script, the first ``MAX_WORDS``
    (and up to the ``MAX_WORDS``-th expansion)."""
    r = _Reader(text.replace("\r\n", "\n"))  # scripts saved with CRLF line ends
    out: list[Word] = []
    try:
        _tokens(r, out, budget)
    except _Cut:
        if budget is not None:
            budget.note("file expansions")
    return out


def _tokens(r: _Reader, out: list[Word], budget: Budget | None) -> None:
    last_end = -1
    while r.i < len(r.text):
        if len(out) >= MAX_WORDS:
            if budget is not None:
                budget.note("file words")
            break
        ch = r.text[r.i]
        if ch not in _NOT_WORD_START:  # the common case: a word
            word = _word(r)
            last_end = r.i
            if r.peek() == "(" and word.parts and _ends_with_assign(word):
                word.glued_paren = True
            out.append(word)
            continue
        if ch == "\\" and r.peek(1) == "\n":
            r.take(2)
            continue
        if ch in " \t\r":
            blanks = BLANKS.match(r.text, r.i)
            assert blanks is not None
            r.col += blanks.end() - r.i  # no newline among blanks: only the column moves
            r.i = blanks.end()
            continue
        if ch == "#":
            end = r.text.find("\n", r.i)
            r.take((end if end >= 0 else len(r.text)) - r.i)
            continue
        if ch == "\n":
            out.append(Word(line=r.line, column=r.col, op="\n"))
            r.take()
            _skip_heredocs(r)
            continue
        if ch == "<" and r.peek(1) == "<" and r.peek(2) != "<":
            r.take(2)
            strip = r.peek() == "-"
            if strip:
                r.take()
            while r.peek() in (" ", "\t"):
                r.take()
            word = _word(r)
            delim = "".join(p.text for p in word.parts if isinstance(p, Lit))
            r.heredocs.append((delim, strip))
            continue
        if ch in "<>" or r.text.startswith("&>", r.i):
            _redirection(r, out, last_end)
            continue
        m = OPERATOR.match(r.text, r.i)
        op = m.group(0) if m else None
        if op is not None:
            out.append(Word(line=r.line, column=r.col, op=op))
            r.take(len(op))
            continue
        word = _word(r)
        last_end = r.i
        if r.peek() == "(" and word.parts and _ends_with_assign(word):
            word.glued_paren = True
        out.append(word)
    return None


def _redirection(r: _Reader, out: list[Word], last_end: int) -> None:
    """Skip a redirection and its target (``> f``, ``2>&1``, ``&> f``, ``<<<``); a process
    substitution ``<( )`` becomes a word whose value is unknown."""
    line, col = r.line, r.col
    if r.text[r.i] in "<>" and r.peek(1) == "(":
        r.take(2)
        out.append(Word([Subst(_balanced(r, "(", ")", line, col), line, col)], line, col))
        return
    if out and last_end == r.i and (out[-1].unquoted_literal() or "x").isdigit():
        out.pop()  # the file descriptor number of "2>"
    m = REDIRECT.match(r.text, r.i)
    r.take(len(m.group(0)) if m else 1)
    if m and m.group(0).endswith("&") and DUP_TARGET.match(r.text, r.i):
        r.take(len(DUP_TARGET.match(r.text, r.i).group(0)))  # type: ignore[union-attr]
        return
    while r.peek() in (" ", "\t"):
        r.take()
    if r.peek() and r.peek() not in "\n;&|()":
        _word(r)  # the target file


def _ends_with_assign(word: Word) -> bool:
    text = word.unquoted_literal()
    return text is not None and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*\+?=", text) is not None


def _skip_heredocs(r: _Reader) -> None:
    while r.heredocs:
        delim, strip = r.heredocs.pop(0)
        while r.i < len(r.text):
            end = r.text.find("\n", r.i)
            line = r.text[r.i : end if end >= 0 else len(r.text)]
            r.take(len(line) + (1 if end >= 0 else 0))
            if (line.lstrip("\t") if strip else line) == delim:
                break


def _word(r: _Reader) -> Word:
    word = Word(line=r.line, column=r.col)
    parts = word.parts
    buf: list[str] = []  # unquoted literal text since (line, col)
    line, col = r.line, r.col
    text = r.text
    while r.i < len(text):
        ch = text[r.i]
        if ch in " \t\r\n;&|()<>":
            break
        if ch == "\\":
            if r.peek(1) == "\n":
                r.take(2)
                continue
            if not buf:
                line, col = r.line, r.col
            r.take()
            buf.append(r.take())
            continue
        if ch in "'\"$`" and buf:
            parts.append(Lit("".join(buf), line, col, False))
            buf = []
        if ch == "'":
            _count(r)
            at_line, at_col = r.line, r.col
            r.take()
            end = text.find("'", r.i)
            if end < 0:
                raise r.error("unterminated single quote", at_line, at_col)
            lit_line, lit_col = r.line, r.col
            parts.append(Lit(r.take(end - r.i), lit_line, lit_col, True))
            r.take()
            continue
        if ch == '"':
            _count(r)
            _double_quoted(r, word)
            continue
        if ch in "$`":
            parts.append(_expansion(r, quoted=False))
            continue
        if not buf:
            line, col = r.line, r.col
        plain = PLAIN.match(text, r.i)
        if plain is None:
            buf.append(r.take())
        else:  # no newline in a plain run: only the column moves
            buf.append(plain.group(0))
            r.col += plain.end() - r.i
            r.i = plain.end()
    if buf:
        parts.append(Lit("".join(buf), line, col, False))
    return word


def _double_quoted(r: _Reader, word: Word) -> None:
    line, col = r.line, r.col
    r.take()
    buf: list[str] = []
    start = (r.line, r.col)
    while True:
        ch = r.peek()
        if ch == "":
            raise r.error("unterminated double quote", line, col)
        if ch == '"':
            r.take()
            break
        if ch == "\\" and r.peek(1) in '$`"\\\n':
            r.take()
            nxt = r.take()
            if nxt != "\n":
                if not buf:
                    start = (r.line, r.col - 1)
                buf.append(nxt)
            continue
        nxt = r.peek(1)
        special = bool(nxt) and nxt in "{(@*#?$!0123456789"
        if ch in "$`" and (ch == "`" or special or NAME.match(nxt or "-")):
            if buf:
                word.parts.append(Lit("".join(buf), start[0], start[1], True))
                buf = []
            word.parts.append(_expansion(r, quoted=True))
            start = (r.line, r.col)
            continue
        if not buf:
            start = (r.line, r.col)
        plain = QUOTED_PLAIN.match(r.text, r.i)
        buf.append(r.take(len(plain.group(0)) if plain else 1))
    if buf or not word.parts:
        word.parts.append(Lit("".join(buf), start[0], start[1], True))


#: What ``_balanced`` stops at: an escape (two characters), and the pair it balances.
_BALANCE_STOPS = {
    "(": re.compile(r"\\.|[()]", re.S),
    "{": re.compile(r"\\.|[{}]", re.S),
}


def _balanced(r: _Reader, open_: str, close: str, line: int, col: int) -> str:
    """The text up to the ``close`` that balances an ``open_`` already read (escapes skipped),
    in one regular-expression scan (per character, 2 MB of ``$(`` took 2 s of CPU)."""
    depth = 1
    for m in _BALANCE_STOPS[open_].finditer(r.text, r.i):
        ch = m.group()
        if ch == open_:
            depth += 1
        elif ch == close:
            depth -= 1
            if depth == 0:
                body = r.take(m.start() - r.i)
                r.take()
                return body
    raise r.error(f"unterminated {open_}", line, col)


class _Cut(Exception):
    """The file has more than ``MAX_WORDS`` expansions and quoted strings: the rest is not
    read."""


def _count(r: _Reader) -> None:
    """One more expansion or quoted string: each is a part of its word, and a word of
    1,000,000 of them (``$$$...``, ``"'"'...``) is still one word."""
    r.expansions += 1
    if r.expansions > MAX_WORDS:
        raise _Cut


def _expansion(r: _Reader, quoted: bool) -> Part:
    _count(r)
    line, col = r.line, r.col
    if r.text[r.i] == "$" and (name := NAME.match(r.text, r.i + 1)):
        r.col += name.end() - r.i  # ``$NAME``, the common case: no newline to count
        r.i = name.end()
        return Var(name.group(0), "", (), line, col, quoted)
    if r.peek() == "`":
        r.take()
        end = r.text.find("`", r.i)
        if end < 0:
            raise r.error("unterminated backquote", line, col)
        return Subst(r.take(end - r.i + 1)[:-1], line, col)
    r.take()  # $
    if r.text.startswith("((", r.i):
        r.take(2)
        body = _balanced(r, "(", ")", line, col)
        if r.peek() != ")":
            raise r.error("unterminated $((", line, col)
        r.take()
        return Arith(body, line, col)
    if r.peek() == "(":
        r.take()
        return Subst(_balanced(r, "(", ")", line, col), line, col)
    if r.peek() == "{":
        r.take()
        return _braced(r, _balanced(r, "{", "}", line, col), line, col, quoted)
    m = NAME.match(r.text, r.i)
    if m:
        r.take(len(m.group(0)))
        return Var(m.group(0), "", (), line, col, quoted)
    if r.peek() and r.peek() in "@*#?$!0123456789-":
        return Var(r.take(), "", (), line, col, quoted)
    return Lit("$", line, col, quoted)


def _braced(r: _Reader, body: str, line: int, col: int, quoted: bool) -> Part:
    if body.startswith("#") and NAME.fullmatch(body[1:]):
        return Var(body[1:], "#", (), line, col, quoted)
    m = re.match(r"([A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?])(\[([@*]|[0-9]+)\])?", body)
    if not m or r.nesting >= MAX_EXPANSION_NESTING:
        return Subst("${" + body + "}", line, col)
    name, index = m.group(1), m.group(3) or ""
    rest = body[m.end() :]
    op = next((o for o in (":-", ":=", ":+", "-", "=", "+") if rest.startswith(o)), None)
    if op is None:
        if rest:
            return Subst("${" + body + "}", line, col)  # ${V%...}, ${V/...}: not modelled
        return Var(name, "", (), line, col, quoted, index)
    arg_text = rest[len(op) :]
    quoted_arg = arg_text if any(q in arg_text for q in "'\"") else f'"{arg_text}"'
    arg = _word(_Reader(quoted_arg, r.nesting + 1)).parts if arg_text else []
    shifted = tuple(
        Lit(p.text, line, col, quoted or p.quoted) if isinstance(p, Lit) else p for p in arg
    )
    return Var(name, op, shifted, line, col, quoted, index)
