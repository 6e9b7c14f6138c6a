"""Tripwires for the source layout: no package may shadow the standard library's ``operator``;
only entry points and ground leaves sit at the top of a package; every layer says what it is."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

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


#: The only modules at the top of each package: entry points and the ground leaves (README's
#: layout table); everything else lives in a layer package.
TOP_LEVEL = {
    "advisor/specserver_advisor": {
        "__init__",
        "models",
        "findings",
        "errors",
        "gpus",
        "bounded",
        "structural",
    },
    "operator/specserver_operator": {"__init__", "main", "handlers", "settings"},
    "engine-image/specserver_engine": {
        "__init__",
        "cli",
        "launch",
        "preflight",
        "loadgen",
        "ports",
    },
}


def test_only_entry_points_and_ground_leaves_sit_at_the_top() -> None:
    for root, allowed in TOP_LEVEL.items():
        found = {p.stem for p in (REPO / root).glob("*.py")}
        assert found == allowed, f"{root}: move {sorted(found - allowed)} into a layer package"


def test_every_package_says_what_its_layer_is() -> None:
    for root in TOP_LEVEL:
        for init in (REPO / root).rglob("__init__.py"):
            doc = ast.get_docstring(ast.parse(init.read_text()))
            assert doc and len(doc) > 40, f"{init.relative_to(REPO)} needs a docstring"


def test_the_readme_layout_table_names_every_layer_package() -> None:
    readme = (REPO / "README.md").read_text()
    for root in TOP_LEVEL:
        for init in (REPO / root).rglob("__init__.py"):
            package = init.parent.relative_to(REPO / root.split("/")[0])
            if package.parent == Path(".") or "rules" in package.parts:
                continue
            assert f"`{package.relative_to(package.parts[0])}/`" in readme, (
                f"README's layout table lacks {package}"
            )


#: Test folders named for something other than a layer package: the advisor's ground modules
#: (models, findings, errors, gpus, bounded) and the operator's entry point and settings.
TEST_FOLDERS_BESIDE_LAYERS = {"advisor": {"ground"}, "operator": {"main"}}


def _layers(package_root: Path) -> set[str]:
    return {p.parent.name for p in package_root.glob("*/__init__.py")}


def test_the_test_tree_mirrors_the_packages() -> None:
    """tests/advisor/<layer>/ and tests/operator/<layer>/ (issue 36): a package's tests are found
    by its path; no test file sits loose above the layer folders, each folder has a conftest."""
    for side, root in (
        ("advisor", "advisor/specserver_advisor"),
        ("operator", "operator/specserver_operator"),
    ):
        tests = REPO / "tests" / side
        allowed = _layers(REPO / root) | TEST_FOLDERS_BESIDE_LAYERS[side]
        folders = {p.parent.name for p in tests.glob("*/test_*.py")}
        assert folders <= allowed, f"tests/{side}: {sorted(folders - allowed)} is no layer"
        loose = sorted(p.name for p in tests.glob("test_*.py"))
        assert not loose, f"tests/{side}: move {loose} into the folder of the layer they test"
        assert (tests / "conftest.py").is_file()
    for suite in ("advisor", "operator", "engine", "cluster", "oracle"):
        assert (REPO / "tests" / suite / "conftest.py").is_file(), f"tests/{suite}/conftest.py"


def test_test_module_names_are_unique() -> None:
    """Test folders have no __init__.py (pytest's rootdir imports): two test modules with one
    name would collide, so each basename appears once under tests/."""
    names = [p.name for p in (REPO / "tests").rglob("test_*.py")]
    assert len(names) == len(set(names)), sorted({n for n in names if names.count(n) > 1})
