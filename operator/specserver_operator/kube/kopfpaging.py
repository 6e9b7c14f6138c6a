"""kopf's paged initial LIST starts again when its continue token expires, instead of ending
the operator.

handlers.py has kopf list each watched kind in pages of ``client.LIST_PAGE``
(``settings.watching.chunk_size``: a whole LIST of a thousand Deployments parsed at once was the
operator's peak RSS). kopf 1.45 pages in ``kopf._cogs.clients.fetching.fetch_objs``; a page
asked for with a continue token that etcd has compacted past (an event loop starved between
pages, on a loaded node) is answered 410 Gone ("The provided continue parameter is too old"),
which kopf raises as ``APIClientError``. Neither ``watching.continuous_watch`` (connection errors
and timeouts only) nor ``watching.infinite_watch`` (429 only) catches it: the watcher task
fails and kopf stops the operator.

``install`` wraps ``fetch_objs`` (``continuous_watch`` calls it through the module, so the
wrapper is what it runs): a listing whose token expired starts again from the first page, and
after ``PAGED_ATTEMPTS`` expired listings it lists in one request (no continue token to expire).
The objects of the pages already yielded are yielded again; kopf passes them on as initial
listing events (type None), which the object cache takes as the same objects. One deleted in
between stays in the cache until the cycle's own LIST replaces it (informer.py, at most
``RESYNC_S`` later); the watch starts from the last listing's resourceVersion.

``fetch_objs`` and ``settings.watching.chunk_size`` exist from kopf 1.45 (1.44 lists in one
request, ``list_objs``), and both are kopf's private API: pyproject.toml pins ``KOPF_RANGE``.
``install`` (main.py before kopf starts, handlers.py on kopf's start-up) refuses to start, naming
what is missing, on a kopf without them, instead of starting an operator that stops at the
first expired continue token.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import inspect
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import kopf
from kopf._cogs.clients import errors, fetching
from kopf._cogs.configs import configuration

log = logging.getLogger("specserver.kopfpaging")
#: Paged listings whose token expired before one listing is done in a single request.
PAGED_ATTEMPTS = 2
GONE = 410
#: The kopf releases whose paged listing this wrapper knows (pyproject.toml's pin).
KOPF_RANGE = ">=1.45,<1.46"
#: The keyword arguments kopf passes ``fetch_objs`` (and the wrapper reads ``settings`` of).
FETCH_KEYWORDS = ("settings", "resource", "namespace", "logger")


class UnsupportedKopf(kopf.PermanentError):
    """The installed kopf lacks the paged listing ``install`` wraps (permanent: kopf stops on
    a start-up handler raising it instead of retrying)."""


Fetch = Callable[..., AsyncIterator[Any]]


def restarting(fetch: Fetch) -> Fetch:
    """``fetch`` (kopf's ``fetch_objs``), started again when a page answers 410 Gone."""

    async def fetch_objs(**kwargs: Any) -> AsyncIterator[Any]:
        attempt = 0
        while True:
            attempt += 1
            if attempt > PAGED_ATTEMPTS:
                settings = kwargs["settings"]
                watching = dataclasses.replace(settings.watching, chunk_size=None)
                kwargs = dict(kwargs, settings=dataclasses.replace(settings, watching=watching))
            try:
                async for page in fetch(**kwargs):
                    yield page
                return
            except errors.APIClientError as exc:
                if exc.status != GONE or attempt > PAGED_ATTEMPTS:
                    raise
                log.warning(
                    "listing %s: continue token expired (410 Gone); listing again%s",
                    kwargs.get("resource"),
                    " in one request" if attempt == PAGED_ATTEMPTS else "",
                )

    fetch_objs.wrapped = fetch  # type: ignore[attr-defined]
    return fetch_objs


def missing() -> str | None:
    """What of kopf's paged listing the wrapper needs and the installed kopf lacks (None: all)."""
    fetch = getattr(fetching, "fetch_objs", None)
    if fetch is None:
        return "kopf._cogs.clients.fetching.fetch_objs (kopf 1.44 and older list in one request)"
    fetch = getattr(fetch, "wrapped", fetch)
    if not inspect.isasyncgenfunction(fetch):
        return "kopf._cogs.clients.fetching.fetch_objs as an async generator"
    params = inspect.signature(fetch).parameters
    absent = [k for k in FETCH_KEYWORDS if k not in params]
    if absent:
        return f"the keyword argument(s) {', '.join(absent)} of fetch_objs"
    if "chunk_size" not in {f.name for f in dataclasses.fields(configuration.WatchingSettings)}:
        return "settings.watching.chunk_size"
    if not isinstance(getattr(errors.APIError, "status", None), property):
        return "kopf._cogs.clients.errors.APIError.status"
    return None


def install() -> None:
    """Wrap kopf's ``fetch_objs`` (once; a second call changes nothing).

    Raises:
        UnsupportedKopf: the installed kopf lacks what is wrapped, named, with the range needed.
    """
    problem = missing()
    if problem is not None:
        raise UnsupportedKopf(
            f"kopf {importlib.metadata.version('kopf')} lacks {problem}: specserver-operator "
            f"needs kopf{KOPF_RANGE} (pyproject.toml), whose paged initial LIST kopfpaging.py "
            "restarts on 410 Gone"
        )
    if not hasattr(fetching.fetch_objs, "wrapped"):
        fetching.fetch_objs = restarting(fetching.fetch_objs)
