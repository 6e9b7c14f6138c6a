"""Which files a lint run reads: directory walks, ``--exclude`` patterns, Helm chart templates.

Patterns are shell globs. A pattern without ``/`` matches any one path component (``.venv``,
``*.j2``); a pattern with ``/`` matches the path relative to the working directory, or its end
(``deploy/old/*``). Excludes apply to files named on the command line too, so a pre-commit hook
that passes every changed file honours them. Helm chart templates (files under a ``templates/``
folder next to a ``Chart.yaml``) are skipped by default: lint ``helm template`` output instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from functools import lru_cache
from pathlib import Path, PurePath

YAML_EXT = (".yaml", ".yml")
SHELL_EXT = (".sh", ".bash")
#: The other forms ``finder`` reads (Markdown, notebooks, Python, JSON; Dockerfile and
#: Makefile by name).
OTHER_EXT = (".md", ".markdown", ".ipynb", ".py", ".json", ".mk", ".dockerfile")
OTHER_NAMES = ("Dockerfile", "Containerfile", "Makefile", "GNUmakefile", "makefile")
#: A pseudo-pattern in the default excludes: Helm chart templates (see the module docstring).
HELM_TEMPLATES = "helm-chart-templates"
DEFAULT_EXCLUDE = (
    ".git",
    ".venv",
    "venv",
    "node_modules",
    "__pycache__",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    ".tox",
    HELM_TEMPLATES,
)
STDIN = Path("-")


@dataclass
class FileSelection:
    """The files to lint, and how many were left out by the excludes."""

    files: list[Path] = field(default_factory=list)
    excluded: list[Path] = field(default_factory=list)


def is_helm_template(path: Path) -> bool:
    """A chart's ``templates/`` folder (a ``Chart.yaml`` beside it), or a file in one."""
    return path.name == "templates" and (path.parent / "Chart.yaml").is_file()


def excluded(path: Path, patterns: Iterable[str]) -> bool:
    """Whether ``path`` (relative to the working directory when under it) matches a pattern."""
    text = str(path)
    if os.path.isabs(text):
        relative = os.path.relpath(text)
        text = text if relative.startswith("..") else relative
    return _excluded(text, tuple(patterns))


@lru_cache(maxsize=4096)
def _excluded(path: str, patterns: tuple[str, ...]) -> bool:
    pure = PurePath(os.path.normpath(path))
    parent = str(pure.parent)
    if parent not in (".", str(pure)) and _excluded(parent, patterns):
        return True
    text = pure.as_posix()
    for pattern in patterns:
        if pattern == HELM_TEMPLATES:
            if is_helm_template(Path(pure)):
                return True
        elif "/" in pattern:
            stripped = pattern.rstrip("/")
            if fnmatchcase(text, stripped) or fnmatchcase(text, f"*/{stripped}"):
                return True
        elif fnmatchcase(pure.name, pattern):
            return True
    return False


def lintable(name: str) -> bool:
    """A file name the directory walk picks up."""
    return (
        name.endswith(YAML_EXT + SHELL_EXT + OTHER_EXT)
        or name in OTHER_NAMES
        or name.startswith(("Dockerfile.", "Containerfile."))
    )


def select_files(paths: Iterable[Path], patterns: list[str]) -> FileSelection:
    """Files named or found under directories, minus the excluded ones."""
    out = FileSelection()
    for path in paths:
        if path == STDIN:
            out.files.append(path)
            continue
        if not path.is_dir():
            (out.excluded if excluded(path, patterns) else out.files).append(path)
            continue
        for root, dirs, names in os.walk(path):
            here = Path(root)
            skipped = [d for d in sorted(dirs) if excluded(here / d, patterns)]
            out.excluded += [here / d for d in skipped]
            dirs[:] = [d for d in sorted(dirs) if d not in skipped]
            for name in sorted(names):
                if lintable(name):
                    file = here / name
                    (out.excluded if excluded(file, patterns) else out.files).append(file)
    return out


def iter_files(paths: Iterable[Path], patterns: list[str] | None = None) -> Iterator[Path]:
    """The files to lint (default excludes when no patterns are given)."""
    yield from select_files(paths, list(DEFAULT_EXCLUDE if patterns is None else patterns)).files
