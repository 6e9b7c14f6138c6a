"""Output formats for lint diagnostics: text (as ruff prints), json, sarif (2.1.0), github.

Every input-derived string in the text and github formats goes through ``errors.shown`` (the
github format after its own %, CR and LF escapes); the CLI prints the github annotations with
``errors.write_annotations``, the one way to start a line with ``::``.

SARIF locations are relative to the repository root (``%SRCROOT%`` in ``originalUriBaseIds``)
so code scanning can map them. Each rule's markdown help names its section of docs/rules.md
(``docs/rules.md#spec001-max-running-requests-unset``); SARIF's ``helpUri`` and the tool's
``informationUri`` must be absolute URIs, so they are given only where docs/rules.md has a
public address: the project URL labelled ``Rules`` in pyproject's ``[project.urls]`` (unset
while the repository has no public home). Pure: the caller passes the report, the base
directory and that address (``rules_doc_url``).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from functools import cache
from importlib.metadata import PackageNotFoundError, metadata
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

from specserver_advisor import __version__
from specserver_advisor.errors import shown
from specserver_advisor.lint.model import Diagnostic
from specserver_advisor.lint.rules import documentation

SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}
#: The rules documentation, relative to the repository root.
RULES_DOC = "docs/rules.md"
#: The ``[project.urls]`` label whose address is where RULES_DOC is published.
RULES_URL_LABEL = "Rules"
DISTRIBUTION = "specserver"


def rules_url_from(project_urls: list[str]) -> str | None:
    """The ``Rules`` address among ``Project-URL`` metadata entries (``"Label, URL"``)."""
    for entry in project_urls:
        label, _, url = entry.partition(",")
        if label.strip() == RULES_URL_LABEL and url.strip().startswith(("https://", "http://")):
            return url.strip()
    return None


@cache
def rules_doc_url() -> str | None:
    """Where docs/rules.md is published, from the installed distribution's metadata."""
    try:
        entries = metadata(DISTRIBUTION).get_all("Project-URL") or []
    except PackageNotFoundError:
        return None
    return rules_url_from([str(e) for e in entries])


class ReportLike(Protocol):
    diagnostics: list[Diagnostic]
    files: int
    launches: int


def anchor(code: str, name: str) -> str:
    """The GitHub anchor of a code's section in docs/rules.md."""
    return f"{code.lower()}-{name}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def summary(report: ReportLike) -> str:
    """The last line of the text output."""
    looked = f"{_plural(report.files, 'file')}, {_plural(report.launches, 'launch')}"
    looked = looked.replace("launchs", "launches")
    if report.launches == 0 and not report.diagnostics:
        return f"No SGLang launch, benchmark command or SpecServer found ({looked})."
    if not report.diagnostics:
        return f"All checks passed ({looked})."
    counts = Counter(d.severity for d in report.diagnostics)
    errors, warnings = _plural(counts["error"], "error"), _plural(counts["warning"], "warning")
    parts = f"{errors}, {warnings}, {counts['info']} info"
    return f"Found {_plural(len(report.diagnostics), 'finding')} ({parts}) in {looked}."


#: Files named in the no-launch line (the rest are counted).
NO_LAUNCH_NAMED = 10


def no_launch_line(report: ReportLike) -> str | None:
    """The files read where nothing was found (no launch, no finding), when several were read:
    a directory run names them instead of only counting launches."""
    names: list[str] = list(getattr(report, "no_launch", []))
    if not names or report.files < 2:
        return None
    named = ", ".join(shown(n) for n in names[:NO_LAUNCH_NAMED])
    more = len(names) - NO_LAUNCH_NAMED
    rest = f" and {more} more" if more > 0 else ""
    what = "SGLang launch, benchmark command or SpecServer"
    return f"No {what} found in {_plural(len(names), 'file')}: {named}{rest}."


def text(report: ReportLike) -> str:
    lines = []
    for d in report.diagnostics:
        where = f"{shown(d.path)}:{d.line}:{d.column}"
        lines.append(f"{where}: {d.code} [{d.severity}] {d.rule}: {shown(d.message)}")
        lines.append(f"  fix: {shown(d.fix)}")
    lines.append(summary(report))
    quiet = no_launch_line(report)
    if quiet:
        lines.append(quiet)
    return "\n".join(lines)


def as_json(report: ReportLike) -> str:
    return json.dumps([d.to_json() for d in report.diagnostics], indent=2)


def github(report: ReportLike) -> str:
    level = {"error": "error", "warning": "warning", "info": "notice"}

    def esc(value: str) -> str:
        # GitHub's own escapes for %, CR and LF; every other control, bidi or separator
        # character shown as ``shown`` shows it (a message body cannot carry ESC or U+202E).
        value = value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
        return shown(value)

    def prop(value: str) -> str:
        return esc(value).replace(":", "%3A").replace(",", "%2C")

    return "\n".join(
        f"::{level[d.severity]} file={prop(d.path)},line={d.line},col={d.column},"
        f"title={prop(d.code + ' ' + d.rule)}::{esc(d.message + '. Fix: ' + d.fix)}"
        for d in report.diagnostics
    )


def artifact(path: str, base: Path) -> dict[str, str]:
    """A SARIF artifactLocation: relative to %SRCROOT% when under it, else a file: URI."""
    absolute = Path(os.path.abspath(path))
    try:
        relative = absolute.relative_to(base)
    except ValueError:
        return {"uri": absolute.as_uri()}
    return {"uri": quote(relative.as_posix()), "uriBaseId": "%SRCROOT%"}


def sarif_rules(rules_url: str | None = None) -> list[dict[str, Any]]:
    """SARIF reportingDescriptors; ``helpUri`` only with ``rules_url`` (it must be absolute)."""
    rules = []
    for code, doc in documentation().items():
        section = anchor(code, doc.name)
        link = f"{rules_url}#{section}" if rules_url else None
        where = f"[Documentation]({link})" if link else f"Documentation: `{RULES_DOC}#{section}`"
        rule: dict[str, Any] = {
            "id": code,
            "name": doc.name,
            "shortDescription": {"text": doc.summary},
            "fullDescription": {"text": doc.doc},
            "help": {
                "text": f"{doc.summary}\n\n{doc.doc}\n\nFix: {doc.fix}\n\n"
                f"Documentation: {link or f'{RULES_DOC}#{section}'}",
                "markdown": f"**{code} {doc.name}**: {doc.summary}\n\n```text\n{doc.doc}\n```"
                f"\n\nFix: {doc.fix}\n\n{where}",
            },
            "defaultConfiguration": {"level": SARIF_LEVEL[doc.severity]},
        }
        if link:
            rule["helpUri"] = link
        rules.append(rule)
    return rules


def sarif(report: ReportLike, base: Path, rules_url: str | None = None) -> str:
    rules = sarif_rules(rules_url)
    index = {r["id"]: k for k, r in enumerate(rules)}
    results = [
        {
            "ruleId": d.code,
            "ruleIndex": index[d.code],
            "level": SARIF_LEVEL[d.severity],
            "message": {"text": f"{d.message}. Fix: {d.fix}"},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": artifact(d.path, base),
                        "region": {"startLine": max(1, d.line), "startColumn": max(1, d.column)},
                    }
                }
            ],
        }
        for d in report.diagnostics
    ]
    driver: dict[str, Any] = {"name": "specserver-advisor", "version": __version__}
    if rules_url:
        driver["informationUri"] = rules_url
    driver["rules"] = rules
    doc = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": driver},
                "originalUriBaseIds": {"%SRCROOT%": {"uri": base.as_uri().rstrip("/") + "/"}},
                "results": results,
            }
        ],
    }
    return json.dumps(doc, indent=2)


def render(fmt: str, report: ReportLike, base: Path, rules_url: str | None = None) -> str:
    """The report in one format (``base``: the directory SARIF URIs are relative to;
    ``rules_url``: where docs/rules.md is published, if anywhere)."""
    if fmt == "sarif":
        return sarif(report, base, rules_url)
    return {"text": text, "json": as_json, "github": github}[fmt](report)
