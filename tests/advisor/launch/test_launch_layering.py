"""The launch model imports nothing above it: not the linter, not replay, not even in a function.

Render + lint is composed one floor up (``launchlint``); the policy's neutral context lives in
the policy layer (``policy_model``). Read from the source, so an import hidden inside a function
(how ``launch_findings.rule_findings`` used to reach the linter) counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from stack import REPO

ADVISOR = REPO / "advisor" / "specserver_advisor"
LAUNCH_MODEL = sorted(p.name for p in (ADVISOR / "launch").glob("*.py"))
ABOVE = ("specserver_advisor.lint", "specserver_advisor.replay", "specserver_advisor.cli")


def imported(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth of its code."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{alias.name}" for alias in node.names)
    return out


@pytest.mark.parametrize("name", LAUNCH_MODEL)
def test_the_launch_model_imports_nothing_above_it(name: str) -> None:
    above = sorted(
        m
        for m in imported(ADVISOR / "launch" / name)
        if any(m == a or m.startswith(a + ".") for a in ABOVE)
    )
    assert above == [], f"{name} imports {above}"


def test_the_composition_sits_above_both() -> None:
    modules = imported(ADVISOR / "lint" / "launchlint.py")
    assert "specserver_advisor.launch.model" in modules
    assert any(m.startswith("specserver_advisor.lint.") for m in modules)
