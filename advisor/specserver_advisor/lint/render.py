"""Output formats for lint diagnostics: text, json, sarif (2.1.0), github annotations."""

from __future__ import annotations

import json
from typing import Any

from specserver_advisor import __version__
from specserver_advisor.lint.model import Diagnostic
from specserver_advisor.lint.rules import ENGINE_CODES, RULES

SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}


def text(diags: list[Diagnostic]) -> str:
    return "\n".join(f"{d.path}:{d.line}:{d.column}: {d.code} {d.rule} {d.message}" for d in diags)


def as_json(diags: list[Diagnostic]) -> str:
    return json.dumps([d.to_json() for d in diags], indent=2)


def github(diags: list[Diagnostic]) -> str:
    level = {"error": "error", "warning": "warning", "info": "notice"}

    def esc(value: str) -> str:
        return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")

    return "\n".join(
        f"::{level[d.severity]} file={esc(d.path)},line={d.line},col={d.column},"
        f"title={d.code} {d.rule}::{esc(d.message)}"
        for d in diags
    )


def sarif(diags: list[Diagnostic]) -> str:
    rules: list[dict[str, Any]] = []
    for code, module in RULES.items():
        rules.append(
            {
                "id": code,
                "name": module.NAME,
                "shortDescription": {"text": module.SUMMARY},
                "fullDescription": {"text": (module.__doc__ or "").strip()},
                "help": {"text": module.FIX},
                "defaultConfiguration": {"level": SARIF_LEVEL[module.SEVERITY]},
            }
        )
    for code, (name, severity) in ENGINE_CODES.items():
        rules.append(
            {
                "id": code,
                "name": name,
                "shortDescription": {"text": name},
                "help": {"text": name},
                "defaultConfiguration": {"level": SARIF_LEVEL[severity]},
            }
        )
    results = [
        {
            "ruleId": d.code,
            "level": SARIF_LEVEL[d.severity],
            "message": {"text": f"{d.message}. Fix: {d.fix}"},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": d.path},
                        "region": {"startLine": max(1, d.line), "startColumn": max(1, d.column)},
                    }
                }
            ],
        }
        for d in diags
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
                        "informationUri": "https://specserver.io",
                        "rules": rules,
                    }
                },
                "results": results,
            }
        ],
    }
    return json.dumps(doc, indent=2)


RENDERERS = {"text": text, "json": as_json, "sarif": sarif, "github": github}
