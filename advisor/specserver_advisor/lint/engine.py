"""Run the lint rules over files: find launches, load model configs once, apply suppressions.

Called by ``specserver-advisor lint``. Broken input (bad YAML, binary or huge files, invalid
SpecServers) becomes one ``INPUT001`` diagnostic for that file, never a traceback.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specserver_advisor.lint.model import Context, Diagnostic, Launch
from specserver_advisor.lint.rules import ENGINE_CODES, RULES
from specserver_advisor.lint.sources import InputError, from_shell, from_yaml, suppressions
from specserver_advisor.lint.specservers import SpecServerError, launch_from_specserver

YAML_EXT = (".yaml", ".yml")
SHELL_EXT = (".sh", ".bash")
SKIP_DIRS = {
    ".git",
    ".venv",
    "venv",
    "node_modules",
    "__pycache__",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    ".tox",
}
MAX_BYTES = 2_000_000


@dataclass
class Options:
    """What the user asked for."""

    select: set[str] = field(default_factory=set)
    ignore: set[str] = field(default_factory=set)
    model_dirs: list[Path] = field(default_factory=list)
    fetch_configs: bool = False
    gpu: str | None = None
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))


def iter_files(paths: Iterable[Path]) -> Iterable[Path]:
    """Files to lint: given files as they are; directories walked for YAML and shell."""
    for path in paths:
        if path.is_dir():
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
                for name in sorted(files):
                    if name.endswith(YAML_EXT + SHELL_EXT):
                        yield Path(root) / name
        else:
            yield path


def _input_error(path: str, message: str, line: int = 1, column: int = 1) -> Diagnostic:
    name, severity = ENGINE_CODES["INPUT001"]
    return Diagnostic(
        path,
        line,
        column,
        "INPUT001",
        name,
        severity,
        message,
        "Fix the file so it parses, or exclude it from the lint run.",
    )


def read_launches(path: Path) -> tuple[list[Launch], list[Diagnostic], str]:
    """Launches found in one file, input diagnostics, and the text (for suppressions)."""
    name = str(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        return [], [_input_error(name, f"cannot read: {exc.strerror or exc}")], ""
    if len(raw) > MAX_BYTES:
        return [], [_input_error(name, f"file too large to lint ({len(raw)} bytes)")], ""
    if b"\x00" in raw[:8192]:
        return [], [_input_error(name, "binary file")], ""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return [], [_input_error(name, "not UTF-8 text")], ""
    launches: list[Launch] = []
    problems: list[Diagnostic] = []
    try:
        if name.endswith(YAML_EXT):
            launches, specservers = from_yaml(name, text)
            for doc in specservers:
                try:
                    launches.append(launch_from_specserver(name, doc))
                except SpecServerError as exc:
                    problems.append(
                        _input_error(name, str(exc), exc.position.line, exc.position.column)
                    )
        else:
            launches = from_shell(name, text)
    except InputError as exc:
        problems.append(_input_error(name, str(exc)))
    except (RecursionError, ValueError, TypeError, AttributeError) as exc:
        problems.append(_input_error(name, f"cannot interpret this file: {exc}"))
    return launches, problems, text


class ConfigFinder:
    """Model configs for the context rules, found once per model reference."""

    def __init__(self, options: Options) -> None:
        self.options = options
        self.cache: dict[str, Any] = {}

    def find(self, ref: str | None) -> tuple[dict[str, Any] | None, str | None]:
        if not ref:
            return None, None
        if ref in self.cache:
            cached: tuple[dict[str, Any] | None, str | None] = self.cache[ref]
            return cached
        from specserver_advisor.loaders.configs import (
            ConfigNotFoundError,
            ConfigUnreadableError,
            load_config,
        )

        env = dict(self.options.env)
        if not self.options.fetch_configs:
            env.pop("HF_ENDPOINT", None)
        result: tuple[dict[str, Any] | None, str | None] = (None, f"no config for {ref}")
        candidates = [str(d / ref) for d in self.options.model_dirs] + [ref]
        for candidate in candidates:
            try:
                result = (load_config(candidate, env=env).config, None)
                break
            except (ConfigNotFoundError, ConfigUnreadableError) as exc:
                result = (None, str(exc))
        self.cache[ref] = result
        return result

    def attach(self, launch: Launch) -> None:
        if launch.kind == "bench":
            return
        target, why = self.find(launch.parsed.values.get("model_path"))
        draft, why_d = self.find(launch.parsed.values.get("speculative_draft_model_path"))
        launch.configs.update({"target": target, "draft": draft})
        missing = why if target is None else (why_d if draft is None and why_d else None)
        if missing:
            launch.configs["missing"] = missing
        if launch.gpu_type is None:
            launch.gpu_type = self.options.gpu


def selected(code: str, name: str, options: Options) -> bool:
    """Whether --select/--ignore (codes or names) keep this code."""
    keys = {code.upper(), name.lower()}

    def norm(items: set[str]) -> set[str]:
        return {s.upper() for s in items} | {s.lower() for s in items}

    if options.select and not keys & norm(options.select):
        return False
    return not keys & norm(options.ignore)


def lint(paths: list[Path], options: Options) -> tuple[list[Diagnostic], int]:
    """All diagnostics for the paths (sorted) and the number of files read."""
    finder = ConfigFinder(options)
    launches: list[Launch] = []
    diagnostics: list[Diagnostic] = []
    texts: dict[str, str] = {}
    count = 0
    for path in iter_files(paths):
        count += 1
        found, problems, text = read_launches(path)
        launches += found
        diagnostics += problems
        texts[str(path)] = text
    for launch in launches:
        finder.attach(launch)
    ctx = Context(launches)
    for launch in launches:
        applies = "server" if launch.kind == "specserver" else launch.kind
        for module in RULES.values():
            if launch.kind not in module.APPLIES_TO and applies not in module.APPLIES_TO:
                continue
            if launch.kind == "specserver" and "specserver" not in module.APPLIES_TO:
                continue
            diagnostics += list(module.check(launch, ctx))
    diagnostics = [d for d in diagnostics if selected(d.code, d.rule, options)]
    diagnostics = _apply_suppressions(diagnostics, launches, texts, options)
    unique = {(d.path, d.line, d.column, d.code, d.message): d for d in diagnostics}
    return sorted(unique.values(), key=lambda d: (d.path, d.line, d.column, d.code)), count


def _apply_suppressions(
    diagnostics: list[Diagnostic], launches: list[Launch], texts: dict[str, str], options: Options
) -> list[Diagnostic]:
    by_file = {path: suppressions(text) for path, text in texts.items()}
    used: set[tuple[str, int, str]] = set()
    used_doc: set[tuple[int, str]] = set()
    kept = []
    for d in diagnostics:
        lines = by_file.get(d.path, {})
        hit = None
        owner = next(
            (
                la
                for la in launches
                if la.path == d.path and la.first_line <= d.line <= la.last_line
            ),
            None,
        )
        candidates = [d.line]
        if owner is not None:  # a comment on any line of the object, or just above it
            candidates += list(range(owner.first_line - 1, owner.last_line + 1))
        for line in candidates:
            if d.code in lines.get(line, {}):
                hit = (d.path, line, d.code)
                break
        if hit:
            used.add(hit)
            continue
        if owner is not None and d.code in owner.document_suppressions:
            used_doc.add((id(owner), d.code))
            continue
        kept.append(d)
    name, severity = ENGINE_CODES["SUPP001"]
    for path, lines in by_file.items():
        for line, codes in lines.items():
            for code in codes:
                if (path, line, code) not in used and selected("SUPP001", name, options):
                    kept.append(
                        Diagnostic(
                            path,
                            line,
                            1,
                            "SUPP001",
                            name,
                            severity,
                            f"suppression of {code} matches no finding",
                            "Remove the stale suppression comment.",
                        )
                    )
    for launch in launches:
        for code in launch.document_suppressions:
            if (id(launch), code) not in used_doc and selected("SUPP001", name, options):
                kept.append(
                    Diagnostic(
                        launch.path,
                        launch.start.line,
                        launch.start.column,
                        "SUPP001",
                        name,
                        severity,
                        f"specserver.io/ignore of {code} matches no finding",
                        "Remove the stale annotation entry.",
                    )
                )
    return kept
