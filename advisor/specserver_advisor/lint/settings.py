"""Lint configuration files: discovery from the working directory up to the repository root.

In each directory from the start upwards, ``.specserver-advisor.yaml`` wins over a
``pyproject.toml`` with a ``[tool.specserver-advisor]`` table; the walk stops at the directory
holding ``.git`` (the repository root) or at the filesystem root. Unknown keys are a usage error
naming the valid keys; relative paths in a file are relative to that file.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specserver_advisor import bounded
from specserver_advisor.bounded import InputLimitError
from specserver_advisor.errors import UsageError
from specserver_advisor.loaders import bounded_yaml
from specserver_advisor.loaders.reading import read_text

KEYS = (
    "select",
    "extend-select",
    "ignore",
    "fail-on",
    "model-dirs",
    "gpu",
    "exclude",
    "extend-exclude",
)
YAML_NAME = ".specserver-advisor.yaml"
#: A settings file (or the pyproject.toml holding one) larger than this is refused unread.
MAX_SETTINGS_BYTES = 1_000_000


@dataclass
class SettingsFile:
    """One configuration file's settings (empty when none was found)."""

    values: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None

    def items(self, key: str) -> list[str] | None:
        """A list setting (a comma string or a list), None when absent."""
        value = self.values.get(key)
        if value is None:
            return None
        if isinstance(value, str):
            return [v.strip() for v in value.split(",") if v.strip()]
        if isinstance(value, list) and all(isinstance(v, str | int) for v in value):
            return [str(v) for v in value]
        raise UsageError(
            f"{self.path}: {key} must be a list of strings or a comma-separated string"
        )

    def paths(self, key: str) -> list[Path]:
        """A list of paths, relative to the configuration file."""
        base = self.path.parent if self.path else Path()
        return [base / p for p in self.items(key) or []]


def repo_root(start: Path) -> Path | None:
    """The nearest directory at or above ``start`` holding ``.git``."""
    for directory in [start, *start.parents]:
        if (directory / ".git").exists():
            return directory
    return None


def _read(path: Path) -> dict[str, Any] | None:
    """The settings in one file; None for a pyproject.toml without our table.

    Read through ``loaders.reading`` (size before reading, UTF-8) and, for YAML,
    ``loaders.bounded_yaml`` (depth and alias budget): every failure names the file.
    """
    try:
        text = read_text(path, str(path), max_bytes=MAX_SETTINGS_BYTES)
        if path.suffix == ".toml":
            tool = tomllib.loads(text).get("tool") or {}
            if not isinstance(tool, dict):
                raise UsageError(f"{path}: tool: expected a table, got {type(tool).__name__}")
            section = tool.get("specserver-advisor")
            if section is None:
                return None
            loaded: Any = bounded.check_numbers(section, str(path))  # TOML builds 0x... first
        else:
            loaded = bounded_yaml.load(text, str(path)) or {}
    except InputLimitError as exc:
        raise UsageError(str(exc)) from exc
    except (tomllib.TOMLDecodeError, ValueError, RecursionError) as exc:
        raise UsageError(f"{path}: {exc}") from exc
    if not isinstance(loaded, dict):
        raise UsageError(f"{path}: expected a mapping of settings")
    unknown = sorted(str(k) for k in loaded if k not in KEYS)
    if unknown:
        raise UsageError(f"{path}: unknown key(s) {', '.join(unknown)}; valid: {', '.join(KEYS)}")
    return dict(loaded)


def discover(start: Path) -> Path | None:
    """The configuration file that applies to ``start`` (a directory), or None."""
    root = repo_root(start)
    for directory in [start, *start.parents]:
        candidate = directory / YAML_NAME
        if candidate.is_file():
            return candidate
        pyproject = directory / "pyproject.toml"
        if pyproject.is_file() and _read(pyproject) is not None:
            return pyproject
        if directory == root:
            break
    return None


def load_settings(explicit: Path | None, start: Path) -> SettingsFile:
    """The settings from ``--config`` or the discovered file."""
    if explicit is not None:
        if not explicit.is_file():
            raise UsageError(f"config file {explicit} not found")
        values = _read(explicit)
        if values is None:
            raise UsageError(f"{explicit}: no [tool.specserver-advisor] table")
        return SettingsFile(values, explicit)
    found = discover(start.resolve())
    if found is None:
        return SettingsFile()
    return SettingsFile(_read(found) or {}, found)
