"""The layers hold: import-linter's contracts (pyproject.toml) pass on the tree, and fail, naming
the contract, when a forbidden import is planted in a copy of it.

``scripts/test`` runs ``lint-imports`` itself; these tests show that the contracts are not empty
words: each planted import below breaks the contract that forbids it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stack import REPO

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
ROOTS = ("advisor", "operator", "engine-image")


def run_contracts(tree: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(str(tree / r) for r in ROOTS))
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo", str(tree / "pyproject.toml")],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def copy_tree(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "data")
    for root in ROOTS:
        shutil.copytree(REPO / root, tree / root, ignore=ignore)
    shutil.copy(REPO / "pyproject.toml", tree / "pyproject.toml")
    return tree


def test_the_tree_keeps_every_contract() -> None:
    done = run_contracts(REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout, done.stdout
    kept = [line for line in done.stdout.splitlines() if " KEPT" in line]
    assert len(kept) == 5, done.stdout
    assert "ignored import" not in done.stdout, "the contracts hold without exceptions"


PLANTED = [
    # (file in the copy, the planted import, the contract that must break)
    (
        "operator/specserver_operator/core/names.py",
        "from specserver_operator.kube import client",
        "operator layers",
    ),
    (
        "operator/specserver_operator/core/conditions.py",
        "import urllib3",
        "the operator's pure core does no I/O",
    ),
    (
        "operator/specserver_operator/core/drift.py",
        "import kopf",
        "the operator's pure core does no I/O",
    ),
    (
        "advisor/specserver_advisor/sglang/flags.py",
        "from specserver_advisor.launch import model",
        "advisor layers",
    ),
    (
        "advisor/specserver_advisor/launch/args.py",
        "from specserver_advisor.lint import model",
        "advisor layers",
    ),
    (
        "advisor/specserver_advisor/perf/plan.py",
        "from specserver_advisor.loaders import configs",
        "advisor layers",
    ),
    (
        "advisor/specserver_advisor/models.py",
        "import specserver_operator.core.names",
        "the advisor never imports the operator, the engine or kopf",
    ),
]


@pytest.mark.parametrize(("path", "line", "contract"), PLANTED, ids=[p[0] for p in PLANTED])
def test_a_planted_import_breaks_its_contract(
    tmp_path: Path, path: str, line: str, contract: str
) -> None:
    tree = copy_tree(tmp_path)
    assert run_contracts(tree).returncode == 0, "the copy must pass before the plant"
    target = tree / path
    target.write_text(target.read_text() + f"\n{line}  # planted by the test\n")
    done = run_contracts(tree)
    assert done.returncode != 0, done.stdout
    assert f"{contract} BROKEN" in done.stdout, done.stdout
