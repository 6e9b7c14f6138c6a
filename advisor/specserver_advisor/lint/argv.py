"""SGLang argv found in a file turned into a ``Launch``: which command launches SGLang, and
its arguments parsed (server flags by SGLang's own table; benchmark flags kept raw). Pure.
"""

from __future__ import annotations

from typing import Any

from specserver_advisor.lint.model import Launch, Position
from specserver_advisor.sglang.flags import parse_server_argv

BENCH_MODULES = ("sglang.bench_serving", "sglang.benchmark.serving")


def detect(tokens: list[str]) -> tuple[str, int] | None:
    """("server"|"bench", index of the first argument) when the tokens launch SGLang."""
    for i, tok in enumerate(tokens):
        base = tok.rsplit("/", 1)[-1]
        nxt = tokens[i + 1] if i + 1 < len(tokens) else ""
        if base.startswith("python") and nxt == "-m" and i + 2 < len(tokens):
            module = tokens[i + 2]
            if module == "sglang.launch_server":
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
) -> Launch:
    """A Launch with its argv parsed (bench argv is kept raw)."""
    parsed = (
        parse_server_argv(args, positional_model=positional)
        if kind != "bench"
        else _bench_parse(args)
    )
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
    return launch


def _bench_parse(args: list[str]) -> Any:
    from specserver_advisor.sglang.flags import ParsedArgs

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
