"""The client side of the SGLang oracle: start the worker in the cached SGLang environment.

``Oracle`` runs ``tests/oracle/sglang_worker.py`` with the interpreter of
``$SPECSERVER_CACHE/sglang-0.5.23`` (built by ``scripts/oracle-env install``) and exchanges one
JSON line per launch. ``missing()`` says, in one sentence, why the oracle cannot run (used as the
skip message of the oracle tests and by scripts/bench-fidelity). The project venv never imports
sglang or torch.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from specserver_advisor.gpus import Gpu

REPO = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("sglang_worker.py")


def load_oracleenv() -> ModuleType:
    """Import scripts/oracleenv.py (a script, not a package module)."""
    spec = importlib.util.spec_from_file_location("oracleenv", REPO / "scripts" / "oracleenv.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["oracleenv"] = module
    spec.loader.exec_module(module)
    return module


def missing() -> str | None:
    """Why the oracle cannot run here, or None when it can."""
    env = load_oracleenv()
    if env.ready():
        return None
    reason = ""
    if env.FAILED.exists():
        reason = ": " + env.FAILED.read_text().strip().splitlines()[-1][:300]
    return (
        f"the SGLang {env.SGLANG_VERSION} oracle environment {env.ENV_DIR} is missing "
        f"(build it with `scripts/oracle-env install`; it needs sglang=={env.SGLANG_VERSION}, "
        f"torch==2.14.1 and transformers==5.19.0 from the package index){reason}"
    )


class OracleError(RuntimeError):
    """The worker died or answered something that is not JSON."""


class Oracle:
    """One long-lived SGLang worker process."""

    def __init__(self) -> None:
        env = load_oracleenv()
        self.proc = subprocess.Popen(
            [str(env.PYTHON), str(WORKER), "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            bufsize=1,
        )
        hello = self._read()
        if not hello.get("ready"):
            raise OracleError(f"worker did not start: {hello}")

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise OracleError(f"worker exited with {self.proc.poll()}")
        try:
            answer: dict[str, Any] = json.loads(line)
        except ValueError as exc:
            raise OracleError(f"worker answered {line[:200]!r}") from exc
        return answer

    def resolve(
        self,
        argv: list[str],
        gpu: Gpu,
        env: dict[str, str] | None = None,
        context: bool = True,
    ) -> dict[str, Any]:
        """SGLang's answer for one launch on one GPU (see sglang_worker.py for the shape)."""
        assert self.proc.stdin is not None
        request = {
            "argv": argv,
            "gpu": {"memory_mib": gpu.memory_mib, "capability": list(gpu.capability)},
            "env": env or {},
            "context": context,
        }
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def kv_dtype_bytes(self, **request: Any) -> dict[str, Any]:
        """SGLang's ``configure_kv_cache_dtype`` with explicit inputs (see sglang_worker.py)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": "kv_dtype", **request}) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        """Stop the worker (closing stdin ends its loop)."""
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


#: Set by scripts/test (and so CI): a missing oracle environment fails the oracle tests.
REQUIRE_ENV = "SPECSERVER_REQUIRE_ORACLE"


def required(env: dict[str, str] | None = None) -> bool:
    """Whether this run must have the oracle (scripts/test sets ``SPECSERVER_REQUIRE_ORACLE``;
    any non-empty value but ``0`` counts)."""
    value = (os.environ if env is None else env).get(REQUIRE_ENV, "")
    return value not in ("", "0")


def sglang_file(relative: str) -> Path:
    """A file of SGLang 0.5.23's installed source (``srt/...``), to read (skipped, or failed
    when the oracle is required, without the environment)."""
    import pytest

    why = missing()
    if why and required():
        pytest.fail(f"{REQUIRE_ENV} is set and {why}", pytrace=False)
    if why:
        pytest.skip(why)
    env = load_oracleenv()
    found = sorted(Path(env.ENV_DIR).glob(f"lib/python*/site-packages/sglang/{relative}"))
    assert found, relative
    return found[0]


def sglang_function(relative: str, name: str, namespace: dict[str, Any]) -> Any:
    """The function ``name`` of SGLang's source file ``relative`` (``srt/...``), defined in
    ``namespace`` (the globals it reads, stubbed) without its decorators: SGLang's own code,
    run on the facts a test gives it."""
    path = sglang_file(relative)
    tree = ast.parse(path.read_text())
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)
    node.decorator_list = []
    exec(compile(ast.Module(body=[node], type_ignores=[]), str(path), "exec"), namespace)
    return namespace[name]


def worker_or_skip() -> Iterator[Oracle]:
    """The oracle tests' module fixture: a worker, closed after. When the SGLang environment is
    missing: a failure saying why under scripts/test (``required``), else a skip saying why
    (``sglang = pytest.fixture(scope="module")(...)``)."""
    import pytest  # the tests' dependency only; scripts/bench-fidelity imports this module too

    why = missing()
    if why and required():
        pytest.fail(f"{REQUIRE_ENV} is set and {why}", pytrace=False)
    if why:
        pytest.skip(why)
    worker = Oracle()
    yield worker
    worker.close()
