"""Tripwires for the source layout: no package may shadow the standard library's ``operator``."""

from __future__ import annotations

import importlib
import subprocess
import sys

from stack import REPO


def test_operator_source_root_has_no_init() -> None:
    assert not (REPO / "operator" / "__init__.py").exists(), (
        "operator/__init__.py would make 'operator' a package that shadows the stdlib module"
    )
    assert not (REPO / "advisor" / "__init__.py").exists()


def test_import_operator_is_the_standard_library() -> None:
    # A fresh interpreter started in the repo root, where a package named 'operator' would win.
    code = "import operator, sys; print(operator.__file__ or ''); print(hasattr(operator, 'add'))"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    path, has_add = done.stdout.split("\n")[:2]
    assert has_add == "True"
    assert str(REPO / "operator") not in path


def test_packages_import_from_their_source_roots() -> None:
    for name, root in (
        ("specserver_advisor", "advisor"),
        ("specserver_operator", "operator"),
        ("specserver_engine", "engine-image"),
    ):
        module = importlib.import_module(name)
        assert module.__file__ is not None
        assert str(REPO / root) in module.__file__
