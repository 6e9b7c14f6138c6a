"""The test command's closing lines: per tier and in total, how many tests passed, failed and
were skipped, read from each pytest run's JUnit XML (``scripts/test``). Exits 1 when a tier's
file is missing or holds no test (a tier that ran nothing is a broken run, not a pass) or when
any test failed. Standard library only: it runs before and outside the project's virtualenv.

Usage: python3 scripts/junit_totals.py TIER.xml [TIER.xml ...]
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def counts(path: Path) -> dict[str, int]:
    """tests, failures (failures + errors) and skipped over every testsuite of one file."""
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    total = {"tests": 0, "failed": 0, "skipped": 0}
    for suite in suites:
        total["tests"] += int(suite.get("tests", 0))
        total["failed"] += int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        total["skipped"] += int(suite.get("skipped", 0))
    return total


def main(argv: list[str]) -> int:
    ok = True
    grand = {"tests": 0, "failed": 0, "skipped": 0}
    for name in argv:
        path = Path(name)
        tier = path.stem
        if not path.is_file():
            print(f"{tier}: no results (the tier did not run to the end)")
            ok = False
            continue
        c = counts(path)
        passed = c["tests"] - c["failed"] - c["skipped"]
        print(f"{tier}: {passed} passed, {c['failed']} failed, {c['skipped']} skipped")
        if c["tests"] == 0:
            print(f"{tier}: collected no tests; failing the run")
            ok = False
        for key in grand:
            grand[key] += c[key]
    passed = grand["tests"] - grand["failed"] - grand["skipped"]
    print(f"total: {passed} passed, {grand['failed']} failed, {grand['skipped']} skipped")
    return 0 if ok and grand["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
