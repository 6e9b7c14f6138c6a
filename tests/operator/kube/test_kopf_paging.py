"""kopfpaging wraps a private kopf function: the pin in pyproject.toml is the range it knows, and
on a kopf without that function the operator refuses to start, naming what is missing, instead
of running until the first expired continue token stops it (kopfpaging.py). The restart itself
runs against the real apiserver in tests/cluster/test_kopf_paging_e2e.py."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import tomllib

import kopf
import pytest
from kopf._cogs.clients import fetching

from specserver_operator.kube import kopfpaging
from stack import REPO


def test_the_pin_is_the_range_the_wrapper_knows_and_the_installed_kopf_is_in_it() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    pins = [d for d in project["dependencies"] if d.startswith("kopf")]
    assert pins == [f"kopf{kopfpaging.KOPF_RANGE}"]
    major, minor = (int(p) for p in importlib.metadata.version("kopf").split(".")[:2])
    assert (major, minor) == (1, 45)
    assert kopfpaging.missing() is None


def test_install_wraps_once(monkeypatch: pytest.MonkeyPatch) -> None:
    original = getattr(fetching.fetch_objs, "wrapped", fetching.fetch_objs)
    monkeypatch.setattr(fetching, "fetch_objs", original)
    kopfpaging.install()
    wrapped = fetching.fetch_objs
    kopfpaging.install()
    assert fetching.fetch_objs is wrapped and wrapped.wrapped is original  # type: ignore[attr-defined]


def test_a_kopf_without_paged_listing_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """kopf 1.44's fetching module has ``list_objs`` (one request) and no ``fetch_objs``."""
    monkeypatch.delattr(fetching, "fetch_objs")
    with pytest.raises(kopfpaging.UnsupportedKopf) as refused:
        kopfpaging.install()
    message = str(refused.value)
    assert "fetch_objs" in message and "kopf>=1.45,<1.46" in message
    assert isinstance(refused.value, kopf.PermanentError)  # kopf stops, it does not retry


def test_a_fetch_objs_of_another_shape_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    async def fetch_objs(*, settings: object, resource: object) -> object:
        yield None

    monkeypatch.setattr(fetching, "fetch_objs", fetch_objs)
    assert kopfpaging.missing() == "the keyword argument(s) namespace, logger of fetch_objs"


def test_the_operator_does_not_start_on_such_a_kopf() -> None:
    program = (
        "from kopf._cogs.clients import fetching\n"
        "del fetching.fetch_objs\n"
        "from specserver_operator.main import main\n"
        "raise SystemExit(main([]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2, done.stderr
    assert "lacks kopf._cogs.clients.fetching.fetch_objs" in done.stderr
    assert "Traceback" not in done.stderr
