"""The operator's unit tests: one folder per layer of ``operator/specserver_operator``
(``core``: desired state and rendering, ``kube``: the API client stack, ``reconcile``: one pass,
``loop``: the shared cycle and leader election, ``webhook``: admission, ``metrics``, ``main``:
the entry point and settings). They run the operator's code against our own seams (a recorded
API, a fake clock); everything against the real apiserver lives under ``tests/cluster``.
"""

from collections.abc import Iterator

import pytest

from specserver_operator.reconcile import controller


@pytest.fixture(autouse=True)
def fresh_default_pass_cache() -> Iterator[None]:
    """Every test starts with an empty default pass cache: ``controller.reconcile`` memoises
    per uid in ``controller.DEFAULT``, and the fakes share one uid, so a test that ran earlier
    in the same worker would otherwise hand its renderings and status record to the next."""
    controller.clear_caches()
    yield
    controller.clear_caches()
