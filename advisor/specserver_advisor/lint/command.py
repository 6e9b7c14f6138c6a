"""``specserver-advisor lint`` and ``explain``: arguments, configuration files, exit codes.

Exit 0 clean, 1 findings at or above ``--fail-on`` (default warning), 2 usage error or
unreadable input. Configuration: ``[tool.specserver-advisor]`` in pyproject.toml or
``.specserver-advisor.yaml`` (keys select, ignore, fail-on, model-dirs, gpu).
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from pathlib import Path
from typing import Any

from specserver_advisor.errors import UsageError
from specserver_advisor.lint.model import SEVERITIES


def add_parsers(sub: Any) -> None:
    """Register lint and explain."""
    p = sub.add_parser("lint", help="find speculative-decoding mistakes in config files")
    p.add_argument("paths", nargs="+", type=Path)
    p.add_argument("--format", choices=["text", "json", "sarif", "github"], default="text")
    p.add_argument("--fail-on", choices=SEVERITIES, default=None)
    p.add_argument("--select", action="append", default=[], help="codes or names (repeatable)")
    p.add_argument("--ignore", action="append", default=[], help="codes or names (repeatable)")
    p.add_argument(
        "--model-dir",
        action="append",
        default=[],
        type=Path,
        help="directory to look up model configs in (repeatable)",
    )
    p.add_argument(
        "--fetch-configs", action="store_true", help="allow fetching configs from $HF_ENDPOINT"
    )
    p.add_argument("--gpu", help="GPU type for the memory rule (SPEC009)")
    p.add_argument("--config", type=Path, help="configuration file (default: discovered)")
    e = sub.add_parser("explain", help="print a rule's documentation")
    e.add_argument("rule", help="code (SPEC003) or name (context-override-env)")


def load_settings(path: Path | None) -> dict[str, Any]:
    """Settings from an explicit file, pyproject.toml or .specserver-advisor.yaml in cwd."""
    candidates = [path] if path else [Path(".specserver-advisor.yaml"), Path("pyproject.toml")]
    for candidate in candidates:
        if candidate is None or not candidate.exists():
            if path is not None:
                raise UsageError(f"config file {path} not found")
            continue
        try:
            if candidate.suffix == ".toml":
                data = tomllib.loads(candidate.read_text())
                section = (data.get("tool") or {}).get("specserver-advisor")
                if section is None:
                    continue
                return dict(section)
            from ruamel.yaml import YAML

            loaded = YAML(typ="safe").load(candidate.read_text()) or {}
            if not isinstance(loaded, dict):
                raise UsageError(f"{candidate}: expected a mapping")
            return dict(loaded)
        except (tomllib.TOMLDecodeError, ValueError) as exc:
            raise UsageError(f"{candidate}: {exc}") from exc
    return {}


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [str(v) for v in value]


def run_lint(a: argparse.Namespace) -> int:
    """Lint, print, return the exit code."""
    from specserver_advisor.lint import render
    from specserver_advisor.lint.engine import Options, lint

    settings = load_settings(a.config)
    fail_on = a.fail_on or settings.get("fail-on") or "warning"
    if fail_on not in SEVERITIES:
        raise UsageError(f"fail-on must be one of {', '.join(SEVERITIES)}")
    for p in a.paths:
        if not p.exists():
            raise UsageError(f"{p}: no such file or directory")
    options = Options(
        select=set(a.select or _as_list(settings.get("select"))),
        ignore=set(a.ignore) | set(_as_list(settings.get("ignore"))),
        model_dirs=list(a.model_dir) + [Path(d) for d in _as_list(settings.get("model-dirs"))],
        fetch_configs=a.fetch_configs,
        gpu=a.gpu or settings.get("gpu"),
    )
    diagnostics, _ = lint(a.paths, options)
    out = render.RENDERERS[a.format](diagnostics)
    if out:
        print(out)
    if any(d.code == "INPUT001" for d in diagnostics):
        return 2
    threshold = SEVERITIES.index(fail_on)
    return 1 if any(SEVERITIES.index(d.severity) >= threshold for d in diagnostics) else 0


def run_explain(a: argparse.Namespace) -> int:
    """Print a rule's documentation."""
    from specserver_advisor.lint.rules import lookup

    try:
        module = lookup(a.rule)
    except KeyError as exc:
        raise UsageError(f"no rule {a.rule!r}; see docs/rules.md") from exc
    print(f"{module.CODE} {module.NAME} ({module.SEVERITY})")
    print((module.__doc__ or "").strip().split("\n", 1)[-1].rstrip())
    print(f"Fix: {module.FIX}")
    sys.stdout.flush()
    return 0
