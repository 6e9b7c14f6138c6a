"""The fast tier is ``pytest -m "not cluster"``: no test it selects starts the local control
plane or Prometheus (the ``CLUSTER_FIXTURES``, used directly or through another fixture), every
file with such a test declares ``pytestmark = pytest.mark.cluster`` (conftest.py also marks
each one from its fixtures), and no test file imports ``conftest`` (shared helpers: stack.py)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from stack import CLUSTER_FIXTURES, REPO

TESTS = REPO / "tests"
#: Collects in a fresh interpreter, recording what ``-m "not cluster"`` selects and deselects.
PROBE = """
import json, sys, pytest
class Probe:
    selected, deselected = {}, {}
    def pytest_deselected(self, items):
        self.deselected.update({i.nodeid: sorted(i.fixturenames) for i in items})
    def pytest_collection_finish(self, session):
        self.selected.update({i.nodeid: sorted(i.fixturenames) for i in session.items})
probe = Probe()
args = ["--collect-only", "-q", "-p", "no:cacheprovider", "-m", "not cluster", sys.argv[2]]
code = pytest.main(args, plugins=[probe])
with open(sys.argv[1], "w") as out:
    json.dump({"code": int(code), "selected": probe.selected, "deselected": probe.deselected}, out)
"""


def test_not_cluster_selects_no_test_that_uses_the_control_plane(tmp_path: Path) -> None:
    out = tmp_path / "collected.json"
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(out), str(TESTS)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.exists(), done.stdout[-2000:] + done.stderr[-2000:]
    found = json.loads(out.read_text())
    assert found["code"] == 0, done.stdout[-2000:]
    selected, deselected = found["selected"], found["deselected"]
    assert selected and deselected
    fast_but_cluster = [n for n, names in selected.items() if CLUSTER_FIXTURES & set(names)]
    assert fast_but_cluster == []
    # Every file of a test that uses them says so itself, not only through conftest's hook.
    cluster_files = {
        n.split("::")[0] for n, names in deselected.items() if CLUSTER_FIXTURES & set(names)
    }
    assert cluster_files
    undeclared = [
        f for f in sorted(cluster_files) if "pytestmark = pytest.mark.cluster" not in _text(f)
    ]
    assert undeclared == []


def _text(nodeid_path: str) -> str:
    path = REPO / nodeid_path
    return (path if path.exists() else TESTS / nodeid_path).read_text()


def test_no_test_file_imports_conftest() -> None:
    importing = []
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""] + [a.name for a in node.names if not node.level]
            if any(n.split(".")[-1] == "conftest" for n in names):
                importing.append(str(path.relative_to(REPO)))
    assert importing == []
