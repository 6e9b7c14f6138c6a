"""One name per concept: no class name is defined twice across the three packages (the
advisor, the operator, the simulated engine), so a name in a traceback, a doc or a review
means one thing (issue 26: Plan, Launch, ModelConfigs, Decision and Settings each had two)."""

from __future__ import annotations

import ast
from collections import defaultdict

from stack import REPO

PACKAGES = (
    "advisor/specserver_advisor",
    "operator/specserver_operator",
    "engine-image/specserver_engine",
)


def test_no_class_name_is_defined_twice() -> None:
    defined: dict[str, list[str]] = defaultdict(list)
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            for node in ast.parse(path.read_text(), str(path)).body:
                if isinstance(node, ast.ClassDef):
                    defined[node.name].append(str(path.relative_to(REPO)))
    twice = {name: paths for name, paths in defined.items() if len(paths) > 1}
    assert twice == {}
