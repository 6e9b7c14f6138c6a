"""``specserver-advisor lint`` and ``explain``: arguments, configuration, exit codes.

Exit 0 clean, 1 findings at or above ``--fail-on`` (default warning), 2 usage error (an unknown
rule, option value or configuration key, with the valid choices) or unreadable input.
Configuration: ``[tool.specserver-advisor]`` in pyproject.toml or ``.specserver-advisor.yaml``,
discovered from the working directory up to the repository root (``settings.py``).
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path
from typing import Any

from specserver_advisor.errors import UsageError, shown, write_annotations
from specserver_advisor.lint.files import DEFAULT_EXCLUDE, STDIN
from specserver_advisor.lint.model import SEVERITIES
from specserver_advisor.lint.selection import enabled_codes
from specserver_advisor.lint.settings import SettingsFile, load_settings, repo_root


def add_parsers(sub: Any) -> None:
    """Register lint and explain."""
    p = sub.add_parser("lint", help="find speculative-decoding mistakes in config files")
    p.add_argument("paths", nargs="+", type=Path, help="files or directories; - reads stdin")
    p.add_argument("--format", choices=["text", "json", "sarif", "github"], default="text")
    p.add_argument("--fail-on", choices=SEVERITIES, default=None)
    p.add_argument(
        "--select",
        action="append",
        default=None,
        help="codes, names, prefixes or ALL; comma-separated, repeatable (default ALL)",
    )
    p.add_argument("--extend-select", action="append", default=[], help="add to the selection")
    p.add_argument("--ignore", action="append", default=[], help="codes, names or prefixes")
    p.add_argument(
        "--exclude",
        action="append",
        default=None,
        help="glob patterns to skip, replacing the defaults (repeatable, comma-separated)",
    )
    p.add_argument("--extend-exclude", action="append", default=[], help="add exclude patterns")
    p.add_argument(
        "--stdin-filename", default=None, help="name (and kind, by suffix) of what - reads"
    )
    p.add_argument(
        "--model-dir",
        action="append",
        default=[],
        help="directory to look up model configs in, or PATH=DIR: a model at or under the "
        "absolute (container) path PATH is looked up under DIR (repeatable)",
    )
    p.add_argument(
        "--fetch-configs", action="store_true", help="allow fetching configs from $HF_ENDPOINT"
    )
    p.add_argument("--gpu", help="GPU type for the memory rule (SPEC009)")
    p.add_argument("--config", type=Path, help="configuration file (default: discovered)")
    e = sub.add_parser("explain", help="print a rule's documentation")
    e.add_argument("rule", help="code (SPEC003) or name (context-override-env)")


def _patterns(values: list[str] | None) -> list[str] | None:
    if values is None:
        return None
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


def build_options(a: argparse.Namespace, settings: SettingsFile) -> Any:
    """The engine options from the arguments over the settings (arguments win)."""
    from specserver_advisor.lint.engine import Options

    select = a.select if a.select is not None else settings.items("select")
    enabled = enabled_codes(
        select,
        [*(settings.items("extend-select") or []), *a.extend_select],
        [*(settings.items("ignore") or []), *a.ignore],
    )
    exclude = _patterns(a.exclude) or settings.items("exclude") or list(DEFAULT_EXCLUDE)
    exclude += [*(settings.items("extend-exclude") or []), *(_patterns(a.extend_exclude) or [])]
    gpu = a.gpu or settings.values.get("gpu")
    dirs, maps = model_dirs(a.model_dir, Path(), "--model-dir")
    base = settings.path.parent if settings.path else Path()
    settings_dirs, settings_maps = model_dirs(
        settings.items("model-dirs") or [], base, "model-dirs"
    )
    stdin = _read_stdin(a.stdin_filename or "-") if STDIN in a.paths else None
    return Options(
        enabled=enabled,
        exclude=exclude,
        model_dirs=[*dirs, *settings_dirs],
        model_maps=[*maps, *settings_maps],
        fetch_configs=a.fetch_configs,
        gpu=str(gpu) if gpu else None,
        stdin=stdin,
        stdin_name=a.stdin_filename or "-",
    )


def model_dirs(
    values: list[str], base: Path, where: str
) -> tuple[list[Path], list[tuple[str, Path]]]:
    """Folders (relative to ``base``) and ``PATH=DIR`` pairs from ``--model-dir`` values or the
    settings' ``model-dirs``; a pair's PATH must be absolute (the path in the container)."""
    dirs: list[Path] = []
    maps: list[tuple[str, Path]] = []
    for value in values:
        path, eq, local = str(value).partition("=")
        if not eq:
            dirs.append(base / value)
        elif path.startswith("/") and local:
            maps.append((path, base / local))
        else:
            raise UsageError(
                f"{where} {value!r}: a PATH=DIR pair needs an absolute PATH (the model path "
                "the launch uses) and a local DIR"
            )
    return dirs, maps


def _read_stdin(name: str) -> bytes:
    """What ``-`` reads: bytes, decoded later like a named file's (INPUT001 when not UTF-8)."""
    from specserver_advisor.bounded import InputLimitError
    from specserver_advisor.lint.engine import MAX_BYTES
    from specserver_advisor.loaders.reading import read_stream

    binary = getattr(sys.stdin, "buffer", None)
    try:
        if binary is None:  # a text stream put in place of stdin: its characters as UTF-8
            text = sys.stdin.read(MAX_BYTES + 1)
            raw = text.encode("utf-8", "surrogateescape")
            return read_stream(io.BytesIO(raw), name, max_bytes=MAX_BYTES)
        return read_stream(binary, name, max_bytes=MAX_BYTES)
    except InputLimitError as exc:
        raise UsageError(str(exc)) from exc


#: Paths one lint run takes on its command line (a shell passes far more; none needs them).
MAX_PATHS = 10_000


def _distinct_paths(paths: list[Path]) -> list[Path]:
    """The command line's paths, each once (in first-given order), every one checked to exist
    before any is read; a name the file system refuses (longer than NAME_MAX, a NUL) is a
    usage error naming it, not a traceback."""
    if len(paths) > MAX_PATHS:
        raise UsageError(f"{len(paths):,} paths given; at most {MAX_PATHS:,} per run")
    out: list[Path] = []
    seen: set[Path] = set()
    for p in paths:
        if p in seen:
            continue
        seen.add(p)
        if p != STDIN:
            try:
                exists = p.exists()
            except (OSError, ValueError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                raise UsageError(f"{shown(p)}: {reason}") from None
            if not exists:
                raise UsageError(f"{shown(p)}: no such file or directory")
        out.append(p)
    return out


def run_lint(a: argparse.Namespace) -> int:
    """Lint, print, return the exit code."""
    from specserver_advisor.lint import render
    from specserver_advisor.lint.engine import run

    settings = load_settings(a.config, Path.cwd())
    fail_on = a.fail_on or settings.values.get("fail-on") or "warning"
    if fail_on not in SEVERITIES:
        raise UsageError(f"fail-on must be one of {', '.join(SEVERITIES)}, got {fail_on!r}")
    paths = _distinct_paths(a.paths)
    options = build_options(a, settings)
    report = run(paths, options)
    base = repo_root(Path.cwd().resolve()) or Path.cwd().resolve()
    out = render.render(a.format, report, base, render.rules_doc_url())
    if out and a.format == "github":
        write_annotations(out)  # the tool's own ``::error`` lines; bodies escaped by render
    elif out:
        print(out)
    if report.files == 0:
        named = " ".join(shown(p) for p in paths)
        print(
            f"specserver-advisor: nothing linted: no YAML, JSON, shell, Markdown, notebook, "
            f"Python, Dockerfile or Makefile files in {named}"
            + (f" ({report.excluded} excluded)" if report.excluded else ""),
            file=sys.stderr,
        )
        return 2 if not report.excluded else 0
    if report.launches == 0 and a.format != "text":
        print(
            f"specserver-advisor: {report.files} file(s) read, no SGLang launch, benchmark "
            "command or SpecServer found",
            file=sys.stderr,
        )
    if any(d.code == "INPUT001" for d in report.diagnostics):
        return 2
    threshold = SEVERITIES.index(fail_on)
    return 1 if any(SEVERITIES.index(d.severity) >= threshold for d in report.diagnostics) else 0


def run_explain(a: argparse.Namespace) -> int:
    """Print the documentation of any code the tool can print."""
    from specserver_advisor.lint.rules import describe
    from specserver_advisor.lint.selection import valid_choices

    try:
        doc = describe(a.rule)
    except KeyError as exc:
        raise UsageError(f"no rule {a.rule!r}; {valid_choices()}") from exc
    print(f"{doc.code} {doc.name} ({doc.severity})")
    print(doc.summary)
    print(doc.doc)
    print(f"Fix: {doc.fix}")
    sys.stdout.flush()
    return 0
