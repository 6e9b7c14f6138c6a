"""Find SGLang launches and benchmark commands in files, with line and column of every argument.

Inputs: SpecServer YAML; Kubernetes workloads (Deployment, StatefulSet, DaemonSet, Job, Pod,
LeaderWorkerSet; multi-document, Helm-rendered), including ``bash -c "..."`` strings;
docker-compose files; SGLang ``--config`` YAML; shell scripts and one-line commands. Reading the
files is this module's only I/O; unreadable input raises ``InputError`` with a clear reason.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from typing import Any

import yaml

from specserver_advisor.lint import yamlnodes
from specserver_advisor.lint.model import Launch, Position
from specserver_advisor.sglang.flags import flag_table, parse_server_argv, values_from_config

SERVER_LAUNCHERS = (("-m", "sglang.launch_server"), ("serve",))
BENCH_MODULES = ("sglang.bench_serving", "sglang.benchmark.serving")
WORKLOAD_KINDS = {
    "Deployment",
    "StatefulSet",
    "DaemonSet",
    "Job",
    "Pod",
    "LeaderWorkerSet",
    "ReplicaSet",
    "CronJob",
}
SUPPRESS = re.compile(r"specserver-advisor:\s*ignore\[([A-Za-z0-9_,\s-]+)\]\s*(.*)")


class InputError(ValueError):
    """A file that cannot be linted; the message says why."""


def suppressions(text: str) -> dict[int, dict[str, str]]:
    """Line -> {code: reason} from ``specserver-advisor: ignore[CODE] reason`` comments."""
    out: dict[int, dict[str, str]] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        m = SUPPRESS.search(line)
        if m and "#" in line[: m.start() + 1]:
            out[number] = {
                c.strip().upper(): m.group(2).strip() for c in m.group(1).split(",") if c.strip()
            }
    return out


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


def _split_commands(tokens: list[str]) -> Iterator[tuple[int, int]]:
    """Spans of tokens between shell separators."""
    start = 0
    for i, tok in enumerate([*tokens, ";"]):
        if tok in (";", "&&", "||", "|", "&"):
            if i > start:
                yield start, i
            start = i + 1


def _env_prefix(tokens: list[str]) -> dict[str, str]:
    env = {}
    for tok in tokens:
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", tok):
            name, value = tok.split("=", 1)
            env[name] = value
        elif tok not in ("env", "exec"):
            break
    return env


def launches_in_command(
    path: str,
    text: str,
    positions: list[Position] | None,
    base: Position,
    env: dict[str, str],
    in_container: bool,
) -> list[Launch]:
    """Launches in one shell command string (positions: of the string, or per line)."""
    try:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        tokens = list(lexer)
    except ValueError as exc:
        raise InputError(f"cannot parse shell command: {exc}") from exc
    out = []
    for a, b in _split_commands(tokens):
        cmd = tokens[a:b]
        found = detect(cmd)
        if not found:
            continue
        kind, first = found
        positional = kind == "server" and cmd[first - 1] == "serve"
        args = cmd[first:]
        env_here = {**env, **_env_prefix(cmd)}
        pos = [
            positions[min(a + first + i, len(positions) - 1)] if positions else base
            for i in range(len(args))
        ]
        out.append(make_launch(path, kind, args, pos, base, env_here, in_container, positional))
    return out


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
    return Launch(
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
    )


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


# --------------------------------------------------------------------------------- shell


def from_shell(path: str, text: str) -> list[Launch]:
    """Launches in a shell script (line continuations joined, ``export`` tracked)."""
    out: list[Launch] = []
    env: dict[str, str] = {}
    env_pos: dict[str, Position] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        start = i
        logical = lines[i]
        while logical.rstrip().endswith("\\") and i + 1 < len(lines):
            logical = logical.rstrip()[:-1] + " " + lines[i + 1]
            i += 1
        i += 1
        stripped = logical.strip()
        m = re.match(r"export\s+([A-Za-z_][A-Za-z0-9_]*)=(\S*)", stripped)
        if m:
            env[m.group(1)] = m.group(2).strip("'\"")
            env_pos[m.group(1)] = Position(start + 1, 1)
            continue
        if not stripped or stripped.startswith("#"):
            continue
        spans = _line_positions(lines[start:i], start)
        try:
            lexer = shlex.shlex(logical, posix=True, punctuation_chars=";&|")
            lexer.whitespace_split = True
            lexer.commenters = "#"
            tokens = list(lexer)
        except ValueError:
            continue
        positions = _token_positions(logical, tokens, spans)
        found = launches_in_command(path, logical, positions, Position(start + 1, 1), env, False)
        for la in found:
            la.last_line = i
            la.env_positions = {k: v for k, v in env_pos.items() if k in la.env}
        out += found
    return out


def _line_positions(lines: list[str], first: int) -> list[tuple[int, int, int]]:
    """(offset in the joined text, line number, column base) per physical line."""
    spans, offset = [], 0
    for k, line in enumerate(lines):
        spans.append((offset, first + k + 1, 1))
        offset += len(line.rstrip()[:-1] if line.rstrip().endswith("\\") else line) + 1
    return spans


def _token_positions(
    text: str, tokens: list[str], spans: list[tuple[int, int, int]]
) -> list[Position]:
    out, cursor = [], 0
    for tok in tokens:
        found = text.find(tok, cursor)
        at = found if found >= 0 else cursor
        cursor = at + len(tok) if found >= 0 else cursor
        line, col = spans[0][1], at + 1
        for offset, number, _ in spans:
            if offset <= at:
                line, col = number, at - offset + 1
        out.append(Position(line, col))
    return out


# --------------------------------------------------------------------------------- YAML


def _pos(node: Any, key: Any = None, index: int | None = None) -> Position:
    try:
        if index is not None and isinstance(node, yamlnodes.PSeq):
            line, col = node.lc.item(index)
            return Position(line + 1, col + 1)
        if key is not None and isinstance(node, yamlnodes.PMap):
            line, col = node.lc.value(key) if node.lc.data.get(key) else node.lc.key(key)
            return Position(line + 1, col + 1)
        return Position(node.lc.line + 1, node.lc.col + 1)
    except (AttributeError, KeyError, TypeError, IndexError):
        return Position(1, 1)


def load_yaml_documents(text: str) -> list[Any]:
    """All documents (with line info); raises InputError on bad YAML."""
    try:
        return [d for d in yamlnodes.load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"invalid YAML{where}: {problem}") from exc
    except (ValueError, TypeError, RecursionError) as exc:
        raise InputError(f"invalid YAML: {exc}") from exc


def _pod_spec(doc: Any) -> Any:
    kind = doc.get("kind")
    spec = doc.get("spec") or {}
    if kind == "Pod":
        return spec
    if kind == "CronJob":
        return (((spec.get("jobTemplate") or {}).get("spec") or {}).get("template") or {}).get(
            "spec"
        )
    if kind == "LeaderWorkerSet":
        tmpl = spec.get("leaderWorkerTemplate") or {}
        for key in ("leaderTemplate", "workerTemplate"):
            if isinstance(tmpl.get(key), dict):
                return tmpl[key].get("spec")
        return None
    return (spec.get("template") or {}).get("spec") if isinstance(spec, dict) else None


def _container_launches(
    path: str, container: Any, in_container: bool, doc_suppress: dict[str, str]
) -> list[Launch]:
    if not isinstance(container, dict):
        return []
    env: dict[str, str] = {}
    env_pos: dict[str, Position] = {}
    raw_env = container.get("env") or container.get("environment")
    if isinstance(raw_env, list):
        for k, item in enumerate(raw_env):
            if isinstance(item, dict) and "name" in item:
                env[str(item["name"])] = str(item.get("value", ""))
                env_pos[str(item["name"])] = _pos(raw_env, index=k)
            elif isinstance(item, str) and "=" in item:
                name, value = item.split("=", 1)
                env[name] = value
                env_pos[name] = _pos(raw_env, index=k)
    elif isinstance(raw_env, dict):
        for name, value in raw_env.items():
            env[str(name)] = str(value)
            env_pos[str(name)] = _pos(raw_env, key=name)
    items: list[str] = []
    positions: list[Position] = []
    for field_key in ("entrypoint", "command", "args"):
        raw: Any = container.get(field_key)
        if isinstance(raw, str):
            items.append(raw)
            positions.append(_pos(container, key=field_key))
        elif isinstance(raw, list):
            for k, item in enumerate(raw):
                items.append(str(item))
                positions.append(_pos(raw, index=k))
    out: list[Launch] = []
    start = _pos(container)
    # A whole command given as one string (compose), or bash -c "...": parse as shell.
    for k, item in enumerate(items):
        if len(items) == 1 or (k > 0 and items[k - 1] in ("-c", "-lc", "-ec")):
            out += launches_in_command(path, item, None, positions[k], env, in_container)
    if not out:
        found = detect(items)
        if found:
            kind, first = found
            positional = kind == "server" and items[first - 1] == "serve"
            out.append(
                make_launch(
                    path,
                    kind,
                    items[first:],
                    positions[first:] or [start],
                    start,
                    env,
                    in_container,
                    positional,
                )
            )
    for la in out:
        la.env_positions = env_pos
        la.document_suppressions = dict(doc_suppress)
        la.last_line = max([p.line for p in positions] + [la.start.line])
    return out


def _annotation_suppressions(doc: Any) -> dict[str, str]:
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    raw = (
        ((meta or {}).get("annotations") or {}).get("specserver.io/ignore")
        if isinstance(meta, dict)
        else None
    )
    out = {}
    if isinstance(raw, str):
        for part in raw.split(","):
            code, _, reason = part.partition(":")
            if code.strip():
                out[code.strip().upper()] = reason.strip()
    return out


def from_yaml(path: str, text: str) -> tuple[list[Launch], list[Any]]:
    """Launches in YAML documents; also returns SpecServer documents for their own rules."""
    launches: list[Launch] = []
    specservers: list[Any] = []
    for doc in load_yaml_documents(text):
        if not isinstance(doc, dict):
            continue
        doc_suppress = _annotation_suppressions(doc)
        kind = doc.get("kind")
        if kind == "SpecServer":
            specservers.append(doc)
        elif kind in WORKLOAD_KINDS:
            pod = _pod_spec(doc)
            if isinstance(pod, dict):
                for key in ("initContainers", "containers"):
                    for container in pod.get(key) or []:
                        launches += _container_launches(path, container, True, doc_suppress)
        elif isinstance(doc.get("services"), dict):  # docker-compose
            for service in doc["services"].values():
                launches += _container_launches(path, service, True, doc_suppress)
        elif _looks_like_config(doc):
            launches.append(_from_config(path, doc))
    return launches, specservers


def _looks_like_config(doc: dict[str, Any]) -> bool:
    keys = {str(k).lstrip("-").replace("-", "_") for k in doc}
    return "model_path" in keys and len(keys & set(flag_table())) >= 2


def _from_config(path: str, doc: Any) -> Launch:
    """An SGLang ``--config`` YAML: its keys are flags."""
    args: list[str] = []
    positions: list[Position] = []
    values = values_from_config(dict(doc))
    for key in doc:
        name = str(key).lstrip("-").replace("-", "_")
        if name not in values:
            continue
        value = doc[key]
        flag = flag_table()[name]
        if flag.is_bool:
            if value:
                args.append(flag.cli)
                positions.append(_pos(doc, key=key))
            continue
        args += [flag.cli, str(value)]
        positions += [_pos(doc, key=key)] * 2
    return make_launch(path, "server", args, positions, _pos(doc), {}, False)
