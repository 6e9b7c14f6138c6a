"""docs/operator.md's Guarantees and docs/security.md's issue-25 table name the tests that hold
them: each name must exist."""

from __future__ import annotations

import re

from stack import REPO

DOC = REPO / "docs" / "operator.md"


def test_every_test_a_guarantee_names_exists() -> None:
    text = DOC.read_text()
    section = text[
        text.index("## Guarantees") : text.index("\n## ", text.index("## Guarantees") + 1)
    ]
    named = re.findall(r"`(tests/[\w/]+\.py)::(test_\w+)`", section)
    assert len(named) >= 7, "the Guarantees section names its tests as `file::test`"
    missing = [
        f"{path}::{name}"
        for path, name in named
        if not re.search(rf"^(async )?def {name}\(", (REPO / path).read_text(), re.MULTILINE)
    ]
    assert not missing, f"docs/operator.md names tests that do not exist: {missing}"


def test_every_test_security_md_names_exists() -> None:
    text = (REPO / "docs" / "security.md").read_text()
    section = text[
        text.index("## Hostile SpecServers") : text.index("\n## ", text.index("## Hostile"))
    ]
    named = re.findall(r"`(tests/[\w/]+\.py)::(test_\w+)`", section)
    assert len(named) >= 10
    missing = [
        f"{path}::{name}"
        for path, name in named
        if not re.search(rf"^(async )?def {name}\(", (REPO / path).read_text(), re.MULTILINE)
    ]
    assert not missing, f"docs/security.md names tests that do not exist: {missing}"
