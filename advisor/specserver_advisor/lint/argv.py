"""SGLang argv found in a file turned into a ``Launch``: which command launches SGLang, and
its arguments parsed (server flags by SGLang's own table; benchmark flags kept raw). Pure.
"""

from __future__ import annotations

import copy
from functools import lru_cache
from typing import Any

from specserver_advisor.lint.model import Launch, Position
from specserver_advisor.lint.shell.budget import MAX_ARGS
from specserver_advisor.sglang.flags import REMOVED_FLAGS, ParsedArgs, parse_server_argv

BENCH_MODULES = ("sglang.bench_serving", "sglang.benchmark.serving")
#: Launchers that hand their argv to SGLang's ServerArgs parser after taking their own flags
#: out, so SGLang's parsing and resolution apply to the rest: module -> whether the SGLang
#: server it starts serves SGLang's own HTTP API (Dynamo's worker does not: its frontend does).
#: Their own flags are theirs, so only the issues SGLang decides on its names alone that no
#: wrapper flag can be are reported for them (ambiguous prefixes, flags 0.5.23 removed, values).
WRAPPERS = {"dynamo.sglang": False, "sglang_router.launch_server": True}


def detect(tokens: list[str]) -> tuple[str, int] | None:
    """("server"|"bench", index of the first argument) when the tokens launch SGLang."""
    for i, tok in enumerate(tokens):
        base = tok.rsplit("/", 1)[-1]
        nxt = tokens[i + 1] if i + 1 < len(tokens) else ""
        if base.startswith("python") and nxt == "-m" and i + 2 < len(tokens):
            module = tokens[i + 2]
            if module == "sglang.launch_server" or module in WRAPPERS:
                return "server", i + 3
            if module in BENCH_MODULES:
                return "bench", i + 3
        if base == "sglang" and nxt == "serve":
            return "server", i + 2
    return None


def make_launch(
    path: str,
    kind: str,
    args: list[str],
    positions: list[Position],
    start: Position,
    env: dict[str, str],
    in_container: bool,
    positional: bool = False,
    last_line: int | None = None,
    launcher: str | None = None,
) -> Launch:
    """A Launch with its argv parsed (bench argv is kept raw); ``launcher`` is the module that
    takes the argv (a ``WRAPPERS`` one keeps its own flags: unknown names are not reported).
    An argv past ``MAX_ARGS`` items (a Pod's ``args``, a compose ``command``) is cut there
    before it is parsed, and the launch says so (INFO004), as the shell evaluator does."""
    cut = len(args) - MAX_ARGS
    if cut > 0:
        args, positions = args[:MAX_ARGS], positions[:MAX_ARGS]
    parsed = parsed_server_argv(args, positional) if kind != "bench" else _bench_parse(args)
    launch = Launch(
        path,
        kind,
        args,
        positions,
        start,
        parsed,
        env,
        {},
        in_container,
        first_line=start.line,
        last_line=last_line or start.line,
        positional=positional and kind == "server",
    )
    if cut > 0:
        launch.incomplete = (
            f"the launch line has more than {MAX_ARGS:,} arguments ({cut:,} more were read); "
            f"only the first {MAX_ARGS:,} are checked"
        )
    if launcher in WRAPPERS:
        launch.launcher = launcher
        launch.serves_http = WRAPPERS[launcher]
        parsed.issues = [i for i in parsed.issues if sglang_decides(i.kind, i.token)]
    return launch


#: Argv parses kept (``parsed_server_argv``), and the characters an argv may have to be kept:
#: at most ~2 MB held, whatever the files hold.
PARSE_CACHE_SIZE = 512
PARSE_CACHE_CHARS = 4096


def parsed_server_argv(args: list[str], positional: bool) -> ParsedArgs:
    """``parse_server_argv(args)``, a fresh copy of a memoised parse when the argv is short:
    a repository writes the same launch in many files (one Deployment per GPU type, a script
    per size), and the parse is pure in the argv. The copy is the caller's to change."""
    if sum(map(len, args)) > PARSE_CACHE_CHARS:
        return parse_server_argv(args, positional_model=positional)
    return _fresh(_parse_memo(tuple(args), positional))


@lru_cache(maxsize=PARSE_CACHE_SIZE)
def _parse_memo(args: tuple[str, ...], positional: bool) -> ParsedArgs:
    return parse_server_argv(list(args), positional_model=positional)


def _fresh(parsed: ParsedArgs) -> ParsedArgs:
    """A copy of a memoised parse that shares nothing mutable with it."""
    return ParsedArgs(
        values={
            k: v if isinstance(v, str | int | float | bool | None) else copy.deepcopy(v)
            for k, v in parsed.values.items()
        },
        positions=dict(parsed.positions),
        spelled=dict(parsed.spelled),
        issues=[copy.copy(issue) for issue in parsed.issues],
        config_file=parsed.config_file,
        deprecated=dict(parsed.deprecated),
        spans=dict(parsed.spans),
    )


def launcher_of(tokens: list[str], first: int) -> str | None:
    """The ``python -m`` module before argument ``first`` (None for ``sglang serve``)."""
    return tokens[first - 1] if first >= 3 and tokens[first - 2] == "-m" else None


def sglang_decides(kind: str, token: str) -> bool:
    """Whether SGLang rejects an argv item whatever flags a wrapper takes out first."""
    return kind != "unknown" or token.split("=", 1)[0] in REMOVED_FLAGS


def _bench_parse(args: list[str]) -> Any:
    parsed = ParsedArgs()
    i = 0
    while i < len(args):
        tok = args[i]
        if tok.startswith("--"):
            name, eq, value = tok.partition("=")
            key = name[2:].replace("-", "_")
            if eq:
                parsed.values[key] = value
            elif i + 1 < len(args) and not args[i + 1].startswith("--"):
                parsed.values[key] = args[i + 1]
                i += 1
            else:
                parsed.values[key] = True
            parsed.positions[key] = i
        i += 1
    return parsed
