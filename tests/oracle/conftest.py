"""The differential oracle's tests: SGLang 0.5.23 itself, run in its cached environment behind
one worker process for the whole pytest session (``sglang``), never imported here.

Every test of this folder joins one xdist group (``oracle``), so under ``pytest -n`` they run in
one worker and the SGLang worker (about 5 s to import SGLang) starts once per run. The generated
launches are a rotating sample: ``SPECSERVER_ORACLE_SEED`` (drawn per run by tests/conftest.py
and printed in the header) and ``SPECSERVER_ORACLE_CASES`` (default 1,000) reproduce a run; the
full 5,000+ launch set is the benchmark ``scripts/bench-fidelity``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import oracle


@pytest.fixture(scope="session")
def sglang() -> Iterator[oracle.Oracle]:
    """One SGLang worker for the session (skipped, or failed under scripts/test, without the
    oracle environment: ``oracle.worker_or_skip``)."""
    yield from oracle.worker_or_skip()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = str(config.rootpath / "tests" / "oracle")
    for item in items:
        if str(item.path).startswith(here):
            item.add_marker(pytest.mark.xdist_group("oracle"))
