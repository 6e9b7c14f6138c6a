"""Find SGLang launches in any text file, each container form read by its own syntax.

A launch is found by what it is: ``python -m sglang.launch_server ...`` (or a wrapper module),
``sglang serve ...``, an argv list that holds one, ``sglang.Engine(...)`` / ``ServerArgs(...)``
keyword arguments (``model_path=`` becomes ``--model-path``), a flag map under any key of a
YAML/JSON document, and SGLang's cookbook model YAML (its source form, configurations crossed
with model families, and its generated form). The containers are read by their own syntax:
Markdown fences and inline code, Jupyter notebook code cells (JSON), Python source (``ast``,
never executed), Dockerfile ``CMD``/``ENTRYPOINT``/``RUN``, Makefile recipes, shell, YAML and
JSON. Every launch keeps the line and column it has in the file the user opened, and names the
form it was read from (``Launch.form``: ``notebook cell 7``, ``README.md fence at line 40``,
``cookbook configuration Qwen3-8B H200/default``). A file where no launch can be taken gets a
``Scan.why`` the engine reports as INFO006 (never "invalid YAML" for a file that is not YAML).
Inputs are bounded before parsing (``MAX_*``). Pure: the caller reads the file.
"""

from __future__ import annotations

import ast
import json
import re
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from specserver_advisor.bounded import InputLimitError, json_value
from specserver_advisor.lint.argv import detect, make_launch
from specserver_advisor.lint.model import Launch, Position
from specserver_advisor.lint.shell.budget import CAPPED, MAX_FILE_LAUNCHES, Budget
from specserver_advisor.lint.shell.evaluate import from_shell
from specserver_advisor.lint.shell.words import ShellSyntaxError
from specserver_advisor.lint.sources import (
    InputError,
    YamlDocuments,
    from_yaml,
    known_document,
    launch_from_items,
)

#: A launch written out: a server or benchmark module run by Python, or ``sglang serve``.
LAUNCH = re.compile(
    r"\bpython[0-9.]*\s+-m\s+(?:sglang\.launch_server|sglang_router\.launch_server|"
    r"dynamo\.sglang|sglang\.bench_serving|sglang\.benchmark\.serving)\b|\bsglang\s+serve\b"
)
#: Bounds on what one file may make the finder do (the file's size is bounded by the engine).
MAX_SNIPPETS = 400
MAX_CELLS = 2000
MAX_NODES = 100_000
MAX_PYTHON_BYTES = 2 * 1024 * 1024
#: Characters of a file read as text (Markdown, Python, Dockerfile, Makefile, plain text) or
#: of a notebook's code cells: finding launches in such text costs microseconds a character
#: (launch lines, ``Engine(...)`` calls, fences), so a file past this is not read and says so
#: (INFO006); at this size the costliest text known stays under a second of CPU
#: (scripts/bench-hostile). YAML and JSON are read up to the engine's file limit, and shell
#: scripts under the shell budget (``shell.budget``; a script of ``$`` is not bounded by it).
MAX_TEXT_CHARS = 64 * 1024
#: Python callables whose keyword arguments are SGLang's server arguments.
ENGINE_CALLS = ("Engine", "ServerArgs", "Runtime")
SHELL_LANGS = ("", "bash", "sh", "shell", "console", "zsh", "shell-session", "text", "bash-session")
PYTHON_LANGS = ("python", "py", "python3", "ipython", "ipython3", "pycon")
TREE_LANGS = ("yaml", "yml", "json", "jsonc")
DOCKER_EXT = (".dockerfile", ".containerfile")
MARKDOWN_EXT = (".md", ".markdown", ".mdx", ".rst", ".txt")
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*\{?\.?([\w+-]*)")
INLINE = re.compile(r"(`+)(.+?)\1")

Where = Callable[[Position], Position]


@dataclass
class Scan:
    """What one file held: its launches, its SpecServer documents, the form it was read as,
    and why no launch could be taken (when none was)."""

    form: str
    launches: list[Launch] = field(default_factory=list)
    specservers: list[Any] = field(default_factory=list)
    why: str = ""


def shown(text: str, limit: int = 60) -> str:
    """Text from the input as it may be printed: control characters escaped, cut short."""
    out = "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode() for ch in text)
    return out if len(out) <= limit else out[: limit - 3] + "..."


def form_of(name: str, text: str) -> str:
    """The container form a file is read as (by its name, else by its first line)."""
    base = PurePath(name).name
    lower = base.lower()
    if lower.endswith(".ipynb"):
        return "notebook"
    if lower.endswith(MARKDOWN_EXT):
        return "markdown"
    if lower.endswith((".py", ".pyw")):
        return "python"
    if lower in ("dockerfile", "containerfile") or lower.endswith(DOCKER_EXT):
        return "dockerfile"
    if lower.startswith(("dockerfile.", "containerfile.")):
        return "dockerfile"
    if lower in ("makefile", "gnumakefile") or lower.endswith(".mk"):
        return "makefile"
    if lower.endswith(".json"):
        return "json"
    if lower.endswith((".yaml", ".yml")):
        return "yaml"
    if lower.endswith((".sh", ".bash", ".zsh")):
        return "shell"
    first = next((ln for ln in text.splitlines() if ln.strip()), "")
    if first.startswith("#!") and "python" in first:
        return "python"
    if not first.startswith("#!") and (
        first.startswith(("---", "apiVersion:", "kind:", "services:")) or ": " in first
    ):
        return "yaml?"
    return "shell"


FORM_NAMES = {
    "notebook": "Jupyter notebook",
    "markdown": "Markdown",
    "python": "Python source",
    "dockerfile": "Dockerfile",
    "makefile": "Makefile",
    "json": "JSON document",
    "yaml": "YAML document",
    "yaml?": "YAML document",
    "shell": "shell script",
}


def capped(launches: list[Launch]) -> list[Launch]:
    """The first ``MAX_FILE_LAUNCHES`` launches; the last one kept says the rest were not
    read (INFO004)."""
    if len(launches) <= MAX_FILE_LAUNCHES:
        return launches
    kept = launches[:MAX_FILE_LAUNCHES]
    kept[-1].incomplete = _also(kept[-1].incomplete, CAPPED)
    return kept


def _also(reason: str | None, more: str) -> str:
    return f"{reason}; {more}" if reason else more


def _too_long(form: str, text: str) -> str:
    """Why a file read as text is not read (empty when it is short enough)."""
    if len(text) <= MAX_TEXT_CHARS:
        return ""
    return (
        f"{len(text):,} characters, over the {MAX_TEXT_CHARS:,} lint reads of a {form} "
        "(YAML and JSON are read whole); lint the launch on its own"
    )


def scan(name: str, text: str) -> Scan:
    """Every launch in one file's text (InputError: a YAML file that does not parse)."""
    form = form_of(name, text)
    out = Scan(FORM_NAMES[form])
    budget = Budget()
    base = shown(PurePath(name).name)
    if form not in ("notebook", "json", "yaml", "yaml?", "shell") and _too_long(out.form, text):
        out.why = _too_long(out.form, text)
    elif form == "notebook":
        out.launches, out.why = _notebook(name, text, budget)
    elif form == "markdown":
        out.launches = _markdown(name, base, text, budget)
    elif form == "python":
        out.launches, out.why = _python_file(name, text, budget)
    elif form == "dockerfile":
        out.launches = _dockerfile(name, text, budget)
    elif form == "makefile":
        out.launches = _makefile(name, text, budget)
    elif form in ("json", "yaml", "yaml?"):
        try:
            out.launches, out.specservers = tree_launches(name, text)
        except InputError:
            if form == "yaml":
                raise
            out.form = "text"
            out.why = _too_long(out.form, text)
            if not out.why:
                out.launches = _snippets(name, text, budget, lambda p: p)
    else:
        try:
            out.launches = from_shell(name, text, budget=budget)
        except ShellSyntaxError as exc:
            if name.endswith((".sh", ".bash", ".zsh")):
                raise InputError(f"cannot parse shell script: {exc}", exc.line, exc.column) from exc
            out.form = "text"
            out.launches = _snippets(name, text, budget, lambda p: p)  # no longer than a script
    if len(out.launches) > MAX_FILE_LAUNCHES:
        out.launches = capped(out.launches)
    for la in out.launches:
        _elided(la)
    if not out.launches and not out.specservers:
        out.why = f"read as {out.form}: {out.why}" if out.why else _why_none(out.form, text)
    return out


#: An argument written to stand for others in documentation (``python -m ... ...``).
PLACEHOLDER = re.compile(r"\.\.\.|…|\[(?:options|args|flags)\]|<(?:options|args|flags)>", re.I)
#: The longest text ``PLACEHOLDER`` matches whole (``[options]``).
PLACEHOLDER_CHARS = 9


def _elided(launch: Launch) -> None:
    """A launch that elides arguments (``...``): what it leaves out is not reported as an
    unknown argument, and the launch says it was not fully read (INFO004)."""
    held = {
        k
        for k, arg in enumerate(launch.args)
        if len(arg) <= PLACEHOLDER_CHARS and PLACEHOLDER.fullmatch(arg)
    }
    if not held:
        return
    launch.parsed.issues = [i for i in launch.parsed.issues if i.index not in held]
    launch.incomplete = launch.incomplete or "it elides arguments (`...`)"


def _why_none(form: str, text: str) -> str:
    mention = re.search(r"sglang", text, re.IGNORECASE)
    if mention is None:
        return f"read as {form}: it never names SGLang"
    line = text.count("\n", 0, mention.start()) + 1
    return (
        f"read as {form}: SGLang is named (first at line {line}) but no launch is written out "
        "(no `python -m sglang.launch_server`, `sglang serve`, argv list, Engine/ServerArgs "
        "call or flag map)"
    )


# ------------------------------------------------------------------------------ text snippets


def _shift(line0: int, col0: int = 0) -> Where:
    """Positions in a snippet that starts at 0-based line ``line0``, column ``col0``."""
    return lambda p: Position(line0 + p.line, p.column + (col0 if p.line == 1 else 0))


def _shell_snippet(
    path: str, text: str, where: Where, budget: Budget, env: dict[str, str] | None = None
) -> list[Launch]:
    try:
        return from_shell(path, text, env=env or {}, where=where, budget=budget)
    except ShellSyntaxError:
        return []


def _snippets(path: str, text: str, budget: Budget, where: Where) -> list[Launch]:
    """Launches written on lines of any text (with ``\\`` continuations): each tried from the
    start of its line (an environment prefix, ``docker run``), else from the launch itself."""
    lines = text.splitlines()
    out: list[Launch] = []
    i = 0
    count = 0
    while i < len(lines) and count < MAX_SNIPPETS:
        m = LAUNCH.search(lines[i])
        if m is None:
            i += 1
            continue
        count += 1
        j = i
        while lines[j].rstrip().endswith("\\") and j + 1 < len(lines):
            j += 1
        body = lines[i : j + 1]
        first = body[0]
        stripped = first.lstrip()
        prompt = len(first) - len(stripped)
        if stripped.startswith(("$ ", "# ", "> ")):
            prompt += 2
        found: list[Launch] = []
        for col in dict.fromkeys((prompt, m.start())):
            chunk = "\n".join([first[col:], *body[1:]])
            found = _shell_snippet(path, chunk, _relocate(where, _shift(i, col)), budget)
            if found:
                break
        out += found
        i = j + 1
    return out


def _relocate(outer: Where, inner: Where) -> Where:
    return lambda p: outer(inner(p))


# ------------------------------------------------------------------------------ Markdown


def _markdown(path: str, base: str, text: str, budget: Budget) -> list[Launch]:
    lines = text.splitlines()
    out: list[Launch] = []
    prose: list[int] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m is None:
            prose.append(i)
            i += 1
            continue
        indent, fence, lang = len(m.group(1)), m.group(2), m.group(3).lower()
        j = i + 1
        while j < len(lines) and not lines[j].lstrip().startswith(fence):
            j += 1
        block = [ln[indent:] if ln[:indent].strip() == "" else ln for ln in lines[i + 1 : j]]
        found = _block(path, "\n".join(block), lang, i + 1, indent, budget)
        _label(found, f"{base} fence at line {i + 1}")
        out += found
        i = j + 1
    for k in prose:
        line = lines[k]
        if not LAUNCH.search(line):
            continue
        spans = [s for s in INLINE.finditer(line) if LAUNCH.search(s.group(2))]
        for s in spans:
            found = _shell_snippet(path, s.group(2), _shift(k, s.start(2)), budget)
            _label(found, f"{base} inline code at line {k + 1}")
            out += found
        if not spans:  # an indented block or a bare line
            found = _snippets(path, line, budget, _shift(k))
            _label(found, f"{base} line {k + 1}")
            out += found
    return out


def _block(path: str, text: str, lang: str, line0: int, col0: int, budget: Budget) -> list[Launch]:
    """A fenced block read by its language."""
    where = _shift(line0, col0) if col0 else _shift(line0)
    if lang in PYTHON_LANGS:
        launches, _ = _python(path, text, budget, _line_map(where))
        return launches
    if lang in TREE_LANGS:
        try:
            launches, _ = tree_launches(path, text, where)
            return launches
        except InputError:
            return _snippets(path, text, budget, where)
    if lang in ("dockerfile", "docker"):
        return _dockerfile(path, text, budget, where)
    if lang in ("makefile", "make"):
        return _makefile(path, text, budget, where)
    if not LAUNCH.search(text):
        return []
    if lang in SHELL_LANGS and not re.search(r"^\s*[$>] ", text, re.MULTILINE):
        try:
            found = from_shell(path, text, where=where, budget=budget)
            if found:
                return found
        except ShellSyntaxError:
            pass
    return _snippets(path, text, budget, where)


def _label(launches: list[Launch], form: str) -> None:
    """Name the container a launch was read in, before the form inside it."""
    for la in launches:
        la.form = form if la.form is None else f"{form}, {la.form}"


# ------------------------------------------------------------------------------ Python


def _line_map(where: Where) -> Callable[[int, int], Position]:
    """(1-based line, 0-based column) in a Python text -> position in the file."""
    return lambda line, col: where(Position(line, col + 1))


def _python_file(path: str, text: str, budget: Budget) -> tuple[list[Launch], str]:
    launches, why = _python(path, text, budget, lambda line, col: Position(line, col + 1))
    return launches, why


def _python(
    path: str,
    text: str,
    budget: Budget,
    at: Callable[[int, int], Position],
    consts: dict[str, Any] | None = None,
) -> tuple[list[Launch], str]:
    """Launches in Python source, read with ``ast`` (never run): Engine/ServerArgs keyword
    arguments, argv lists, command strings (``subprocess``, ``os.system``, notebook helpers)."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_PYTHON_BYTES:
        return [], f"Python source over {MAX_PYTHON_BYTES} bytes, not parsed"
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        found = _snippets(path, text, budget, lambda p: at(p.line, p.column - 1))
        reason = getattr(exc, "msg", None) or str(exc)
        return found, f"Python that does not parse ({shown(str(reason))}), no launch on its lines"
    reader = _PythonReader(path, text, budget, at, consts if consts is not None else {})
    try:
        reader.visit(tree)
    except RecursionError:
        return reader.found, "Python nested too deep to read"
    return reader.found, ""


class _PythonReader(ast.NodeVisitor):
    def __init__(
        self,
        path: str,
        text: str,
        budget: Budget,
        at: Callable[[int, int], Position],
        consts: dict[str, Any],
    ) -> None:
        self.path, self.text, self.budget, self.at, self.consts = path, text, budget, at, consts
        self.found: list[Launch] = []
        self.taken: set[int] = set()  # nodes inside a launch already found
        self.lines = text.splitlines()
        self.nodes = 0

    def generic_visit(self, node: ast.AST) -> None:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            return
        super().generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        value = _constant(node.value, self.consts)
        for target in node.targets:
            if isinstance(target, ast.Name) and value is not _UNKNOWN:
                self.consts[target.id] = value
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        name = _call_name(node.func)
        if name in ENGINE_CALLS and node.keywords and "sglang" in self.text:
            launch = self._engine(node, name)
            if launch is not None:
                self.found.append(launch)
                return
        self.generic_visit(node)

    def visit_List(self, node: ast.List) -> None:
        self._sequence(node)

    def visit_Tuple(self, node: ast.Tuple) -> None:
        self._sequence(node)

    def _sequence(self, node: ast.List | ast.Tuple) -> None:
        items, positions, unknown = self._items(node.elts)
        if items and len(items) < 4096:
            start = self.at(node.lineno, node.col_offset)
            launch = launch_from_items(self.path, items, positions, start, {}, False, unknown)
            if launch is not None:
                launch.form = f"Python list at line {start.line}"
                self.found.append(launch)
                return
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and LAUNCH.search(node.value):
            self._string(node, node.value)

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                parts.append(value.value)
            elif isinstance(value, ast.FormattedValue):
                known = _constant(value.value, self.consts)
                parts.append(str(known) if known is not _UNKNOWN else f"${{{_ref(value.value)}}}")
        text = "".join(parts)
        if LAUNCH.search(text):
            self._string(node, text, raw=False)

    def _string(self, node: ast.expr, value: str, raw: bool = True) -> None:
        """A command written in a string: read as shell, at its own lines."""
        line, col = node.lineno, node.col_offset
        text, line0, col0 = value, line, col
        segment = ast.get_source_segment(self.text, node) if raw else None
        if segment is not None:
            m = re.match(r"([rRuU]?)('''|\"\"\"|'|\")", segment)
            if m and segment.endswith(m.group(2)):
                body = segment[m.end() : len(segment) - len(m.group(2))]
                if "\\" not in body.replace("\\\n", "") or m.group(1) in ("r", "R"):
                    text, col0 = body, col + m.end()
        at = self.at

        def where(p: Position) -> Position:
            return at(line0 + p.line - 1, (col0 if p.line == 1 else 0) + p.column - 1)

        found = _shell_snippet(self.path, text, where, self.budget)
        if not found:
            found = _snippets(self.path, text, self.budget, where)
        for la in found:
            la.form = f"Python string at line {at(line, col).line}"
        self.found += found

    def _items(
        self, elts: list[ast.expr]
    ) -> tuple[list[str], list[Position], dict[int, list[str]]]:
        items: list[str] = []
        positions: list[Position] = []
        unknown: dict[int, list[str]] = {}
        for elt in elts:
            if isinstance(elt, ast.Starred):
                return [], [], {}
            value = _constant(elt, self.consts)
            pos = self.at(elt.lineno, elt.col_offset)
            if value is _UNKNOWN and _ref(elt) == "sys_executable":
                value = "python"  # the interpreter running the file
            if value is _UNKNOWN or isinstance(value, list | dict):
                name = _ref(elt)
                unknown[len(items)] = [name]
                items.append(f"$({name})")
            else:
                items.append(_flag_value(value))
            positions.append(pos)
        return items, positions, unknown

    def _engine(self, node: ast.Call, name: str) -> Launch | None:
        """``Engine(model_path=..., tp_size=2)``: each keyword becomes the flag SGLang's CLI
        gives the same field (``--model-path``, ``--tp-size``)."""
        args: list[str] = []
        positions: list[Position] = []
        unknown: dict[int, list[str]] = {}
        for kw in node.keywords:
            if kw.arg is None:  # **kwargs: anything
                continue
            flag = "--" + kw.arg.replace("_", "-")
            pos = self.at(kw.lineno, kw.col_offset)
            value = _constant(kw.value, self.consts)
            if value is _UNKNOWN:
                ref = _ref(kw.value)
                unknown[len(args) + 1] = [ref]
                args += [flag, f"$({ref})"]
                positions += [pos, pos]
            elif value is True:
                args.append(flag)
                positions.append(pos)
            elif value is False or value is None:
                continue
            elif isinstance(value, list | tuple):
                args += [flag, *(_flag_value(v) for v in value)]
                positions += [pos] * (len(value) + 1)
            else:
                args += [flag, _flag_value(value)]
                positions += [pos, pos]
        start = self.at(node.lineno, node.col_offset)
        items = ["python", "-m", "sglang.launch_server", *args]
        shifted = {k + 3: v for k, v in unknown.items()}
        launch = launch_from_items(
            self.path, items, [start] * 3 + positions, start, {}, False, shifted
        )
        if launch is not None:
            launch.form = f"{name}(...) call at line {start.line}"
        return launch


_UNKNOWN: Any = object()


def _constant(node: ast.expr, consts: dict[str, Any]) -> Any:
    """A literal's value (names bound to literals earlier in the file too), else _UNKNOWN."""
    try:
        if isinstance(node, ast.Name) and node.id in consts:
            return consts[node.id]
        if isinstance(node, ast.Constant | ast.List | ast.Tuple | ast.Dict | ast.UnaryOp):
            return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _UNKNOWN
    return _UNKNOWN


def _flag_value(value: Any) -> str:
    if isinstance(value, dict):
        return json.dumps(value)
    return str(value)


def _ref(node: ast.expr) -> str:
    """A shell-safe name for a Python expression whose value is not known here."""
    try:
        text = ast.unparse(node)
    except (ValueError, RecursionError):  # pragma: no cover - unparse of parsed code
        text = "expr"
    name = re.sub(r"\W+", "_", text).strip("_") or "expr"
    return ("py_" + name if name[0].isdigit() else name)[:40]


def _call_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


# ------------------------------------------------------------------------------ notebooks


def _notebook(path: str, text: str, budget: Budget) -> tuple[list[Launch], str]:
    """Code cells of a Jupyter notebook: IPython ``!`` lines and ``%%bash`` cells as shell, the
    rest as Python; each source line at the line its JSON string is on in the file."""
    try:
        doc = json_value(text, "notebook")
    except InputLimitError as exc:
        return [], f"a notebook that is not valid JSON ({shown(exc.reason, 120)})"
    cells = doc.get("cells") if isinstance(doc, dict) else None
    if not isinstance(cells, list):
        return [], "a notebook without a `cells` list"
    out: list[Launch] = []
    consts: dict[str, Any] = {}
    cursor = 0
    code_cells = 0
    code_chars = 0
    for number, cell in enumerate(cells[:MAX_CELLS], start=1):
        if not isinstance(cell, dict):
            continue
        source = cell.get("source")
        if isinstance(source, str):
            source = source.splitlines(keepends=True)
        if not isinstance(source, list) or not all(isinstance(s, str) for s in source):
            continue
        lines_at, cursor = _source_lines(text, source, cursor)
        if cell.get("cell_type") != "code":
            continue
        code_cells += 1
        cell_text = "".join(source)
        if not re.search(r"sglang|Engine|ServerArgs", cell_text):
            continue
        code_chars += len(cell_text)
        if code_chars > MAX_TEXT_CHARS:  # the cells after are not read, and that is said
            cut = (
                f"its code cells from cell {number} on were not read (over the "
                f"{MAX_TEXT_CHARS:,} characters of code lint reads of a notebook)"
            )
            if not out:
                return [], cut
            out[-1].incomplete = _also(out[-1].incomplete, cut)
            break
        found = _cell(path, cell_text, lines_at, budget, consts)
        _label(found, f"notebook cell {number}")
        out += found
    why = "" if out else f"none of its {code_cells} code cells writes a launch out"
    return out, why


def _bang_where(line: int, column: int) -> Where:
    return lambda p: Position(line, column + p.column)


def _source_lines(text: str, source: list[str], cursor: int) -> tuple[list[tuple[int, int]], int]:
    """The file line and column (after the opening quote) of each source string, searched in
    order from ``cursor`` (column 0 where the string is not found as written)."""
    out = []
    for piece in source:
        found = -1
        for encoded in (json.dumps(piece, ensure_ascii=False), json.dumps(piece)):
            found = text.find(encoded, cursor)
            if found >= 0:
                cursor = found + len(encoded)
                break
        at = found if found >= 0 else cursor
        line_start = text.rfind("\n", 0, at) + 1
        column = at - line_start + 1 if found >= 0 else 0
        out.append((text.count("\n", 0, at) + 1, column))
    return out, cursor


def _cell(
    path: str,
    cell: str,
    lines_at: list[tuple[int, int]],
    budget: Budget,
    consts: dict[str, Any],
) -> list[Launch]:
    lines = cell.split("\n")

    def at_line(k: int) -> tuple[int, int]:  # 1-based line in the cell -> (line, column)
        if not lines_at:
            return 1, 0
        return lines_at[min(max(k - 1, 0), len(lines_at) - 1)]

    def file_line(k: int) -> int:
        return at_line(k)[0]

    def where(p: Position) -> Position:
        line, column = at_line(p.line)
        return Position(line, column + p.column)

    first = lines[0].strip() if lines else ""
    if first.startswith(("%%bash", "%%sh", "%%script bash", "%%script sh")):
        body = "\n".join(["", *lines[1:]])
        return _shell_snippet(path, body, where, budget) or _snippets(path, body, budget, where)
    python_lines = []
    out: list[Launch] = []
    for k, line in enumerate(lines, start=1):
        stripped = line.lstrip()
        if stripped.startswith("!"):
            col = len(line) - len(stripped) + 1
            out += _snippets(
                path,
                " " * col + stripped[1:],
                budget,
                _bang_where(file_line(k), at_line(k)[1]),
            )
            python_lines.append("")
        elif stripped.startswith("%"):
            python_lines.append("")
        else:
            python_lines.append(line)
    found, _ = _python(
        path, "\n".join(python_lines), budget, lambda ln, col: where(Position(ln, col + 1)), consts
    )
    return out + found


# ------------------------------------------------------------------------------ Dockerfile


def _logical(lines: list[str], continuation: str = "\\") -> Iterator[tuple[int, list[str]]]:
    """(0-based first line, physical lines) of each logical line."""
    i = 0
    while i < len(lines):
        j = i
        while lines[j].rstrip().endswith(continuation) and j + 1 < len(lines):
            j += 1
        yield i, lines[i : j + 1]
        i = j + 1


DOCKER_INSTR = re.compile(r"^\s*(CMD|ENTRYPOINT|RUN|ENV|ARG)\s+", re.IGNORECASE)


def _dockerfile(path: str, text: str, budget: Budget, where: Where | None = None) -> list[Launch]:
    """``CMD``/``ENTRYPOINT`` (exec form as JSON, shell form as shell; an exec ENTRYPOINT
    followed by an exec CMD is one argv) and ``RUN`` lines; ``ENV``/``ARG`` values are the
    shell's environment."""
    outer: Where = where or (lambda p: p)
    lines = text.splitlines()
    env: dict[str, str] = {}
    out: list[Launch] = []
    entry: tuple[list[str], list[Position]] | None = None
    cmd: tuple[list[str], list[Position]] | None = None
    for line0, physical in _logical(lines):
        m = DOCKER_INSTR.match(physical[0])
        if m is None:
            continue
        instr = m.group(1).upper()
        rest = "\n".join([physical[0][m.end() :], *physical[1:]])
        if instr in ("ENV", "ARG"):
            _docker_env(rest, env)
            continue
        if rest.lstrip().startswith("["):
            items = _exec_form(rest)
            if items is None:
                continue
            positions = _item_positions(lines, line0, len(physical), items, outer)
            if instr == "ENTRYPOINT":
                entry, cmd = (items, positions), None
            elif instr == "CMD":
                cmd = (items, positions)
            else:
                out += _from_items(path, items, positions, env)
            continue
        found = _shell_snippet(
            path, rest, _relocate(outer, _shift(line0, m.end())), budget, dict(env)
        )
        for la in found:
            la.form = f"Dockerfile {instr} at line {outer(Position(line0 + 1, 1)).line}"
        out += found
        if instr == "ENTRYPOINT":
            entry = None
    if entry is not None or cmd is not None:
        items = (entry[0] if entry else []) + (cmd[0] if cmd else [])
        positions = (entry[1] if entry else []) + (cmd[1] if cmd else [])
        out += _from_items(path, items, positions, env)
    return out


def _from_items(
    path: str, items: list[str], positions: list[Position], env: dict[str, str]
) -> list[Launch]:
    start = positions[0] if positions else Position()
    launch = launch_from_items(path, items, positions, start, dict(env), True)
    if launch is None:
        return []
    launch.form = f"Dockerfile exec form at line {start.line}"
    launch.last_line = max(p.line for p in positions)
    return [launch]


def _docker_env(rest: str, env: dict[str, str]) -> None:
    text = rest.replace("\\\n", " ")
    try:
        words = shlex.split(text)
    except ValueError:
        return
    if len(words) >= 2 and "=" not in words[0]:
        env[words[0]] = " ".join(words[1:])
        return
    for word in words:
        if "=" in word:
            key, value = word.split("=", 1)
            env[key] = value


def _exec_form(rest: str) -> list[str] | None:
    try:
        value = json.loads(rest.replace("\\\n", " "))
    except ValueError:
        return None
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    return None


def _item_positions(
    lines: list[str], line0: int, count: int, items: list[str], where: Where
) -> list[Position]:
    """Each exec-form item at the physical line and column its JSON string is on."""
    out = []
    k, col = line0, 0
    for item in items:
        encoded = json.dumps(item)
        found = None
        for row in range(k, line0 + count):
            at = lines[row].find(encoded, col if row == k else 0)
            if at >= 0:
                found = (row, at)
                break
        if found is None:
            out.append(where(Position(k + 1, col + 1)))
            continue
        k, col = found[0], found[1] + len(encoded)
        out.append(where(Position(found[0] + 1, found[1] + 1)))
    return out


# ------------------------------------------------------------------------------ Makefile

MAKE_ASSIGN = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*(\?|:|::|\+)?=\s*(.*)$")
MAKE_REF = re.compile(r"\$[({]([A-Za-z_][A-Za-z0-9_]*)[)}]")


def _makefile(path: str, text: str, budget: Budget, where: Where | None = None) -> list[Launch]:
    """Recipe lines (tab-indented) as shell, with the file's simple variables (``X = v``,
    ``X ?= v``) substituted and ``$$`` read as ``$``; each recipe at its own lines."""
    outer: Where = where or (lambda p: p)
    lines = text.splitlines()
    variables: dict[str, str] = {}
    out: list[Launch] = []
    for line0, physical in _logical(lines):
        first = physical[0]
        if not first.startswith("\t"):
            m = MAKE_ASSIGN.match(first)
            if m and not first.lstrip().startswith("#"):
                value = " ".join(ln.rstrip("\\").strip() for ln in [m.group(3), *physical[1:]])
                if m.group(2) == "+":
                    variables[m.group(1)] = (variables.get(m.group(1), "") + " " + value).strip()
                elif m.group(2) != "?" or m.group(1) not in variables:
                    variables[m.group(1)] = value
            continue
        body = "\n".join(_make_line(ln, variables, first=k == 0) for k, ln in enumerate(physical))
        if not LAUNCH.search(body):
            continue
        found = _shell_snippet(path, body, _relocate(outer, _shift(line0)), budget)
        for la in found:
            la.form = f"Makefile recipe at line {outer(Position(line0 + 1, 1)).line}"
        out += found
    return out


def _make_line(line: str, variables: dict[str, str], first: bool = False) -> str:
    """One physical recipe line as the shell gets it (``@``/``-``/``+`` prefixes are make's,
    on the recipe's first line only)."""
    stripped = line.lstrip("\t")
    pad = " " * (len(line) - len(stripped))
    if first:
        stripped = re.sub(r"^\s*[@+-]+", lambda m: " " * len(m.group(0)), stripped)

    def sub(m: re.Match[str]) -> str:
        value = variables.get(m.group(1))
        return _make_line(value, {}) if value is not None else f"${{{m.group(1)}}}"

    text = MAKE_REF.sub(sub, stripped.replace("$$", "\0"))
    return pad + text.replace("\0", "$")


# ------------------------------------------------------------------------------ YAML / JSON


def tree_launches(
    path: str, text: str, where: Where | None = None
) -> tuple[list[Launch], list[Any]]:
    """Launches in YAML/JSON documents: the workload kinds ``sources.from_yaml`` knows, then,
    in any other document, argv lists, command strings, container-like maps and flag maps under
    any key, and SGLang cookbook model files."""
    docs = YamlDocuments(text, path)  # parsed as read: the launch cap stops the parse
    launches, specservers = from_yaml(path, text, docs)
    if launches or specservers:
        return launches, specservers
    lines = text.splitlines()
    for doc in docs:
        if len(launches) > MAX_FILE_LAUNCHES:
            break  # ``scan`` cuts them and says so
        if known_document(doc):
            continue
        walker = _TreeWalker(path, lines)
        if isinstance(doc, dict) and _cookbook(doc):
            launches += cookbook_launches(path, doc)
        else:
            walker.walk(doc)
            launches += walker.found
    if where is not None:
        for la in launches:
            _move(la, where)
    return launches, specservers


def _move(launch: Launch, where: Where) -> None:
    launch.positions = [where(p) for p in launch.positions]
    launch.start = where(launch.start)
    launch.first_line, launch.last_line = (
        launch.start.line,
        max([p.line for p in launch.positions] + [launch.start.line]),
    )
    launch.unresolved = {k: where(v) for k, v in launch.unresolved.items()}


class _TreeWalker:
    def __init__(self, path: str, lines: list[str]) -> None:
        self.path, self.lines = path, lines
        self.found: list[Launch] = []
        self.nodes = 0
        self.budget = Budget()

    def walk(self, node: Any, key: str = "") -> None:
        from specserver_advisor.lint import sources

        self.nodes += 1
        if self.nodes > MAX_NODES or len(self.found) > MAX_FILE_LAUNCHES:
            return  # ``scan`` cuts the launches to MAX_FILE_LAUNCHES and says so
        if isinstance(node, dict):
            if any(isinstance(node.get(k), str | list) for k in ("command", "args", "entrypoint")):
                try:
                    found = sources._container_launches(
                        self.path, node, True, {}, lines=self.lines, budget=self.budget
                    )
                except InputError:
                    found = []
                if found:
                    for la in found:
                        la.form = f"`{shown(key or 'command', 40)}` at line {la.start.line}"
                    self.found += found
                    return
            if sources._looks_like_config(node):
                launch = sources._from_config(self.path, node)
                launch.form = f"flag map `{shown(key or 'document', 40)}`"
                self.found.append(launch)
                return
            for k, v in node.items():
                if isinstance(v, str):
                    if LAUNCH.search(v):
                        self._string(v, sources._pos(node, key=k), str(k))
                else:
                    self.walk(v, str(k))
        elif isinstance(node, list):
            items = (
                [str(v) for v in node]
                if all(isinstance(v, str | int | float) for v in node)
                else []
            )
            if items and detect(items):
                positions = [sources._pos(node, index=k) for k in range(len(node))]
                taken = launch_from_items(self.path, items, positions, positions[0], {}, True)
                if taken is not None:
                    taken.form = f"argv list `{shown(key or 'list', 40)}`"
                    self.found.append(taken)
                    return
            for k, v in enumerate(node):
                if isinstance(v, str):
                    if LAUNCH.search(v):
                        self._string(v, sources._pos(node, index=k), key)
                else:
                    self.walk(v, key)
        return

    def _string(self, value: str, at: Position, key: str) -> None:
        from specserver_advisor.lint import sources

        if not LAUNCH.search(value):
            return
        where = sources.embedded(self.lines, at)
        found = _shell_snippet(self.path, value, where, self.budget) or _snippets(
            self.path, value, self.budget, where
        )
        for la in found:
            la.form = f"`{shown(key or 'string', 40)}` at line {la.start.line}"
        self.found += found


# ------------------------------------------------------------------------------ cookbook

#: Cookbook engine keys -> the flag SGLang's CLI gives the same field.
COOKBOOK_FLAGS = {
    "tp": "--tp-size",
    "dp": "--dp-size",
    "ep": "--ep-size",
    "pp": "--pp-size",
    "enable_dp_attention": "--enable-dp-attention",
}
COOKBOOK_LLM = {
    "tool_parser": "--tool-call-parser",
    "reasoning_parser": "--reasoning-parser",
    "chat_template": "--chat-template",
}


def _cookbook(doc: dict[str, Any]) -> bool:
    families = doc.get("families")
    return isinstance(families, list) and any(
        isinstance(f, dict) and isinstance(f.get("models"), list) for f in families
    )


def cookbook_launches(path: str, doc: dict[str, Any]) -> list[Launch]:
    """SGLang cookbook model YAML: the generated form (each model's ``hardware`` ->
    ``configurations`` with an ``engine``) and the source form (``defaults.configurations``
    crossed with each family's models and hardware); one launch per model x hardware x
    configuration, named ``cookbook configuration MODEL GPU/NAME``."""
    out: list[Launch] = []
    company = doc.get("company")
    defaults: dict[str, Any] = doc["defaults"] if isinstance(doc.get("defaults"), dict) else {}
    for family in doc.get("families") or []:
        if not isinstance(family, dict):
            continue
        for model in family.get("models") or []:
            if len(out) >= MAX_SNIPPETS:
                return out
            if (
                isinstance(model, dict)
                and isinstance(model.get("hardware"), dict)
                and any(
                    isinstance(h, dict) and "configurations" in h
                    for h in model["hardware"].values()
                )
            ):
                out += _cookbook_generated(path, family, model)
            else:
                out += _cookbook_source(path, company, defaults, family, model)
    return out


def _opt(node: Any, key: str) -> Any:
    return node.get(key) if isinstance(node, dict) else None


def _cookbook_generated(path: str, family: Any, model: dict[str, Any]) -> list[Launch]:
    from specserver_advisor.lint.sources import _pos

    out = []
    llm = _opt(_opt(model, "attributes"), "llm") or _opt(family, "llm") or {}
    for gpu, hw in model["hardware"].items():
        for config in _opt(hw, "configurations") or []:
            if not isinstance(config, dict):
                continue
            args: list[str] = []
            positions: list[Position] = []
            ref = config.get("quantized_model_path") or model.get("model_path")
            ref_at = (
                _pos(config, key="quantized_model_path")
                if config.get("quantized_model_path")
                else _pos(model, key="model_path")
            )
            if ref:
                args += ["--model-path", str(ref)]
                positions += [ref_at, ref_at]
            _cookbook_llm(llm, args, positions)
            engine: dict[str, Any] = (
                config["engine"] if isinstance(config.get("engine"), dict) else {}
            )
            env = {str(k): str(v) for k, v in (_opt(engine, "env_vars") or {}).items()}
            _cookbook_engine(engine, args, positions)
            start = _pos(config)
            launch = make_launch(path, "server", args, positions or [start], start, env, False)
            launch.form = (
                f"cookbook configuration {shown(str(model.get('name') or ref), 50)} "
                f"{shown(str(gpu), 20)}/{shown(str(config.get('name', '?')), 30)}"
            )
            launch.gpu_type = _gpu_type(str(gpu))
            out.append(launch)
    return out


def _cookbook_source(
    path: str, company: Any, defaults: dict[str, Any], family: dict[str, Any], model: Any
) -> list[Launch]:
    from specserver_advisor.lint.sources import _pos

    name = model if isinstance(model, str) else _opt(model, "name") or _opt(model, "base_name")
    if not isinstance(name, str):
        return []
    ref = f"{company}/{name}" if isinstance(company, str) else name
    hardware = _opt(model, "hardware") or _opt(family, "hardware") or defaults.get("hardware")
    gpus = [str(g) for g in hardware] if isinstance(hardware, list) else ["default"]
    configs = _opt(model, "configurations") or _opt(family, "configurations")
    configs = configs or defaults.get("configurations") or [{"name": "default"}]
    llm = {**(_opt(family, "llm") or {}), **(_opt(model, "llm") or {})}
    out = []
    for gpu in gpus:
        for config in configs:
            if not isinstance(config, dict):
                continue
            start = _pos(config)
            args = ["--model-path", ref]
            positions = [start, start]
            _cookbook_llm(llm, args, positions)
            _cookbook_engine(config, args, positions)
            env = {str(k): str(v) for k, v in (_opt(config, "env_vars") or {}).items()}
            launch = make_launch(path, "server", args, positions, start, env, False)
            launch.form = (
                f"cookbook configuration {shown(name, 50)} {shown(gpu, 20)}/"
                f"{shown(str(config.get('name', '?')), 30)}"
            )
            launch.gpu_type = _gpu_type(gpu)
            out.append(launch)
    return out


def _cookbook_llm(llm: Any, args: list[str], positions: list[Position]) -> None:
    from specserver_advisor.lint.sources import _pos

    if not isinstance(llm, dict):
        return
    for key, flag in COOKBOOK_LLM.items():
        value = llm.get(key)
        if isinstance(value, str) and value:
            at = _pos(llm, key=key)
            args += [flag, value]
            positions += [at, at]


def _cookbook_engine(engine: dict[str, Any], args: list[str], positions: list[Position]) -> None:
    from specserver_advisor.lint.sources import _pos

    for key, flag in COOKBOOK_FLAGS.items():
        value = engine.get(key)
        if value is None or value is False:
            continue
        at = _pos(engine, key=key)
        if value is True:
            args.append(flag)
            positions.append(at)
        else:
            args += [flag, str(value)]
            positions += [at, at]
    extra = engine.get("extra_args")
    if isinstance(extra, str):
        extra = [extra]
    for k, item in enumerate(extra if isinstance(extra, list) else []):
        at = _pos(extra, index=k)
        try:
            words = shlex.split(str(item))
        except ValueError:
            words = [str(item)]
        args += words
        positions += [at] * len(words)


def _gpu_type(name: str) -> str | None:
    from specserver_advisor.gpus import UnknownGpuError, lookup_gpu

    try:
        lookup_gpu(name)
    except UnknownGpuError:
        return None
    return name.lower()
