"""Output formats for lint diagnostics: text (as ruff prints), json, sarif (2.1.0), github.

SARIF locations are relative to the repository root (``%SRCROOT%`` in ``originalUriBaseIds``)
so code scanning can map them; each rule carries a ``helpUri`` to its section of docs/rules.md
and markdown help. Pure: the caller passes the report and the base directory.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

from specserver_advisor import __version__
from specserver_advisor.lint.model import Diagnostic
from specserver_advisor.lint.rules import documentation

SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}
RULES_DOC_URL = "https://github.com/specserver/specserver/blob/main/docs/rules.md"


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


def text(report: ReportLike) -> str:
    lines = []
    for d in report.diagnostics:
        lines.append(f"{d.path}:{d.line}:{d.column}: {d.code} [{d.severity}] {d.rule}: {d.message}")
        lines.append(f"  fix: {d.fix}")
    lines.append(summary(report))
    return "\n".join(lines)


def as_json(report: ReportLike) -> str:
    return json.dumps([d.to_json() for d in report.diagnostics], indent=2)


def github(report: ReportLike) -> str:
    level = {"error": "error", "warning": "warning", "info": "notice"}

    def esc(value: str) -> str:
        return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")

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


def sarif_rules() -> list[dict[str, Any]]:
    rules = []
    for code, doc in documentation().items():
        help_uri = f"{RULES_DOC_URL}#{anchor(code, doc.name)}"
        rules.append(
            {
                "id": code,
                "name": doc.name,
                "shortDescription": {"text": doc.summary},
                "fullDescription": {"text": doc.doc},
                "helpUri": help_uri,
                "help": {
                    "text": f"{doc.summary}\n\n{doc.doc}\n\nFix: {doc.fix}",
                    "markdown": f"**{code} {doc.name}**: {doc.summary}\n\n```text\n{doc.doc}\n```"
                    f"\n\nFix: {doc.fix}\n\n[Documentation]({help_uri})",
                },
                "defaultConfiguration": {"level": SARIF_LEVEL[doc.severity]},
            }
        )
    return rules


def sarif(report: ReportLike, base: Path) -> str:
    rules = sarif_rules()
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
    doc = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "specserver-advisor",
                        "version": __version__,
                        "informationUri": RULES_DOC_URL,
                        "rules": rules,
                    }
                },
                "originalUriBaseIds": {"%SRCROOT%": {"uri": base.as_uri().rstrip("/") + "/"}},
                "results": results,
            }
        ],
    }
    return json.dumps(doc, indent=2)


def render(fmt: str, report: ReportLike, base: Path) -> str:
    """The report in one format (``base``: the directory SARIF URIs are relative to)."""
    if fmt == "sarif":
        return sarif(report, base)
    return {"text": text, "json": as_json, "github": github}[fmt](report)
