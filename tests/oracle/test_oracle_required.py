"""CI cannot run green without the oracle: scripts/test fails, with the reason, when the SGLang
environment cannot be built, and the oracle tests fail instead of skipping when it requires them.

Both run for real in child processes against an oracle cache that cannot be written
(``SPECSERVER_CACHE`` under a regular file), so no package index is asked; scripts/test's other
installers (the kube-apiserver build, Prometheus, the project venv) are replaced by a ``python3``
that answers them, the one seam here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import oracle

REPO = oracle.REPO


def _unbuildable_cache(tmp_path: Path) -> Path:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    return blocker / "cache"


def test_scripts_test_fails_with_the_reason_when_the_oracle_env_cannot_be_built(
    tmp_path: Path,
) -> None:
    shim = tmp_path / "bin"
    shim.mkdir()
    # The other installers of scripts/test succeed at once; oracleenv.py runs for real.
    (shim / "python3").write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        f'  scripts/oracleenv.py) exec {sys.executable} "$@" ;;\n'
        "  *) exit 0 ;;\n"
        "esac\n"
    )
    (shim / "python3").chmod(0o755)
    env = dict(
        os.environ,
        PATH=f"{shim}:{os.environ['PATH']}",
        SPECSERVER_CACHE=str(_unbuildable_cache(tmp_path)),
    )
    done = subprocess.run(
        [str(REPO / "scripts" / "test"), "--collect-only", "-q", "tests/test_layout.py"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=REPO,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "oracle environment could not be built" in done.stderr
    assert "Not a directory" in done.stderr  # the reason, from oracleenv.py
    assert "== pytest" not in done.stdout and "== ruff" not in done.stdout


def test_the_oracle_tests_fail_rather_than_skip_when_required(tmp_path: Path) -> None:
    env = dict(os.environ, SPECSERVER_CACHE=str(_unbuildable_cache(tmp_path)))
    env.pop(oracle.REQUIRE_ENV, None)
    test = str(REPO / "tests" / "oracle" / "test_kv_arithmetic.py")
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", test]
    skipped = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, cwd=REPO)
    assert skipped.returncode == 0 and "skipped" in skipped.stdout, skipped.stdout
    assert "oracle environment" in skipped.stdout and "is missing" in skipped.stdout
    env[oracle.REQUIRE_ENV] = "1"
    failed = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, cwd=REPO)
    assert failed.returncode == 1, failed.stdout
    assert "SPECSERVER_REQUIRE_ORACLE is set" in failed.stdout and "is missing" in failed.stdout
